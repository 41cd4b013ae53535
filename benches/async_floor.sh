#!/usr/bin/env bash
# Where the time of `async` and of hyper goes at /hello, 50 keep-alive connections: system
# calls per request, user and system CPU per request, the server's threads woken per request,
# the requests each epoll_wait of the server and of wrk found (the slower side of the closed
# loop finds more), how busy each CPU and wrk were, with the whole of CPU 0 and with both
# servers held to half of it. It shows what sets the pace in benches/peers.sh's async rows.
# The logic is benches/async_floor.py.
#
# Usage: benches/async_floor.sh [SECONDS] [ROUNDS]   (default 5 and 3; output:
# benches/async_floor.txt). Installs wrk and perf (linux-perf) from Debian's packages when
# missing (as root); without perf the system call columns are left empty.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/install.sh
bench_need wrk:wrk taskset:util-linux perf:linux-perf
cargo build --release --quiet
(cd benches/peers && cargo build --release --quiet)
python3 benches/async_floor.py "${1:-5}" "${2:-3}" | tee benches/async_floor.txt
