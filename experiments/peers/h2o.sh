#!/bin/sh
# Debian's h2o serving htdocs/ beside this script, for the `h2` preset:   h2o.sh PORT WORKERS
# WORKERS threads (h2o's event loops); HTTP/1.1 and HTTP/2 with prior knowledge (h2c) on one
# port, at most 100 concurrent streams a connection (its default). Writes its config beside
# this script and runs in the foreground; SIGTERM stops it.
set -eu
port=$1 workers=$2
here=$(cd "$(dirname "$0")" && pwd)
conf=$here/h2o-$port.conf
cat > "$conf" <<CONF
listen:
  host: 127.0.0.1
  port: $port
num-threads: $workers
access-log: /dev/null
error-log: /dev/stderr
hosts:
  default:
    paths:
      /:
        file.dir: $here/htdocs
CONF
exec h2o -c "$conf"
