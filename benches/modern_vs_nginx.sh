#!/usr/bin/env bash
# Side by side in one run: nginx (1 worker, then 2) against our uring (1 worker), epoll and
# reactors (2 workers) on a "Hello, World!" answer over keep-alive, each driven by
# wrk -t1 -c50. Reports requests/s and the server's CPU per request, read from /proc before
# and after (utime + stime of the server's whole process tree: nginx's master and workers, all
# of our server's threads), and the ratios issue 7 asks for: uring / nginx-1-worker CPU per
# request, reactors-2 / nginx-2-workers requests/s and CPU per request.
#
# The server is pinned to CPU 0 and wrk to CPU 1 (taskset), so the 2-worker rows share one core
# on both sides: they measure the cost of the second worker, not a second core.
# nginx answers from its config (`return 200 "Hello, World!"`), with access logging off and
# keepalive_requests raised so that, like ours, it never closes a busy keep-alive connection.
#
# Usage: benches/modern_vs_nginx.sh [SECONDS]   (default 10 per row)
# Installs nginx and wrk from Debian's packages when missing (as root), without letting the
# package start nginx's own service.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}

need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v wrk >/dev/null || need+=(wrk)
command -v taskset >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
    # policy-rc.d exit 101: the package's scripts may not start services (nginx on port 80).
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
cargo build --release --quiet
bin=$PWD/target/release/sweetspot
work=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# CPU seconds (utime + stime) of process PID and all its descendants, from /proc.
tree_cpu() {
    python3 - "$1" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
stats = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    # After the command: state ppid ... utime (14th field of the line) stime (15th).
    stats[int(pid)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
tree, todo = set(), [int(sys.argv[1])]
while todo:
    pid = todo.pop()
    if pid in stats and pid not in tree:
        tree.add(pid)
        todo += [p for p, (ppid, _) in stats.items() if ppid == pid]
print(sum(stats[p][1] for p in tree) / hz)
PY
}

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "server on port $1 did not come up" >&2
    return 1
}

# Drives the running server (server_pid on port) and prints "req/s cpu_us_per_req errors".
measure() {
    local port=$1 before after
    before=$(tree_cpu "$server_pid")
    taskset -c 1 wrk -t1 -c50 -d"${seconds}s" "http://127.0.0.1:$port/hello" >"$work/wrk" 2>&1 || true
    after=$(tree_cpu "$server_pid")
    local requests rps errors
    requests=$(awk '/requests in/ {print $1}' "$work/wrk")
    rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk")
    # Socket errors (connect, read, write, timeout) plus answers other than 2xx/3xx.
    errors=$(awk '/Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10}
                  /Non-2xx/ {n += $5} END {print n + 0}' "$work/wrk")
    awk -v r="${requests:-0}" -v rps="${rps:-0}" -v b="$before" -v a="$after" -v e="$errors" \
        'BEGIN { printf "%s %s %s\n", rps, (r > 0 ? sprintf("%.2f", (a - b) * 1e6 / r) : "n/a"), e }'
}

stop_server() {
    kill -"$1" "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}

run_nginx() {
    local workers=$1 port
    port=$(free_port)
    mkdir -p "$work/nginx"
    cat >"$work/nginx.conf" <<CONF
worker_processes $workers;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen 127.0.0.1:$port;
        location / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
    }
}
CONF
    taskset -c 0 "$nginx_bin" -c "$work/nginx.conf" -p "$work/nginx" >"$work/nginx.out" 2>&1 &
    server_pid=$!
    wait_port "$port"
    sleep 0.2 # the workers start after the master listens
    measure "$port"
    stop_server QUIT
}

run_ours() {
    local arch=$1 port
    shift
    taskset -c 0 "$bin" serve --arch "$arch" --port 0 "$@" >"$work/out" 2>"$work/err" &
    server_pid=$!
    touch "$work/out"
    for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.05; done
    port=$(sed -n 's/.*:\([0-9]*\) arch=.*/\1/p' "$work/out")
    if [ -z "$port" ]; then
        echo "n/a n/a $(head -1 "$work/err")"
        stop_server TERM
        return
    fi
    measure "$port"
    stop_server TERM
}

echo "# modern vs nginx: wrk -t1 -c50 -d${seconds}s on /hello, keep-alive; server on CPU 0, wrk on CPU 1"
echo "# $(nproc) cores, $(uname -sr), $("$nginx_bin" -v 2>&1 | sed 's/.*: //'), $(date -u +%Y-%m-%dT%H:%MZ)"
printf "%-22s %12s %16s %7s\n" server "req/s" "cpu_us/req" errors
declare -A rps cpu
row() {
    local name=$1 line r c
    shift
    line=$("$@")
    read -r r c _ <<<"$line"
    rps[$name]=$r
    cpu[$name]=$c
    printf "%-22s %12s %16s %7s\n" "$name" $line
}
row nginx-1-worker run_nginx 1
row nginx-2-workers run_nginx 2
archs=$("$bin" sweep --list | sed -n '/^Architectures:/,$p' | awk 'NR > 1 && NF { print $1 }')
if grep -qx uring <<<"$archs"; then
    row "uring --workers 1" run_ours uring --workers 1
else
    echo "# uring: not an architecture of this build; skipped"
fi
row epoll run_ours epoll
row "reactors --workers 2" run_ours reactors --workers 2

ratio() { # ratio NAME A B KEY: A's KEY over B's, or n/a
    awk -v a="$2" -v b="$3" -v n="$1" 'BEGIN {
        if (a + 0 > 0 && b + 0 > 0) printf "%-44s %.3f\n", n, a / b; else printf "%-44s n/a\n", n }'
}
echo
echo "# ratios (CPU per request: lower is better; req/s: higher is better)"
ratio "uring-1 / nginx-1-worker cpu per request" "${cpu[uring --workers 1]:-}" "${cpu[nginx-1-worker]}"
ratio "epoll / nginx-1-worker cpu per request" "${cpu[epoll]}" "${cpu[nginx-1-worker]}"
ratio "reactors-2 / nginx-2-workers req/s" "${rps[reactors --workers 2]}" "${rps[nginx-2-workers]}"
ratio "reactors-2 / nginx-2-workers cpu per request" "${cpu[reactors --workers 2]}" "${cpu[nginx-2-workers]}"
