#!/usr/bin/env bash
# benches/load_vs_wrk.sh: `sweetspot load` against wrk, oha and autocannon (and ab, once) on the
# same nginx, side by side in one script, rotating the order of runs so all see the same machine.
#
# What it prints: req/s and client CPU time per request of every run, then the median ratios
# sweetspot/wrk (and sweetspot/oha, sweetspot/autocannon), for each of sweetspot's two engine
# drivers: `sweetspot` is the default (epoll), `sweetspot-uring` is `--engine uring`, which
# also reports how long responses waited to be handled (its gathering wait; mean in the last
# column). Speed is judged by these ratios, not by absolute numbers (DESIGN.md).
#
#   benches/load_vs_wrk.sh            # 5 rounds of 5 s each, -t 1 -c 50
#   ROUNDS=9 DURATION=10 benches/load_vs_wrk.sh
#
# Installs nginx, wrk, apache2-utils (ab) and time with apt-get when missing (needs root).
# oha (`cargo install oha`) and autocannon (`npm i -g autocannon`) are measured when installed
# and skipped with a note otherwise (OTHERS=0 skips them). Both are multi-threaded runtimes
# (tokio, node's libuv): pinned to the one client CPU like the others, they get no more CPU.
# Starts nginx on a free 127.0.0.1 port with a temporary config serving a small static file and
# stops it by PID at the end. Writes its output to benches/load_vs_wrk.txt as well.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-50}
THREADS=${THREADS:-1}
AB_REQUESTS=${AB_REQUESTS:-200000}
# nginx gets one worker: on a 2-core machine the server and the generator then each have a core.
NGINX_WORKERS=${NGINX_WORKERS:-1}
# With 2+ cores, nginx runs on CPU 0 and every load tool on CPU 1 (PIN=0 to let them float), so
# the tools compete with nginx in the same way and never with each other's leftovers.
PIN=${PIN:-1}
OTHERS=${OTHERS:-1}

