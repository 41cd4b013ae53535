#!/usr/bin/env bash
# Side-by-side: every architecture on /hello and on /guestbook (Redis store), driven by
# ApacheBench with -c 50 and keep-alive off (a connection per request, as the ZeroHTTPd study
# measured), in one run. Reports requests/s and the server's CPU per request in microseconds,
# read from the server's own stop line (its CPU plus its reaped children's). Every
# architecture the binary has is measured (the list `sweep --list` prints), each in every
# accept mode it takes (reactors: `reactors/reuseport`, its default, and `reactors/shared`),
# so a new architecture or mode appears here with no edit. One that cannot serve here (uring
# where io_uring is unavailable) gets a row saying why.
#
# Usage: benches/architectures.sh [REQUESTS]   (default 5000 per point)
# Installs apache2-utils and redis-server from Debian's packages when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-5000}

. benches/install.sh
bench_need ab:apache2-utils redis-server:redis-server
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
row="%-20s %-11s %10s %12s %7s %7s\n"
printf "$row" arch route "req/s" "cpu_us/req" errors non2xx
# Every architecture the binary has (the list `sweep --list` prints), so new ones appear here.
archs=$("$bin" sweep --list | sed -n '/^Architectures:/,$p' | awk 'NR > 1 && NF { print $1 }')
# The accept modes (`serve --help`'s possible values of --accept).
modes=$("$bin" serve --help | sed -n '/--accept </,/^ *--/p' | sed -n 's/^ *- \([a-z]*\):.*/\1/p')
# Whether `serve` takes --accept for an architecture: a bad --idle-timeout (checked after
# --accept) makes both answers exit 2 at once, without serving.
takes_accept() {
    local refusal
    refusal=$("$bin" serve --arch "$1" --accept "${modes%%$'\n'*}" --port 0 --idle-timeout 0 2>&1 || true)
    [[ $refusal != *--accept* ]]
}
variants=()
for arch in $archs; do
    if takes_accept "$arch"; then
        for mode in $modes; do variants+=("$arch/$mode"); done
    else
        variants+=("$arch")
    fi
done
for variant in "${variants[@]}"; do
    arch=${variant%%/*}
    flags=()
    [ "$variant" != "$arch" ] && flags=(--accept "${variant#*/}")
    for route in /hello /guestbook; do
        "$bin" serve --arch "$arch" "${flags[@]}" --port 0 \
            --store "redis://127.0.0.1:$redis_port" >"$work/out" 2>"$work/err" &
        server_pid=$!
        touch "$work/out"
        for _ in $(seq 100); do
            grep -q listening "$work/out" && break
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.05
        done
        port=$(sed -n 's/.*:\([0-9]*\) arch=.*/\1/p' "$work/out")
        if [ -z "$port" ]; then
            kill "$server_pid" 2>/dev/null || true
            wait "$server_pid" || true
            server_pid=
            printf "%-20s %-11s did not serve: %s\n" "$variant" "$route" "$(head -1 "$work/err")"
            continue
        fi
        ab -q -c 50 -n "$requests" "http://127.0.0.1:$port$route" >"$work/ab" 2>&1 || true
        kill -TERM "$server_pid"
        wait "$server_pid" || true
        server_pid=
        rps=$(awk '/Requests per second/ {print $4}' "$work/ab")
        errors=$(sed -n 's/.*(Connect: \([0-9]*\), Receive: \([0-9]*\), Length: [0-9]*, Exceptions: \([0-9]*\))/\1 \2 \3/p' "$work/ab" |
            awk '{print $1 + $2 + $3}')
        non2xx=$(awk '/Non-2xx responses/ {print $3}' "$work/ab")
        cpu=$(sed -n 's/.*served \([0-9]*\) requests.*cpu user \([0-9.]*\) s, system \([0-9.]*\) s/\1 \2 \3/p' "$work/out" |
            awk '{ if ($1 > 0) printf "%.1f", ($2 + $3) * 1e6 / $1; else print "n/a" }')
        printf "$row" "$variant" "$route" "${rps:-n/a}" "$cpu" "${errors:-0}" "${non2xx:-0}"
    done
done
