# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
# servers.sh - start and stop a stock web server on a loopback port for the
# web load generator (tests/bench/webstone): nginx or lighttpd, configured
# in a scratch directory (one worker, sendfile on, no access log; nginx:N
# for nginx with N worker processes under its master), or python3's
# http.server.  Sourced (POSIX sh) by tests/bench_webstone.sh and
# by whoever runs the benchmark by hand, after tests/lib.sh (whose exit
# kills a server still running):
#
#     . tests/lib.sh
#     . tests/bench/webstone/servers.sh
#     ws_server_start nginx DOCROOT SCRATCH && echo "port $ws_port"
#     ...
#     ws_server_stop
#
# ws_server_start returns 0 with ws_port and ws_pid set, or 1 with the
# reason on stderr (not installed, did not start).
#
# HTTPS: with WS_TLS_CERT and WS_TLS_KEY set (PEM files: a certificate
# chain and its key), nginx listens with ssl on them (its defaults
# otherwise: session tickets on, no shared session cache) and jaws with
# --tls-only; lighttpd and python are refused (not set up for TLS here).
# The port is then the HTTPS one (webstone --tls).  The server runs in the
# foreground of a background job, so ws_pid is the server itself.

ws_pid=''
ws_port=''

# A free loopback port (the kernel's choice; released before the server
# binds it, so start retries should another program take it meanwhile).
ws_free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# ws_wait_port PORT PID: 0 once PORT accepts connections, 1 if PID died or
# 10 s passed.
ws_wait_port() {
  python3 -c 'import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        sys.exit(0)
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)
    time.sleep(0.05)
sys.exit(1)' "$1" "$2"
}

# PORT DOCROOT SCRATCH WORKERS: with one worker nginx runs as that worker
# alone (no master), as every earlier measurement did; with more, the
# master starts them (master_process off would run one process whatever
# worker_processes says) and stays in the foreground.
ws_nginx_conf() {
  if [ "$4" -gt 1 ]; then ws_master=on; else ws_master=off; fi
  cat <<EOF
worker_processes $4;
daemon off;
master_process $ws_master;
pid $3/nginx.pid;
error_log $3/nginx-error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $3/nginx-tmp/body;
  proxy_temp_path $3/nginx-tmp/proxy;
  fastcgi_temp_path $3/nginx-tmp/fastcgi;
  uwsgi_temp_path $3/nginx-tmp/uwsgi;
  scgi_temp_path $3/nginx-tmp/scgi;
  types { text/html html; application/octet-stream bin; }
  server {
    listen 127.0.0.1:$1 ${WS_TLS_CERT:+ssl }backlog=4096;
    root $2;$(ws_nginx_tls)
  }
}
EOF
}

# nginx's TLS lines: the certificate and key, HTTP/1.1 by ALPN (nginx
# offers it by default; nothing else here).
ws_nginx_tls() {
  [ -n "${WS_TLS_CERT:-}" ] || return 0
  printf '\n    ssl_certificate %s;\n    ssl_certificate_key %s;' \
    "$WS_TLS_CERT" "$WS_TLS_KEY"
}

ws_lighttpd_conf() { # PORT DOCROOT SCRATCH
  cat <<EOF
server.document-root = "$2"
server.bind = "127.0.0.1"
server.port = $1
server.errorlog = "$3/lighttpd-error.log"
server.pid-file = "$3/lighttpd.pid"
server.network-backend = "sendfile"
server.max-fds = 16384
server.max-connections = 8192
server.max-keep-alive-requests = 1000000
server.listen-backlog = 4096
mimetype.assign = (".html" => "text/html", ".bin" => "application/octet-stream")
EOF
}

