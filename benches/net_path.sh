#!/usr/bin/env bash
# What the `--net` path itself costs and carries: the 64 KiB page of `slow-clients` from one
# epoll server (on loopback, behind the path) to 16, 256 and 1,024 clients 100 ms away on
# 5 mbit/s links each, and the CPU each relay thread (net-path-up, net-path-down), the rest of
# the load generator and the server took over the middle of the run. Writing a packet into a
# TUN device runs the receiving network stack on the writer's thread, so the relay's threads
# carry the kernel's TCP receive work for both sides; where they and the generator fill the
# cores, the path is what caps every server alike (see the shares printed). Each level runs
# twice: unpinned, and as the lab runs it (the server on CPU 0, the generator and so the
# relay on CPU 1: `--pin 1`), with the relay's own report beside the shares: its CPU, how late
# it wrote the packets against when the path was due to deliver them (mean, p99, max), and
# what it dropped (no room in the relay, at its TUN devices).
#
# Usage (as root): benches/net_path.sh [SECONDS]   (default 10; output: benches/net_path.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
cargo build --release --quiet
bin=target/release/sweetspot
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "$1"; }
{
echo "# --net rtt=100ms,rate=5mbit: /page64k.html (65,536 bytes) from epoll, ${seconds} s runs, CPU over the middle $((seconds / 2)) s"
echo "# $(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-8s %-6s %8s %10s %9s %10s %10s %10s %10s %12s %9s %9s %9s %9s %8s\n' clients pinned req/s packets/s relay-up relay-down generator server retrans-srv retrans-cli relay-cpu late-mean late-p99 late-max dropped
for pinned in no yes; do
for n in 16 256 1024; do
    if [ "$pinned" = yes ]; then
        pin_srv=(taskset -c 0); pin_load=(--pin 1)
    else
        pin_srv=(); pin_load=()
    fi
    "${pin_srv[@]}" "$bin" serve --arch epoll --port 0 --root public >/tmp/net_path_srv.$$ 2>&1 &
    srv=$!
    port=
    for _ in $(seq 50); do
        port=$(grep -o 'http://127.0.0.1:[0-9]*' /tmp/net_path_srv.$$ | head -1 | sed 's/.*://') || true
        [ -n "$port" ] && break
        sleep 0.1
    done
    json=/tmp/net_path_$n.$$.json
    "$bin" load "http://127.0.0.1:$port/page64k.html" -c "$n" -d "${seconds}s" "${pin_load[@]}" \
        --net rtt=100ms,rate=5mbit --json "$json" --quiet >/dev/null 2>&1 &
    ld=$!
    sleep $((seconds / 4 + 1))
    up=$(grep -l '^net-path-up$' /proc/$ld/task/*/comm | head -1 | xargs dirname)
    down=$(grep -l '^net-path-down$' /proc/$ld/task/*/comm | head -1 | xargs dirname)
    all0=0; for t in /proc/$ld/task/*; do all0=$((all0 + $(ticks "$t/stat"))); done
    up0=$(ticks "$up/stat"); down0=$(ticks "$down/stat"); srv0=$(ticks /proc/$srv/stat)
    sleep $((seconds / 2))
    all1=0; for t in /proc/$ld/task/*; do all1=$((all1 + $(ticks "$t/stat"))); done
    up1=$(ticks "$up/stat"); down1=$(ticks "$down/stat"); srv1=$(ticks /proc/$srv/stat)
    wait $ld
    kill $srv; wait $srv 2>/dev/null || true
    span=$((seconds / 2))
    share() { python3 -c "print(f'{$1 / ($hz * $span):.0%}')"; }
    python3 - "$json" "$n" "$seconds" "$(share $((up1 - up0)))" "$(share $((down1 - down0)))" \
        "$(share $((all1 - all0 - up1 + up0 - down1 + down0)))" "$(share $((srv1 - srv0)))" "$pinned" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, secs = sys.argv[2], float(sys.argv[3])
net = r["net"]
ms = lambda us: f"{us / 1000:.1f}ms"
print(f"{n:<8} {sys.argv[8]:<6} {r['rps']:8.0f} {net['packets'] / secs:10.0f} {sys.argv[4]:>9} "
      f"{sys.argv[5]:>10} {sys.argv[6]:>10} {sys.argv[7]:>10} {net['retrans_server_side']:10} "
      f"{net['retrans_clients']:12} {net['relay_cpu_s'] / r['duration_s']:9.0%} "
      f"{ms(net['late_mean_us']):>9} {ms(net['late_p99_us']):>9} {ms(net['late_max_us']):>9} "
      f"{net['overflowed'] + net['device_dropped']:8}")
PY
    rm -f "$json" /tmp/net_path_srv.$$
done
done
echo "# relay-up/-down, generator, server: shares of one core over the middle of the run (the generator: the load process less the relay's threads)"
echo "# relay-cpu, late-*, dropped: the relay's own report over the whole run (its threads' CPU a second; lateness against when the path was due to deliver each packet; no room in the relay or at its devices); retrans-*: counted on the path"
} | tee benches/net_path.txt
