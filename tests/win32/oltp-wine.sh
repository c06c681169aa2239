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
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
run="sh $srcdir/tests/win32/wine-run.sh"
dir=$builddir/examples/oltp
backend=$(wine_exe "$dir" oltp_backend)
frontend=$(wine_exe "$dir" oltp_frontend)
client=$(wine_exe "$dir" oltp_client)
need_built oltp-wine.sh "$backend" "$frontend" "$client"
wine_setup
make_work oltp-wine

# start NAME PROGRAM ARGS...: start a server, its output in NAME.log; sets
# $pid and $port.  (wine-run.sh execs wine: the process is the server.)
start() {
  name=$1
  shift
  # shellcheck disable=SC2086 # $run: the words of a command
  start_server "$name" "$work/$name.log" $run "$@" --port 0 && return 0
  bad "$name: did not start"
  return 1
}

# stop NAME: Ctrl-C to $pid; status 0 and the closing line within 10 s.
stop() {
  stop_server "$1" "$work/$1.log" "stopped after" ||
    bad "$1: the stop (status $status)"
}

# drive PORT WHAT: 10 connections x 100 transactions, all checked.
drive() {
  if $run "$client" --port "$1" --connections 10 --requests 100 \
    --accounts 100 >"$work/client.log" 2>&1 &&
    grep -q "all verified, audit 100000000 conserved" "$work/client.log"; then
    ok "$2: $(cat "$work/client.log")"
  else
    cat "$work/client.log"
    bad "$2"
  fi
}

for pool in lf hsha; do
  start "backend-$pool" "$backend" --dispatcher "$pool" --threads 3 \
    --accounts 100 || continue
  drive "$port" "back end with $pool"
  stop "backend-$pool"
done

if start backend-tiers "$backend" --dispatcher lf --threads 3 --accounts 100
then
  back_pid=$pid
  if start frontend "$frontend" --backend-port "$port" --links 2 \
    --threads 3; then
    drive "$port" "client - front end - back end"
    stop frontend
  fi
  pid=$back_pid
  stop backend-tiers
fi
finish
