#!/bin/sh
# tonic's server for the `grpc` preset:   tonic.sh PORT WORKERS
# Builds tonic/ beside this script with cargo (its Cargo.lock, locked) and runs it: the lab's
# method on a tokio runtime of WORKERS threads. The first build takes a minute or two; later
# ones reuse it under $SWEETSPOT_PEERS_TARGET (default ~/.cache/sweetspot/peers-target), and
# a sweep's first point rebuilds only the peer itself. SIGTERM stops it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
target=${SWEETSPOT_PEERS_TARGET:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/sweetspot/peers-target}
cargo build --release --quiet --locked --manifest-path "$here/tonic/Cargo.toml" \
    --target-dir "$target" >&2
exec "$target/release/sweetspot-tonic" "$@"
