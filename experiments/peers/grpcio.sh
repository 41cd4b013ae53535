#!/bin/sh
# grpcio's server for the `grpc` preset:   grpcio.sh PORT WORKERS
# Runs grpc_server.py beside this script with the first Python that has grpcio (Debian's
# python3-grpcio is /usr/bin/python3's, which a pyenv's python3 may shadow). SIGTERM stops it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import grpc' 2>/dev/null; then
        exec "$py" "$here/grpc_server.py" "$@"
    fi
done
echo "grpcio.sh: no python3 with grpcio (apt-get install python3-grpcio, or pip install grpcio)" >&2
exit 1
