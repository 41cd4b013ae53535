#!/bin/sh
# Debian's nginx serving htdocs/ beside this script over HTTP/2 with prior knowledge (h2c),
# for the `h2` preset:   nginx-h2c.sh PORT WORKERS [STREAMS]
# WORKERS worker processes, HTTP/2 only on the port (nginx 1.22's `listen ... http2` on a
# cleartext port), at most STREAMS concurrent streams a connection (default 128, nginx's own
# default). Writes its
# config beside this script and runs in the foreground; SIGTERM stops it.
set -eu
port=$1 workers=$2 streams=${3:-128}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(command -v nginx || echo /usr/sbin/nginx)
user=""
if [ "$(id -u)" = 0 ]; then user="user root;"; fi
dir=$here/nginx-$port
mkdir -p "$dir"
cat > "$dir/nginx.conf" <<CONF
$user
worker_processes $workers;
daemon off;
pid $dir/nginx.pid;
error_log stderr error;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    server {
        listen 127.0.0.1:$port http2 backlog=4096;
        http2_max_concurrent_streams $streams;
        root $here/htdocs;
    }
}
CONF
exec "$bin" -p "$dir" -c "$dir/nginx.conf"
