#!/usr/bin/env bash
# gRPC load's cost: `sweetspot load --grpc` beside h2load sending the same gRPC frames, against
# our async server. The logic is benches/grpc_cost.py.
#
# Usage: benches/grpc_cost.sh [SECONDS] [ROUNDS]   (default 5 and 5; output:
# benches/grpc_cost.txt). Installs h2load from Debian's packages when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-5}

. benches/install.sh
bench_need h2load:nghttp2-client taskset:util-linux
cargo build --release --quiet
python3 benches/grpc_cost.py "$seconds" "$rounds" | tee benches/grpc_cost.txt
