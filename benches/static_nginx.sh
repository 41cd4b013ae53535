# benches/static_nginx.sh, sourced by load_profile.sh: the nginx it measures
# load tools against. One temporary directory ($tmp, removed on exit), nginx serving a 14-byte
# static file with access logging off and keep-alive never ended by nginx, on a free
# 127.0.0.1 port, stopped by its PID on exit.
#
#   static_nginx_start WORKERS [PREFIX...]   # starts it (e.g. PREFIX: taskset -c 0); sets url

tmp=$(mktemp -d)
nginx_pid=""
static_nginx_cleanup() {
    if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
        kill -TERM "$nginx_pid" 2>/dev/null || true
        wait "$nginx_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap static_nginx_cleanup EXIT

static_nginx_start() {
    local workers=$1 port=""
    shift
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
        port=""
    done
    if [ -z "$port" ]; then
        echo "$(basename "$0"): no free port found" >&2
        exit 1
    fi
    mkdir -p "$tmp/www" "$tmp/logs"
    printf 'Hello, World!\n' >"$tmp/www/index.html"
    cat >"$tmp/nginx.conf" <<CONF
worker_processes $workers;
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:$port;
        root $tmp/www;
    }
}
CONF
    "$@" nginx -p "$tmp" -c "$tmp/nginx.conf" &
    nginx_pid=$!
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.05
    done
    url="http://127.0.0.1:$port/"
}