export PATH="$PATH:/usr/sbin:/sbin"
repo=$(cd "$(dirname "$0")/.." && pwd)
output="$repo/benches/load_vs_wrk.txt"

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
command -v ab >/dev/null || need+=(apache2-utils)
[ -x /usr/bin/time ] || need+=(time)
if ((${#need[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "load_vs_wrk: missing ${need[*]}; run as root to install them with apt-get" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

. "$repo/benches/static_nginx.sh"
server_cpu=()
client_cpu=()
if [ "$PIN" = 1 ] && [ "$(nproc)" -ge 2 ]; then
    server_cpu=(taskset -c 0)
    client_cpu=(taskset -c 1)
fi
static_nginx_start "$NGINX_WORKERS" "${server_cpu[@]}"

(cd "$repo" && cargo build --release --quiet)
sweetspot="$repo/target/release/sweetspot"

# CPU seconds (user + system) of the last command run under GNU time.
cpu_of() { awk '{print $1 + $2}' "$tmp/time"; }

# run_sweetspot [ENGINE]: prints "requests req/s cpu_s [hold_mean_us]".
run_sweetspot() {
    local engine=${1:-epoll}
    /usr/bin/time -f '%U %S' -o "$tmp/time" "${client_cpu[@]}" "$sweetspot" load "$url" -t "$THREADS" -c "$CONNECTIONS" \
        -d "${DURATION}s" --engine "$engine" -q --json "$tmp/sweetspot.json"
    local requests rps hold
    requests=$(grep -m1 '"requests":' "$tmp/sweetspot.json" | tr -dc '0-9')
    rps=$(grep -m1 '"rps":' "$tmp/sweetspot.json" | sed 's/.*: *//; s/,//')
    hold=$(grep -m1 '"hold_mean_us":' "$tmp/sweetspot.json" | sed 's/.*: *//; s/,//' || true)
    echo "$requests $rps $(cpu_of) $hold"
}

run_sweetspot-uring() { run_sweetspot uring; }

run_wrk() {
    /usr/bin/time -f '%U %S' -o "$tmp/time" "${client_cpu[@]}" wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" \
        "$url" >"$tmp/wrk.out"
    local requests rps
    requests=$(awk '/requests in/ {print $1}' "$tmp/wrk.out")
    rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.out")
    echo "$requests $rps $(cpu_of)"
}

run_oha() {
    /usr/bin/time -f '%U %S' -o "$tmp/time" "${client_cpu[@]}" oha --no-tui -z "${DURATION}s" -c "$CONNECTIONS" \
        --output-format json "$url" >"$tmp/oha.json"
    # Completed requests: the status code counts; req/s over the run's total time.
    node -e '
        const r = JSON.parse(require("fs").readFileSync(process.argv[1]));
        const n = Object.values(r.statusCodeDistribution).reduce((a, b) => a + b, 0);
        console.log(n, (n / r.summary.total).toFixed(1));' "$tmp/oha.json" | tr '\n' ' '
    cpu_of
}

run_autocannon() {
    /usr/bin/time -f '%U %S' -o "$tmp/time" "${client_cpu[@]}" autocannon -c "$CONNECTIONS" -d "$DURATION" -j \
        "$url" >"$tmp/autocannon.json" 2>/dev/null
    node -e '
        const r = JSON.parse(require("fs").readFileSync(process.argv[1]));
        const n = r["2xx"] + r.non2xx;
        console.log(n, (n / r.duration).toFixed(1));' "$tmp/autocannon.json" | tr '\n' ' '
    cpu_of
}

run_ab() {
    /usr/bin/time -f '%U %S' -o "$tmp/time" "${client_cpu[@]}" ab -q -k -c "$CONNECTIONS" -n "$AB_REQUESTS" "$url" \
        >"$tmp/ab.out" 2>&1
    local requests rps
    requests=$(awk '/Complete requests/ {print $3}' "$tmp/ab.out")
    rps=$(awk '/Requests per second/ {print $4}' "$tmp/ab.out")
    echo "$requests $rps $(cpu_of)"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

ours=(sweetspot sweetspot-uring)
tools=("${ours[@]}" wrk)
notes=()
if [ "$OTHERS" = 1 ]; then
    if command -v oha >/dev/null; then tools+=(oha); else notes+=("oha not installed (cargo install oha): skipped"); fi
    if command -v autocannon >/dev/null && command -v node >/dev/null; then
        tools+=(autocannon)
    else
        notes+=("autocannon not installed (npm i -g autocannon): skipped")
    fi
fi

{
    echo "# sweetspot load (epoll and uring engines) vs ${tools[*]:2} vs ab, against nginx $(nginx -v 2>&1 | sed 's/.*\///'), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# $(nproc) cores, $(uname -sr), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# each run: -t $THREADS -c $CONNECTIONS -d ${DURATION}s (oha, autocannon: -c $CONNECTIONS, their own threads); nginx: $NGINX_WORKERS worker(s), static 14-byte file"
    echo "# pinning: nginx ${server_cpu[*]:-unpinned}, load tools ${client_cpu[*]:-unpinned}; runs alternate, the order rotates each round"
    echo "# cpu/req = client user+system CPU time (GNU time) / completed requests"
    for note in "${notes[@]}"; do echo "# $note"; done
    printf '%-6s %-16s %10s %12s %14s %14s\n' round tool requests req/s cpu_us/req hold_mean_us
} | tee "$output"

for tool in "${tools[@]}"; do
    : >"$tmp/rps.$tool"
    : >"$tmp/cpu.$tool"
    for our in "${ours[@]}"; do
        : >"$tmp/rps_ratio.$our.$tool"
        : >"$tmp/cpu_ratio.$our.$tool"
    done
done
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order, so no tool always gets the warmer (or busier) slot.
    order=()
    for i in "${!tools[@]}"; do
        order+=("${tools[$(((i + round - 1) % ${#tools[@]}))]}")
    done
    for tool in "${order[@]}"; do
        hold=""
        read -r requests rps cpu hold < <("run_$tool")
        cpu_us=$(awk -v c="$cpu" -v n="$requests" 'BEGIN {printf "%.3f", c * 1e6 / n}')
        printf '%-6s %-16s %10s %12.1f %14s %14s\n' "$round" "$tool" "$requests" "$rps" "$cpu_us" \
            "$(awk -v h="$hold" 'BEGIN {if (h != "") printf "%.1f", h}')" | tee -a "$output"
        echo "$rps" >>"$tmp/rps.$tool"
        echo "$cpu_us" >>"$tmp/cpu.$tool"
    done
    # Ratios ours/other within the round.
    for our in "${ours[@]}"; do
        for tool in "${tools[@]:2}"; do
            awk -v a="$(tail -1 "$tmp/rps.$our")" -v b="$(tail -1 "$tmp/rps.$tool")" 'BEGIN {print a / b}' >>"$tmp/rps_ratio.$our.$tool"
            awk -v a="$(tail -1 "$tmp/cpu.$our")" -v b="$(tail -1 "$tmp/cpu.$tool")" 'BEGIN {print a / b}' >>"$tmp/cpu_ratio.$our.$tool"
        done
    done
done

read -r ab_requests ab_rps ab_cpu < <(run_ab)
ab_cpu_us=$(awk -v c="$ab_cpu" -v n="$ab_requests" 'BEGIN {printf "%.3f", c * 1e6 / n}')
printf '%-6s %-16s %10s %12.1f %14s\n' "once" "ab -k" "$ab_requests" "$ab_rps" "$ab_cpu_us" | tee -a "$output"

{
    echo
    printf 'median req/s:      '
    for tool in "${tools[@]}"; do printf ' %s %.1f,' "$tool" "$(median <"$tmp/rps.$tool")"; done
    printf ' ab %.1f (one run)\n' "$ab_rps"
    printf 'median cpu_us/req: '
    for tool in "${tools[@]}"; do printf ' %s %.3f,' "$tool" "$(median <"$tmp/cpu.$tool")"; done
    printf ' ab %.3f (one run)\n' "$ab_cpu_us"
    for our in "${ours[@]}"; do
        for tool in "${tools[@]:2}"; do
            printf 'req/s ratio       %-27s median of rounds %.3f (per round: %s)\n' "$our/$tool:" \
                "$(median <"$tmp/rps_ratio.$our.$tool")" "$(awk '{printf "%.3f ", $1}' "$tmp/rps_ratio.$our.$tool")"
            printf 'cpu/request ratio %-27s median of rounds %.3f (per round: %s)\n' "$our/$tool:" \
                "$(median <"$tmp/cpu_ratio.$our.$tool")" "$(awk '{printf "%.3f ", $1}' "$tmp/cpu_ratio.$our.$tool")"
        done
        printf 'req/s ratio       %-27s %.3f (%s median vs the ab run)\n' "$our/ab:" \
            "$(awk -v a="$(median <"$tmp/rps.$our")" -v b="$ab_rps" 'BEGIN {print a / b}')" "$our"
        printf 'cpu/request ratio %-27s %.3f\n' "$our/ab:" \
            "$(awk -v a="$(median <"$tmp/cpu.$our")" -v b="$ab_cpu_us" 'BEGIN {print a / b}')"
    done
} | tee -a "$output"
