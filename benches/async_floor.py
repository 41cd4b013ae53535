#!/usr/bin/env python3
"""Where the time of `async` and of hyper goes at /hello, 50 keep-alive connections (run by
benches/async_floor.sh): what sets the pace there, the server or wrk.

Each server (2 tokio workers) is pinned to CPU 0 in a cgroup of its own, wrk to CPU 1, in
alternating rounds; then the same with both servers held to half of CPU 0 (a CFS quota), where
the server is the limit. A round reports requests/s; the server's user and system CPU per
request (its cgroup's cpuacct.stat, in the kernel's ticks); its system calls per request
(perf's syscall tracepoints on the server's threads: reads, writes, epoll_wait, futex) and the
requests each epoll_wait found; wrk's epoll_waits per request (the same tracepoint, every CPU,
filtered to wrk) and so the responses each found: in a closed loop the requests wait at the
slower side, so whichever side finds more per wait is the one setting the pace; the server's
threads woken per request (sched_wakeup, filtered to its worker threads); how busy each CPU
was (from /proc/stat: all but idle, and the softirq share, which is where loopback's TCP
receive runs); and how busy wrk kept CPU 1.
The requests/s here are taken with the tracepoints counting, which costs every system call a
little and moves the servers between batching and polling: they say which side set the pace in
that round, not which server is faster (benches/peers.txt compares them untraced).

Usage: benches/async_floor.py SECONDS ROUNDS
"""

import os
import re
import statistics
import subprocess
import sys
import time

from benchlib import run_pinned, start_listening, wrk_counts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "sweetspot")
HYPER = os.path.join(ROOT, "benches", "peers", "target", "release", "hyper_hello")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
CONNS = 50
SYSCALLS = ["recvfrom", "read", "sendto", "writev", "write", "epoll_wait", "futex"]
# The name each server gives its runtime's worker threads (for the wake-up count).
WORKER_THREAD = {"async": "async-worker", "hyper": "tokio-rt-worker"}
WRK_WAIT = "syscalls:sys_enter_epoll_wait"
WAKEUP = "sched:sched_wakeup"


def start(name, share):
    argv = ([OURS, "serve", "--arch", "async", "--workers", "2", "--port", "0"]
            if name == "async" else [HYPER, "0", "2"])
    return start_listening(name, argv, 0, share)


