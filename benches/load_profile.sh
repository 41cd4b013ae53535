#!/usr/bin/env bash
# benches/load_profile.sh: where a load generator's CPU goes per request, `sweetspot load`
# beside wrk, against the same nginx (pinned as in generators.sh: nginx CPU 0, tools CPU 1).
#
# For each tool: system calls per request (strace -c -f, one run) and where the CPU time goes
# (perf record -g, another run; kernel vs user, and the share under each system call).
# strace slows the tool down, so only its call counts are used, never its times.
#
#   benches/load_profile.sh          # 4 s runs, -t 1 -c 50
#
# Needs nginx, wrk, strace and perf (apt-get install nginx wrk strace linux-perf).
# Writes its output to benches/load_profile.txt as well.
set -euo pipefail

DURATION=${DURATION:-4}
CONNECTIONS=${CONNECTIONS:-50}
export PATH="$PATH:/usr/sbin:/sbin"
repo=$(cd "$(dirname "$0")/.." && pwd)
output="$repo/benches/load_profile.txt"
for tool in nginx wrk strace perf; do
    command -v "$tool" >/dev/null || { echo "load_profile: $tool is missing" >&2; exit 1; }
done

. "$repo/benches/static_nginx.sh"
static_nginx_start 1 taskset -c 0
# The release build with line tables, so that perf can name our own lines.
(cd "$repo" && cargo build --profile profiling --quiet)
sweetspot="$repo/target/profiling/sweetspot"

# Runs tool $1 under the command prefix in $2..., prints the completed requests.
run() {
    local tool=$1
    shift
    if [ "$tool" = sweetspot ]; then
        "$@" taskset -c 1 "$sweetspot" load "$url" -t 1 -c "$CONNECTIONS" -d "${DURATION}s" -q \
            --json "$tmp/s.json" >/dev/null
        grep -m1 '"requests":' "$tmp/s.json" | tr -dc '0-9'
    else
        "$@" taskset -c 1 wrk -t 1 -c "$CONNECTIONS" -d "${DURATION}s" "$url" >"$tmp/w.out"
        awk '/requests in/ {print $1}' "$tmp/w.out"
    fi
}

{
    echo "# where the CPU goes per request: sweetspot load vs wrk, -t 1 -c $CONNECTIONS -d ${DURATION}s against nginx"
    echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -sr), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# nginx pinned to CPU 0, the tool to CPU 1"
} | tee "$output"
for tool in sweetspot wrk; do
    requests=$(run "$tool" strace -f -c -o "$tmp/strace.txt")
    {
        echo
        echo "## $tool: system calls per request (strace -c -f; $requests requests)"
        # strace -c columns: % time, seconds, usecs/call, calls, [errors,] syscall.
        awk -v n="$requests" '/^ *[0-9]/ && $4 / n >= 0.001 {
                printf "  %-14s %8.3f per request\n", ($NF == "total" ? "all calls" : $NF), $4 / n
            }' "$tmp/strace.txt"
    } | tee -a "$output"
    requests=$(run "$tool" perf record -q -F 2000 -g -o "$tmp/perf.data")
    {
        echo
        echo "## $tool: CPU by place (perf record -g; $requests requests)"
        perf report -i "$tmp/perf.data" --no-children --sort dso -g none 2>/dev/null |
            awk '/^ +[0-9.]+%/ && $1+0 >= 0.5 {printf "  %7s  %s\n", $1, $2}'
        echo "  under each system call (children, >= 2%):"
        perf report -i "$tmp/perf.data" --children --sort sym -g none 2>/dev/null |
            awk '/^ +[0-9.]+%/ && $1+0 >= 2 && ($4 ~ /^__x64_sys_|^__send$|^__GI___libc_write$|^read$|^epoll_wait$|^epoll_ctl$|^clock_nanosleep/ || $4 ~ /^(process_backlog|tcp_v4_rcv|tcp_recvmsg|finish_task_switch)/) {printf "  %7s  %s\n", $1, $4}'
    } | tee -a "$output"
done
