#!/usr/bin/env bash
# The node-local remote cache's epoch rate beside local files (remote_cache_bench), the shards
# served by nginx on the loopback interface from a work directory of this script's own:
#   bench/remote_cache.sh BUILD_DIR [WORK_DIR] [remote_cache_bench arguments...]
# WORK_DIR (default: a new temporary directory) holds the shards (www/, kept for the next run),
# nginx's configuration and logs, and the cache (cache/, emptied first).
set -euo pipefail
build=$1
work=${2:-$(mktemp -d)}
shift $(( $# >= 2 ? 2 : 1 ))
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "nginx is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$work/www" "$work/nginx"
rm -rf "$work/cache"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/nginx/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1;
pid $work/nginx/nginx.pid; error_log $work/nginx/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi; uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$port; root $work/www; }
}
CONF
"$nginx" -p "$work/nginx/" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
"$build/bench/remote_cache_bench" --local "$work/www" --url "http://127.0.0.1:$port/" \
  --cache "$work/cache" "$@"
