#!/usr/bin/env bash
# Where the adaptive concurrency limiters settle against the knee measured in the same run:
# `sweetspot limiters all` (every scenario, every controller it names, static limits around
# the knee), its summary and table.md committed with the commit, date and machine above them.
#
# Usage: benches/limiters.sh [DURATION]   (default 20s a gated run, about 25 minutes in all)
#        benches/limiters.sh report       (judge the last run again with this build's rules)
# Output: benches/limiters.txt; the full results (results.json, report.html) in
# target/bench-limiters/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench-limiters
rev() { echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml || echo '+changes')"; }
cargo build --release --quiet
if [ "${1:-}" = report ]; then
    target/release/sweetspot limiters --report "$out" >"$out.summary.txt"
    judged="judged again by \`limiters --report\` at $(rev)"
else
    duration=${1:-20s}
    rm -rf "$out"
    measured="measured by benches/limiters.sh $duration at $(rev), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
    target/release/sweetspot limiters all -d "$duration" --out "$out" >"$out.summary.txt"
    echo "$measured" >"$out/measured.txt"
    judged="judged at $(rev)"
fi
{
    echo "# $(cat "$out/measured.txt"); $judged"
    echo
    cat "$out.summary.txt"
    echo
    cat "$out/table.md"
} >benches/limiters.txt
cat "$out.summary.txt"
