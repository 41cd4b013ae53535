#!/usr/bin/env bash
# How long each architecture takes to stop: SIGTERM to an idle server (after its ready line),
# then the time until its process has exited, over ROUNDS starts. Every point of a sweep, a map
# or a tune stops its server and waits for it, so this is paid once a point. With REV, its
# build (in a worktree under target/builds/, by install.sh's bench_build_rev) runs beside the
# working tree's, round by round.
#
# Usage: benches/stop.sh [ROUNDS] [REV]   (default 5; output: benches/stop.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
rev=${2:-}
cargo build --release --quiet
new=$PWD/target/release/sweetspot
old= sha=
if [ -n "$rev" ]; then
    . benches/install.sh
    old=$(bench_build_rev "$rev")
    sha=$(git rev-parse --short "$rev")
fi
archs="iterative forking preforked threaded prethreaded poll epoll reactors hybrid async uring"

# One stop, in ms: start, wait for the ready line, SIGTERM, wait for the exit.
stop_ms() {
    local bin=$1 arch=$2 fifo pid line t0 t1
    fifo=$(mktemp -u)
    mkfifo "$fifo"
    "$bin" serve --arch "$arch" --port 0 >"$fifo" 2>/dev/null &
    pid=$!
    exec 3<"$fifo"
    read -r line <&3
    sleep 0.2
    t0=$(date +%s%N)
    kill -TERM "$pid"
    wait "$pid" || true
    t1=$(date +%s%N)
    exec 3<&-
    rm -f "$fifo"
    echo $(((t1 - t0) / 1000))
}

summary() { sort -n | awk '{v[NR]=$1} END {printf "%8.1f %8.1f %8.1f", v[1]/1000, v[int((NR+1)/2)]/1000, v[NR]/1000}'; }

{
    echo "# benches/stop.sh $rounds $rev: new = the working tree at $(git rev-parse --short HEAD)${sha:+, old = $sha}; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
    echo "# ms from SIGTERM to exit, idle server: min median max"
    printf '%-12s %26s' arch "new (min med max)"
    [ -n "$old" ] && printf ' %26s' "old (min med max)"
    echo
    for arch in $archs; do
        n=() o=()
        for _ in $(seq "$rounds"); do
            n+=("$(stop_ms "$new" "$arch")")
            [ -n "$old" ] && o+=("$(stop_ms "$old" "$arch")")
        done
        printf '%-12s %26s' "$arch" "$(printf '%s\n' "${n[@]}" | summary)"
        [ -n "$old" ] && printf ' %26s' "$(printf '%s\n' "${o[@]}" | summary)"
        echo
    done
} | tee benches/stop.txt
