#!/usr/bin/env bash
# One HTTP/2 connection's two ends take turns: h2o (2 threads) over one h2c connection of 100
# streams, loaded by `sweetspot load --h2c` and by h2load in turn. Where neither side reaches
# its core yet together they keep about one busy, a cheaper generator gives a higher figure:
# the measurement behind the limit rule `generator` (turns) in docs/DESIGN.md.
#
# Usage: benches/h2_turns.sh [SECONDS] [ROUNDS] [CONNECTIONS]   (default 4, 3 and 1; output:
# benches/h2_turns.txt, or h2_turns_cN.txt for N connections of 100/N streams, on one load
# thread each tool: the generator at its core, the rule `generator` (its core) in DESIGN.md)
# Each round runs pinned apart (h2o on CPU 0, the generator on CPU 1) and unpinned. Installs
# h2o, h2load and taskset from Debian's packages when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-4}
rounds=${2:-3}
conns=${3:-1}
streams=$((100 / conns))
out_file=benches/h2_turns.txt
[ "$conns" = 1 ] || out_file=benches/h2_turns_c$conns.txt
. benches/install.sh
bench_need h2o:h2o h2load:nghttp2-client taskset:util-linux
cargo build --release --quiet
bin=$PWD/target/release/sweetspot
work=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/htdocs"
printf 'Hello, world!' >"$work/htdocs/hello"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/h2o.conf" <<CONF
listen:
  host: 127.0.0.1
  port: $port
num-threads: 2
access-log: /dev/null
error-log: $work/error.log
hosts:
  default:
    paths:
      /:
        file.dir: $work/htdocs
CONF
url=http://127.0.0.1:$port/hello

# The server's CPU seconds so far (user + system, from /proc).
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$server_pid/stat"; }

# One run: prints "req/s generator-cores server-cores" over the run's wall time.
run() {
    local tool=$1 pin=$2 c0 t0 t1 c1 out
    c0=$(server_cpu)
    t0=$(date +%s.%N)
    if [ "$tool" = sweetspot ]; then
        out=$($pin "$bin" load --h2c -c "$conns" --streams "$streams" -t 1 -d "${seconds}s" --json - "$url" 2>/dev/null |
            python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["rps"], r["client_cpu_s"] / r["duration_s"])')
    else
        out=$({ /usr/bin/time -f "%U %S" $pin h2load -c "$conns" -m "$streams" -t 1 -D "$seconds" "$url" 2>&1; } |
            python3 -c '
import re, sys
text = sys.stdin.read()
m = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", text)
user, system = text.strip().split("\n")[-1].split()
print(float(m.group(2)), (float(user) + float(system)) / float(m.group(1)))')
    fi
    t1=$(date +%s.%N)
    c1=$(server_cpu)
    echo "$out $(python3 -c "print(($c1 - $c0) / ($t1 - $t0))")"
}

{
    echo "# $conns h2c connection(s) x $streams streams to h2o (2 threads), one load thread, ${seconds} s runs, $rounds rounds"
    echo "# $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%dT%H:%MZ); cores = CPU seconds / the run's seconds"
    printf '%-10s %-9s %9s %16s %13s %9s\n' tool pinned req/s generator-cores server-cores together
    for pinned in yes no; do
        if [ "$pinned" = yes ]; then server_pin="taskset -c 0"; pin="taskset -c 1"; else server_pin=; pin=; fi
        $server_pin h2o -c "$work/h2o.conf" >/dev/null 2>&1 &
        server_pid=$!
        for _ in $(seq 50); do
            (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
            sleep 0.1
        done
        for _ in $(seq "$rounds"); do
            for tool in sweetspot h2load; do
                read -r rps client server < <(run "$tool" "$pin")
                printf '%-10s %-9s %9.0f %16.2f %13.2f %9.2f\n' "$tool" "$pinned" "$rps" "$client" "$server" \
                    "$(python3 -c "print($client + $server)")"
            done
        done
        kill "$server_pid"
        wait "$server_pid" 2>/dev/null || true
        server_pid=
    done
} | tee "$out_file"
