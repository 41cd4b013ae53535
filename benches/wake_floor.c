/* The floor under a precise sender: what one timed wakeup costs this machine's CPU.
 * Sleeps to absolute deadlines GAP_NS apart for 3 s (clock_nanosleep, timer slack 1 ns, as
 * the load engine's timers) and prints the wakeups, the CPU per wakeup (getrusage: user +
 * system) and how late the wakeups were. A sender that puts each request out at its own time
 * needs one such wakeup per send (at 20,000/s the gaps are 50 us, too long to spin through).
 * Built and run by benches/rate_cost.py. Usage: wake_floor GAP_NS */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

int main(int argc, char **argv) {
    long gap = argc > 1 ? atol(argv[1]) : 50000;
    if (gap <= 0) {
        fprintf(stderr, "usage: wake_floor GAP_NS\n");
        return 2;
    }
    prctl(PR_SET_TIMERSLACK, 1);
    long n = 3000000000L / gap;
    struct timespec t, now;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double late = 0;
    for (long i = 0; i < n; i++) {
        t.tv_nsec += gap;
        while (t.tv_nsec >= 1000000000L) {
            t.tv_nsec -= 1000000000L;
            t.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        late += (now.tv_sec - t.tv_sec) * 1e9 + (now.tv_nsec - t.tv_nsec);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
                    ru.ru_stime.tv_usec;
    printf("%ld %.3f %.3f\n", n, cpu_us / n, late / n / 1000.0);
    return 0;
}
