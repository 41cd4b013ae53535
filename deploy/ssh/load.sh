#!/usr/bin/env bash
# A distributed sweetspot load run over plain ssh, for a handful of machines.
#
#   deploy/ssh/load.sh "gen1 gen2 gen3" http://SERVER:8080/hello -c 300 -R 30000 -d 30s
#
# Host I of the N given runs `sweetspot load URL FLAGS... --segment I/N` (each takes its share of
# -c and -R or -n, so together they make exactly the load asked for), all starting at one
# wall-clock time START_DELAY_S (default 10) seconds from now: keep the hosts' clocks in sync
# (NTP/chrony); a worker that starts late says so and its report records by how much. Their
# reports are copied back over the same ssh connection (`cat`, no scp needed) into OUT
# (default ./sweetspot-ssh-run-TIME) and merged there: OUT/merged.json and OUT/merged.html.
#
# Needs: passwordless ssh to every host (a host may be user@host; one host may appear more than
# once), sweetspot installed on each host (SWEETSPOT, default `sweetspot`, the remote command)
# and here (LOCAL_SWEETSPOT, default `sweetspot`). SSH (default `ssh -o BatchMode=yes`) is the
# transport: any command taking a host and a shell command line works.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 \"HOST1 HOST2 ...\" URL [sweetspot load flags...]" >&2
    exit 2
fi
read -r -a hosts <<<"$1"
shift
n=${#hosts[@]}
if ((n == 0)); then
    echo "$0: no hosts given" >&2
    exit 2
fi
SSH="${SSH:-ssh -o BatchMode=yes}"
SWEETSPOT="${SWEETSPOT:-sweetspot}"
LOCAL_SWEETSPOT="${LOCAL_SWEETSPOT:-sweetspot}"
OUT="${OUT:-$PWD/sweetspot-ssh-run-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
start_at=$(($(date +%s) + ${START_DELAY_S:-10}))
run_id="sweetspot-segment-$start_at"

# The load flags, quoted for the remote shell.
flags=""
for arg in "$@"; do
    flags+=" $(printf '%q' "$arg")"
done

pids=()
for ((i = 0; i < n; i++)); do
    host="${hosts[$i]}"
    remote="/tmp/$run_id-$i.json"
    (
        $SSH "$host" "$SWEETSPOT load$flags --segment $i/$n --start-at $start_at --json $remote -q" \
            && $SSH "$host" "cat $remote && rm -f $remote" >"$OUT/segment-$i.json"
    ) &
    pids+=($!)
done
failed=0
for ((i = 0; i < n; i++)); do
    if ! wait "${pids[$i]}"; then
        echo "$0: segment $i/$n on ${hosts[$i]} failed" >&2
        failed=1
    fi
done
((failed == 0)) || exit 1

"$LOCAL_SWEETSPOT" merge "$OUT"/segment-*.json --json "$OUT/merged.json" --html "$OUT/merged.html"
echo "$0: reports and the merge in $OUT" >&2
