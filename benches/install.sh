# benches/install.sh, sourced by every bench script: `bench_need TOOL:PACKAGE...` installs each
# PACKAGE whose TOOL is neither on the PATH nor in /usr/sbin, through `bench_install PACKAGE...`,
# which installs Debian's packages (as root) without letting their scripts start services;
# `bench_build_rev REV` builds a commit for a side-by-side run.
bench_need() {
    local pair missing=()
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || [ -x "/usr/sbin/${pair%%:*}" ] || missing+=("${pair#*:}")
    done
    bench_install "${missing[@]}"
}
bench_install() {
    (($#)) || return 0
    local made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        # policy-rc.d exit 101: the packages' scripts may not start services (on port 80).
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
    return 0
}
# bench_build_rev REV: builds REV in a git worktree under target/builds/ (once: a later call
# reuses the build) and prints the path of its binary.
bench_build_rev() {
    local sha tree
    sha=$(git rev-parse --short "$1")
    tree=target/builds/$sha
    if [ ! -x "$tree/target/release/sweetspot" ]; then
        rm -rf "$tree"
        git worktree add --detach --force "$tree" "$sha" >/dev/null
        (cd "$tree" && cargo build --release --quiet)
    fi
    echo "$PWD/$tree/target/release/sweetspot"
}
