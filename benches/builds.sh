#!/usr/bin/env bash
# A change's cost, measured: the working tree's build (B) beside the build of REV (A), every
# event-loop and pooled architecture under wrk, then each build's load generator against one
# server; alternating rounds, the server pinned to CPU 0 in a cgroup, the client on CPU 1;
# medians of requests/s and CPU per request. The logic is benches/builds.py.
#
# Usage: benches/builds.sh REV [SECONDS] [ROUNDS]   (default 5 and 5; output: benches/builds.txt)
# REV is built in a git worktree under target/builds/. Installs wrk when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: benches/builds.sh REV [SECONDS] [ROUNDS]}
seconds=${2:-5}
rounds=${3:-5}
. benches/install.sh
bench_need wrk:wrk taskset:util-linux
cargo build --release --quiet
old=$(bench_build_rev "$rev")
python3 benches/builds.py "$old" target/release/sweetspot \
    "$seconds" "$rounds" | tee benches/builds.txt
