#!/usr/bin/env bash
# Each architecture beside the best public server of its model: epoll and reactors against
# nginx, uring against a monoio server, async against hyper on tokio (at 1, 50 and 1,000
# connections, and at 50 with both held to half a CPU, where the server sets the pace; see
# benches/async_floor.sh for what sets it with the whole CPU; and hyper against itself, the
# A/A control that shows how far a ratio strays from 1.0 by chance), the blocking pools and
# hybrid against Apache's prefork, worker and event MPMs, poll against lighttpd's poll
# backend, forking against mini_httpd. Equal pool sizes, server on CPU 0 and wrk on CPU 1,
# alternating rounds, medians, CPU per request from a cgroup made for each server. The logic
# is benches/peers.py; the peers built here are the small crate under benches/peers/.
#
# Usage: benches/peers.sh [SECONDS] [ROUNDS] [ARCH]   (default 5 and 5; output:
# benches/peers.txt, or benches/peers-ARCH.txt with ARCH, which keeps only that
# architecture's comparisons, or that peer's: `hyper` keeps async's and the A/A control)
# Installs nginx, wrk, apache2, lighttpd and mini-httpd from Debian's packages when missing
# (as root), without letting the packages start their services.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-5}

. benches/install.sh
bench_need nginx:nginx-light wrk:wrk taskset:util-linux apache2:apache2 lighttpd:lighttpd mini_httpd:mini-httpd
export PATH="$PATH:/usr/sbin"
cargo build --release --quiet
(cd benches/peers && cargo build --release --quiet)
only=${3:-}
python3 benches/peers.py "$seconds" "$rounds" "$only" | tee "benches/peers${only:+-$only}.txt"
