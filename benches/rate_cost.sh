#!/usr/bin/env bash
# Rate mode's accuracy and CPU per request: the default (each send at its own time) beside
# the batching slacks, autocannon and h2load, and the floor of a timed wakeup. The logic is
# benches/rate_cost.py.
#
# Usage: benches/rate_cost.sh [SECONDS] [ROUNDS]   (default 4 and 3; output:
# benches/rate_cost.txt). Installs nginx and h2load from Debian's packages and autocannon from
# npm when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-4}
rounds=${2:-3}

. benches/install.sh
bench_need nginx:nginx-light h2load:nghttp2-client taskset:util-linux
if ! command -v autocannon >/dev/null && command -v npm >/dev/null; then
    npm install -g --silent autocannon >/dev/null 2>&1 || echo "rate_cost: npm could not install autocannon; it is skipped" >&2
fi
export PATH="$PATH:/usr/sbin"
cargo build --release --quiet
python3 benches/rate_cost.py "$seconds" "$rounds" | tee benches/rate_cost.txt
