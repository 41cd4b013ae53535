#!/bin/sh
# Debian's apache2 serving htdocs/ beside this script, for the `apache` preset:
#   apache.sh prefork|worker|event PORT WORKERS
# prefork: WORKERS processes, a connection each; worker and event: one process of WORKERS
# threads (event hands idle keep-alive connections to a listener thread, worker does not).
# Writes its config beside this script and runs in the foreground; SIGTERM stops it.
set -eu
mpm=$1 port=$2 workers=$3
here=$(cd "$(dirname "$0")" && pwd)
bin=$(command -v apache2 || echo /usr/sbin/apache2)
mods=/usr/lib/apache2/modules
case $mpm in
prefork) pool="StartServers $workers
MinSpareServers $workers
MaxSpareServers $workers
ServerLimit $workers
MaxRequestWorkers $workers" ;;
worker|event) pool="ServerLimit 1
StartServers 1
ThreadLimit $workers
ThreadsPerChild $workers
MinSpareThreads 1
MaxSpareThreads $((workers + 1))
MaxRequestWorkers $workers" ;;
*) echo "apache.sh: MPM is prefork, worker or event, not $mpm" >&2; exit 2 ;;
esac
user=""
if [ "$(id -u)" = 0 ]; then user="User www-data
Group www-data"; fi
conf=$here/apache-$port.conf
cat > "$conf" <<CONF
ServerRoot $here
ServerName 127.0.0.1
PidFile $here/apache-$port.pid
Mutex file:$here default
ErrorLog /dev/stderr
LogLevel error
LoadModule mpm_${mpm}_module $mods/mod_mpm_$mpm.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule mime_module $mods/mod_mime.so
TypesConfig /etc/mime.types
$user
Listen 127.0.0.1:$port
$pool
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 5
DocumentRoot $here/htdocs
<Directory $here/htdocs>
  Require all granted
</Directory>
<Files hello>
  ForceType text/plain
</Files>
CONF
exec "$bin" -f "$conf" -DFOREGROUND
