#!/usr/bin/env bash
# sweetspot's load generator (both engine drivers) beside wrk, h2load, hey, ab and autocannon
# against one nginx pinned to CPU 0, every tool pinned to CPU 1 in a cgroup of its own: a
# closed loop, a pipelined one (depth 16), a connection per request, and a fixed rate at half
# nginx's capacity. The logic is benches/generators.py.
#
# Usage: benches/generators.sh [SECONDS] [ROUNDS]   (default 5 and 5; output:
# benches/generators.txt). Installs nginx, wrk, apache2-utils (ab), nghttp2-client (h2load)
# and hey from Debian's packages and autocannon from npm when missing (as root), without
# letting the packages start their services.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-5}

. benches/install.sh
bench_need nginx:nginx-light wrk:wrk ab:apache2-utils h2load:nghttp2-client hey:hey taskset:util-linux
if ! command -v autocannon >/dev/null && command -v npm >/dev/null; then
    npm install -g --silent autocannon >/dev/null 2>&1 || echo "generators: npm could not install autocannon; it is skipped" >&2
fi
export PATH="$PATH:/usr/sbin"
cargo build --release --quiet
python3 benches/generators.py "$seconds" "$rounds" | tee benches/generators.txt