# ws_jaws_start STRATEGY[:BACKEND] DOCROOT SCRATCH: taxi's web server
# (examples/jaws/jaws, path in $ws_jaws) with that concurrency strategy,
# $WS_JAWS_THREADS threads (default 2) for the strategies that pool them;
# STRATEGY "default": jaws with its own defaults (no --strategy, --threads
# or --backend).  It binds port 0 itself and says which port it got.
ws_jaws_start() {
  ws_strategy=${1%%:*} ws_backend=''
  case $1 in *:*) ws_backend=${1#*:} ;; esac
  if [ ! -x "${ws_jaws:-}" ]; then
    echo "servers.sh: jaws not built (ws_jaws=${ws_jaws:-unset})" >&2
    return 1
  fi
  ws_name=$1 ws_root=$2 ws_dir=$3
  mkdir -p "$ws_dir" || return 1
  set --
  if [ "$ws_strategy" != default ]; then
    # shellcheck disable=SC2086 # the backend option is one word or none
    set -- --strategy "$ws_strategy" ${ws_backend:+--backend "$ws_backend"} \
      --threads "${WS_JAWS_THREADS:-2}"
  fi
  if [ -n "${WS_TLS_CERT:-}" ]; then
    set -- "$@" --tls-only --tls-cert "$WS_TLS_CERT" --tls-key "$WS_TLS_KEY"
  fi
  if spawn "$ws_dir/server.log" "$ws_dir/server.log" "$ws_jaws" \
    --root "$ws_root" --port 0 --max-connections 20000 "$@"; then
    # shellcheck disable=SC2154 # pid and port: set by spawn (tests/lib.sh)
    ws_pid=$pid ws_port=$port
    return 0
  fi
  echo "servers.sh: jaws ($ws_name) did not start:" >&2
  cat "$ws_dir/server.log" >&2
  return 1
}

# ws_server_start KIND DOCROOT SCRATCH (KIND: nginx, nginx:WORKERS,
# lighttpd, python, jaws:STRATEGY[:BACKEND] or jaws:default)
ws_server_start() {
  ws_kind=$1 ws_root=$2 ws_dir=$3 ws_try=0 ws_workers=1
  case $ws_kind in
  jaws:*)
    ws_jaws_start "${ws_kind#jaws:}" "$ws_root" "$ws_dir"
    return
    ;;
  nginx:*)
    ws_workers=${ws_kind#nginx:} ws_kind=nginx
    case $ws_workers in
    '' | *[!0-9]* | 0*)
      echo "servers.sh: nginx:N wants a number of workers, not '$ws_workers'" >&2
      return 1
      ;;
    esac
    ;;
  esac
  if [ -n "${WS_TLS_CERT:-}" ] && [ "$ws_kind" != nginx ]; then
    echo "servers.sh: $ws_kind: no TLS set up for it here (nginx, jaws)" >&2
    return 1
  fi
  case $ws_kind in
  nginx | lighttpd)
    if ! command -v "$ws_kind" >/dev/null 2>&1; then
      echo "servers.sh: $ws_kind is not installed" >&2
      return 1
    fi
    ;;
  python)
    if ! command -v python3 >/dev/null 2>&1; then
      echo "servers.sh: python3 is not installed" >&2
      return 1
    fi
    ;;
  *)
    echo "servers.sh: unknown server '$ws_kind'" >&2
    return 1
    ;;
  esac
  mkdir -p "$ws_dir" || return 1
  while [ "$ws_try" -lt 5 ]; do
    ws_try=$((ws_try + 1))
    ws_port=$(ws_free_port) || return 1
    case $ws_kind in
    nginx)
      mkdir -p "$ws_dir/nginx-tmp"
      ws_nginx_conf "$ws_port" "$ws_root" "$ws_dir" "$ws_workers" \
        >"$ws_dir/nginx.conf"
      nginx -p "$ws_dir" -c "$ws_dir/nginx.conf" \
        >"$ws_dir/server.log" 2>&1 </dev/null &
      ;;
    lighttpd)
      ws_lighttpd_conf "$ws_port" "$ws_root" "$ws_dir" >"$ws_dir/lighttpd.conf"
      lighttpd -D -f "$ws_dir/lighttpd.conf" \
        >"$ws_dir/server.log" 2>&1 </dev/null &
      ;;
    python)
      python3 -m http.server --bind 127.0.0.1 --directory "$ws_root" \
        "$ws_port" >"$ws_dir/server.log" 2>&1 </dev/null &
      ;;
    esac
    ws_pid=$!
    track "$ws_pid"
    if ws_wait_port "$ws_port" "$ws_pid"; then
      return 0
    fi
    stop_pid "$ws_pid" KILL
    ws_pid=''
  done
  echo "servers.sh: $ws_kind did not start:" >&2
  cat "$ws_dir/server.log" "$ws_dir"/*-error.log >&2 2>/dev/null
  return 1
}

# ws_server_stop: SIGTERM to the server, bounded (stop_pid); the caller's
# status is left as it was.
ws_server_stop() {
  if [ -n "$ws_pid" ]; then
    ws_status=${status-}
    stop_pid "$ws_pid" TERM
    status=$ws_status
    ws_pid=''
  fi
}
