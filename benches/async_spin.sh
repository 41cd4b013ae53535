#!/usr/bin/env bash
# What `serve --arch async --spin-us` buys and what it costs, against hyper on the same runtime:
# requests/s and server CPU per request in wrk's closed loop at 50 connections (with the whole
# of CPU 0 and with half of it), and server CPU per request and p99 in sweetspot load's open
# loop at rates under capacity. The logic is benches/async_spin.py.
#
# Usage: benches/async_spin.sh [SECONDS] [ROUNDS]   (default 3 and 6; output:
# benches/async_spin.txt). Installs wrk from Debian's packages when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/install.sh
bench_need wrk:wrk taskset:util-linux
cargo build --release --quiet
(cd benches/peers && cargo build --release --quiet)
python3 benches/async_spin.py "${1:-3}" "${2:-6}" | tee benches/async_spin.txt
