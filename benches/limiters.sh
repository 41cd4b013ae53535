#!/usr/bin/env bash
# Where the adaptive concurrency limiters settle against the knee measured in the same run:
# `sweetspot limiters all` (every scenario, every controller it names, static limits around
# the knee), its table.md committed with the date, the commit and the machine above it.
#
# Usage: benches/limiters.sh [DURATION]   (default 20s a gated run, about 25 minutes in all;
# output: benches/limiters.txt, and the full results in target/bench-limiters/)
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-20s}
cargo build --release --quiet
out=target/bench-limiters
rm -rf "$out"
target/release/sweetspot limiters all -d "$duration" --out "$out" >"$out.summary.txt"
{
    echo "# benches/limiters.sh $duration: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
    echo
    cat "$out.summary.txt"
    echo
    cat "$out/table.md"
} >benches/limiters.txt
cat "$out.summary.txt"