def cpu_times():
    """Per CPU (0 and 1): (busy, softirq, total) jiffies from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu([01]) (.*)", line)
            if m:
                v = [int(x) for x in m.group(2).split()]
                out[int(m.group(1))] = (sum(v[:8]) - v[3] - v[4], v[6], sum(v[:8]))
    return out


def wrk(port, seconds):
    out, _, cpu = run_pinned(["wrk", "-t1", f"-c{CONNS}", f"-d{seconds}s",
                              f"http://127.0.0.1:{port}/hello"], 1)
    requests, rps = wrk_counts(out)
    return requests, rps, cpu / seconds


def perf_stat(target, events):
    """perf counting `events` ((event, filter or None) pairs) on `target` (["-p", PID] or
    ["-a"]) for SECONDS; read it with `perf_counts`."""
    argv = ["perf", "stat", "-x,", *target]
    for event, only in events:
        argv += ["-e", event] + (["--filter", only] if only else [])
    return subprocess.Popen(argv + ["-o", "/dev/stdout", "--", "sleep", str(SECONDS)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def perf_counts(perf):
    """{event: count} once a `perf_stat` has ended."""
    counts = {}
    for line in perf.communicate()[0].decode().splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[0].isdigit():
            counts[parts[2]] = int(parts[0])
    return counts


def measure(name, server, port):
    """One round: a dict of the figures above."""
    own = wide = None
    if HAVE_PERF:
        own = perf_stat(["-p", str(server.proc.pid)],
                        [(f"syscalls:sys_enter_{s}", None) for s in SYSCALLS])
        # wrk's epoll_waits and the server workers' wake-ups, on every CPU.
        wide = perf_stat(["-a"], [(WRK_WAIT, 'comm == "wrk"'),
                                  (WAKEUP, f'comm == "{WORKER_THREAD[name]}"')])
        time.sleep(0.1)  # perf attaches before wrk starts
    split0, cpus0 = server.cpu_split(), cpu_times()
    requests, rps, wrk_busy = wrk(port, SECONDS)
    split1, cpus1 = server.cpu_split(), cpu_times()
    r = {"rps": rps, "wrk": wrk_busy}
    if split0 and split1:
        r["user"] = (split1[0] - split0[0]) * 1e6 / requests
        r["sys"] = (split1[1] - split0[1]) * 1e6 / requests
    for cpu in (0, 1):
        busy, soft, total = (cpus1[cpu][i] - cpus0[cpu][i] for i in range(3))
        r[f"cpu{cpu}"] = busy / max(total, 1)
        r[f"soft{cpu}"] = soft / max(total, 1)
    if own:
        # perf counted a little longer than wrk ran (it attached first): per request over
        # wrk's requests, so the counts are at most a few percent high, alike for both.
        counts, wide_counts = perf_counts(own), perf_counts(wide)
        for s in SYSCALLS:
            r[s] = counts.get(f"syscalls:sys_enter_{s}", 0) / requests
        reads = r["recvfrom"] + r["read"]
        r["per_wait"] = reads / r["epoll_wait"] if r["epoll_wait"] else float("inf")
        wrk_waits = wide_counts.get(WRK_WAIT, 0)
        r["wrk_per_wait"] = requests / wrk_waits if wrk_waits else float("inf")
        r["wakeups"] = wide_counts.get(WAKEUP, 0) / requests
    return r


def main():
    print(f"# async_floor: async and hyper (2 tokio workers each) on CPU 0, wrk -t1 -c{CONNS} "
          f"-d{SECONDS}s on CPU 1, /hello keep-alive, {ROUNDS} alternating rounds, medians")
    print(f"# {os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}, "
          f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}"
          + ("" if HAVE_PERF else "; perf not found: no system call counts"))
    cols = ["rps", "user", "sys", "recv", "send", "epoll", "req/wait", "futex", "wakeups",
            "wrk/wait", "cpu0", "soft0", "cpu1", "soft1", "wrk"]
    print(f"{'server':<8} {'CPU 0':<6} " + " ".join(f"{c:>8}" for c in cols))
    for share in (None, 0.5):
        runs = {"async": [], "hyper": []}
        for r in range(ROUNDS):
            for name in (("async", "hyper") if r % 2 == 0 else ("hyper", "async")):
                server, port = start(name, share)
                try:
                    wrk(port, 1)  # warm-up, not measured
                    runs[name].append(measure(name, server, port))
                finally:
                    server.stop()
        for name, rounds in runs.items():
            def med(key):
                vals = [x[key] for x in rounds if key in x]
                return statistics.median(vals) if vals else None
            row = [med("rps"), med("user"), med("sys")]
            if HAVE_PERF:
                row += [med("recvfrom") + med("read"), med("sendto") + med("writev")
                        + med("write"), med("epoll_wait"), med("per_wait"), med("futex"),
                        med("wakeups"), med("wrk_per_wait")]
            else:
                row += [None] * 7
            row += [med("cpu0"), med("soft0"), med("cpu1"), med("soft1"), med("wrk")]
            fmt = ["{:.0f}", "{:.2f}", "{:.2f}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.1f}", "{:.3f}",
                   "{:.3f}", "{:.1f}", "{:.0%}", "{:.0%}", "{:.0%}", "{:.0%}", "{:.0%}"]
            cells = ["-" if v is None else f.format(v) for f, v in zip(fmt, row)]
            print(f"{name:<8} {'whole' if share is None else f'{share:.0%}':<6} "
                  + " ".join(f"{c:>8}" for c in cells))
            if HAVE_PERF:
                print("#   rounds: " + ", ".join(
                    f"{x['rps']:.0f} {x['per_wait']:.1f} {x['wrk_per_wait']:.1f}"
                    for x in rounds))
        sys.stdout.flush()
    print("# user, sys: server CPU per request, us; recv, send, epoll, futex: the server's "
          "system calls per request; req/wait: reads per epoll_wait; wakeups: the server's "
          "worker threads woken per request; wrk/wait: requests per epoll_wait of wrk; cpu0, "
          "cpu1: how busy each CPU was (all but idle), soft0, soft1: of which softirq; wrk: how "
          "busy wrk kept CPU 1; rps taken with the tracepoints counting (benches/peers.txt "
          "compares the servers untraced); rounds: each round's rps, server req/wait, wrk/wait")


HAVE_PERF = subprocess.run(["sh", "-c", "command -v perf"], capture_output=True).returncode == 0

if __name__ == "__main__":
    main()
