#!/usr/bin/env bash
# How exact is the sweep's server CPU? forking on /hello, keep-alive, 64 connections, 3 s, as
# an external target started inside a cgroup v2 made here (independent of the sweep's own
# cgroup, which lives in the v1 cpuacct hierarchy, or of its /proc fallback). For each method
# the sweep can use, the sweep's server CPU per request is set beside the independent cgroup's
# and the server's own rusage line (itself plus its reaped children), both over the server's
# whole life, divided by the requests it served.
#
# Usage (as root, on a machine with a cgroup2 mount): benches/server_cpu.sh [ROUNDS] (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
cargo build --release --quiet
bin=$PWD/target/release/sweetspot
cg2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$cg2" ] || { echo "no cgroup2 mount" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"; rmdir "$cg2"/sweetspot-bench-* 2>/dev/null || true' EXIT
printf '%-18s %-18s %14s %14s %14s %8s\n' method recorded "sweep us/req" "cgroup us/req" "rusage us/req" ratio
for round in $(seq "$rounds"); do
    for method in auto proc+children; do
        tag=$method-$round
        cg=$cg2/sweetspot-bench-$$-${tag//+/}
        mkdir "$cg"
        cat > "$work/$tag.toml" <<T
name = "server-cpu"
archs = []
concurrency = [64]
duration = "3s"
warmup = "0s"
[[workload]]
name = "hello"
route = "/hello"
[[external]]
name = "forking"
command = "echo \$\$ > $cg/cgroup.procs; exec '$bin' serve --arch forking --host 127.0.0.1 --port {port} > '$work/$tag.stats'"
url = "http://127.0.0.1:{port}"
T
        SWEETSPOT_CPU_METHOD=$method "$bin" sweep "$work/$tag.toml" --out "$work/$tag" --plain >/dev/null 2>&1
        usage_us=$(awk '$1 == "usage_usec" { print $2 }' "$cg/cpu.stat")
        rmdir "$cg"
        python3 - "$work" "$tag" "$method" "$usage_us" <<'PY'
import json, re, sys
work, tag, method, usage_us = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
point = json.load(open(f"{work}/{tag}/results.json"))["points"][0]
stats = open(f"{work}/{tag}.stats").read()
m = re.search(r"served (\d+) requests.*cpu user ([\d.]+) s, system ([\d.]+) s", stats)
served, own = int(m[1]), float(m[2]) + float(m[3])
sweep = point["server"]["cpu_s"] * 1e6 / point["requests"]
cgroup = usage_us / served
print(f"{method:<18} {point['server']['cpu_method']:<18} {sweep:14.2f} {cgroup:14.2f} "
      f"{own * 1e6 / served:14.2f} {sweep / cgroup:8.3f}")
PY
    done
done
