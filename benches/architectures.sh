#!/usr/bin/env bash
# Side-by-side: every architecture on /hello and on /guestbook (Redis store), driven by
# ApacheBench with -c 50 and keep-alive off (a connection per request, as the ZeroHTTPd study
# measured), in one run. Reports requests/s and the server's CPU seconds per 10,000 requests,
# read from the server's own stop line (its CPU plus its reaped children's).
#
# Usage: benches/architectures.sh [REQUESTS]   (default 5000 per point)
# Installs apache2-utils and redis-server from Debian's packages when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-5000}

need=()
command -v ab >/dev/null || need+=(apache2-utils)
command -v redis-server >/dev/null || need+=(redis-server)
if ((${#need[@]})); then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release --quiet
bin=target/release/sweetspot
work=$(mktemp -d)
redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null &
redis_pid=$!
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    kill "$redis_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
sleep 0.5

echo "# sweetspot architectures: ab -c 50 -n $requests, keep-alive off, Redis store"
echo "# $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%dT%H:%MZ)"
# errors: ab's connect, receive and exception failures (not "Length": the guestbook page grows
# as the visitor count gains digits); non2xx: answers other than 2xx/3xx.
printf "%-12s %-11s %10s %16s %7s %7s\n" arch route "req/s" "cpu_s/10k_req" errors non2xx
# Every architecture the binary has (the list `sweep --list` prints), so new ones appear here.
archs=$("$bin" sweep --list | sed -n '/^Architectures:/,$p' | awk 'NR > 1 && NF { print $1 }')
for arch in $archs; do
    for route in /hello /guestbook; do
        "$bin" serve --arch "$arch" --port 0 --store "redis://127.0.0.1:$redis_port" \
            >"$work/out" 2>"$work/err" &
        server_pid=$!
        touch "$work/out"
        for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.05; done
        port=$(sed -n 's/.*:\([0-9]*\) arch=.*/\1/p' "$work/out")
        ab -q -c 50 -n "$requests" "http://127.0.0.1:$port$route" >"$work/ab" 2>&1 || true
        kill -TERM "$server_pid"
        wait "$server_pid" || true
        server_pid=
        rps=$(awk '/Requests per second/ {print $4}' "$work/ab")
        errors=$(sed -n 's/.*(Connect: \([0-9]*\), Receive: \([0-9]*\), Length: [0-9]*, Exceptions: \([0-9]*\))/\1 \2 \3/p' "$work/ab" |
            awk '{print $1 + $2 + $3}')
        non2xx=$(awk '/Non-2xx responses/ {print $3}' "$work/ab")
        cpu=$(sed -n 's/.*served \([0-9]*\) requests.*cpu user \([0-9.]*\) s, system \([0-9.]*\) s/\1 \2 \3/p' "$work/out" |
            awk '{ if ($1 > 0) printf "%.3f", ($2 + $3) * 10000 / $1; else print "n/a" }')
        printf "%-12s %-11s %10s %16s %7s %7s\n" "$arch" "$route" "${rps:-n/a}" "$cpu" "${errors:-0}" "${non2xx:-0}"
    done
done
