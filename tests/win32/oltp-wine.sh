#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# oltp-wine.sh - examples/oltp under wine, in a Windows build's make check:
# the back end under the Leader/Followers and the half-sync/half-async
# pool serves oltp_client.exe (every reply checked, the audit conserved),
# then the three tiers through oltp_frontend.exe; each server stops on
# SIGINT (a console Ctrl-C event under wine) with status 0 and its closing
# line.

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
run="sh $srcdir/tests/win32/wine-run.sh"
dir=$builddir/examples/oltp
exe() { # the program itself, not libtool's wrapper
  if [ -f "$dir/.libs/$1.exe" ]; then echo "$dir/.libs/$1.exe"; else echo "$dir/$1.exe"; fi
}
backend=$(exe oltp_backend) frontend=$(exe oltp_frontend) client=$(exe oltp_client)
for p in "$backend" "$frontend" "$client"; do
  if [ ! -f "$p" ]; then
    echo "oltp-wine.sh: SKIP: $p is not built"
    exit 77
  fi
done
WINEPATH="$(cd "$builddir" && pwd)/.libs${WINEPATH:+;$WINEPATH}"
export WINEPATH
out=$(mktemp -d "${TMPDIR:-/tmp}/taxi-oltp-wine.XXXXXX")
pids=''
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
failed=0

# start NAME PROGRAM ARGS...: start a server; sets $pid and $port.
start() {
  log=$out/$1.log
  shift
  : >"$log" # before the server starts: its output is what the loop reads
  $run "$@" --port 0 >"$log" 2>&1 &
  pid=$! # wine-run.sh execs wine: this is the server
  pids="$pids $pid"
  port=''
  i=0
  while [ $i -lt 300 ] && [ -z "$port" ]; do # up to 30 s: wine starts slowly
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] || { kill -0 "$pid" 2>/dev/null || break; sleep 0.1; }
    i=$((i + 1))
  done
  [ -n "$port" ] || { echo "FAIL: $log: did not start"; cat "$log"; failed=1; }
}

# stop PID LOG: Ctrl-C; status 0 and the closing line within 10 s.
stop() {
  kill -INT "$1" 2>/dev/null
  i=0
  while [ $i -lt 100 ] && kill -0 "$1" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
  status=0
  if kill -0 "$1" 2>/dev/null; then
    kill -9 "$1" 2>/dev/null
    status=timeout
  fi
  wait "$1" 2>/dev/null || [ "$status" = timeout ] || status=$?
  if [ "$status" != 0 ] || ! grep -q "stopped after" "$2"; then
    echo "FAIL: $2: the stop (status $status)"
    cat "$2"
    failed=1
  fi
}

# drive PORT WHAT: 10 connections x 100 transactions, all checked.
drive() {
  if $run "$client" --port "$1" --connections 10 --requests 100 \
    --accounts 100 >"$out/client.log" 2>&1 &&
    grep -q "all verified, audit 100000000 conserved" "$out/client.log"; then
    echo "ok: $2: $(cat "$out/client.log")"
  else
    echo "FAIL: $2"
    cat "$out/client.log"
    failed=1
  fi
}

for pool in lf hsha; do
  start "backend-$pool" "$backend" --dispatcher "$pool" --threads 3 \
    --accounts 100
  [ -n "$port" ] || continue
  drive "$port" "back end with $pool"
  stop "$pid" "$log"
done

start backend-tiers "$backend" --dispatcher lf --threads 3 --accounts 100
back_pid=$pid back_log=$log back_port=$port
if [ -n "$back_port" ]; then
  start frontend "$frontend" --backend-port "$back_port" --links 2 \
    --threads 3
  if [ -n "$port" ]; then
    drive "$port" "client - front end - back end"
    stop "$pid" "$log"
  fi
  stop "$back_pid" "$back_log"
fi
exit $failed
