#!/usr/bin/env bash
# HTTP/2 load's cost: `sweetspot load --h2c` beside h2load against nginx and h2o (h2c), and beside our
# HTTP/1.1 path at the same concurrency. The logic is benches/h2_cost.py.
#
# Usage: benches/h2_cost.sh [SECONDS] [ROUNDS]   (default 5 and 5; output:
# benches/h2_cost.txt). Installs nginx, h2o and h2load from Debian's packages when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-5}

. benches/install.sh
bench_need nginx:nginx-light h2o:h2o h2load:nghttp2-client taskset:util-linux
export PATH="$PATH:/usr/sbin"
cargo build --release --quiet
python3 benches/h2_cost.py "$seconds" "$rounds" | tee benches/h2_cost.txt
