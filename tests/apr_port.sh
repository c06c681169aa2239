#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# apr_port.sh - examples/apr_port as a test: the APR server (apr_pollset +
# apr_thread_pool) and its taxi port (Leader/Followers) answer the same
# requests, from the same client, over several connections at once; their
# answers must be identical and equal to the expected ones.  The taxi port
# runs over APR's pollset ("apr") and over "apr:poll"; each server must stop
# cleanly on SIGINT.
#
# Automake runs tests from the build directory with $srcdir exported; run by
# hand, the defaults below find the same files.  Every wait is bounded, and
# only the servers this script started are signalled, by process id.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
ex=$builddir/examples/apr_port
req=$srcdir/examples/apr_port/requests.txt
want=$srcdir/examples/apr_port/answers.txt
make_work apr-port

for prog in "$ex/apr_server" "$ex/taxi_server" "$ex/apr_port_client"; do
  if [ ! -x "$prog" ]; then
    echo "apr_port: SKIP: $prog not built"
    exit 77
  fi
done

# start NAME PROGRAM ARGS... - start a server on a free port; sets $pid, $port.
start() {
  name=$1
  shift
  start_server "apr_port: $name" "$work/$name.out" "$@" --port 0 --threads 3
}

# stop NAME - SIGINT, then it must exit 0 within 10 s having said "stopped".
stop() {
  stop_server "apr_port: $1" "$work/$1.out" ': stopped after' || return 1
  sed -n 1p "$work/$1.out"
  tail -n 1 "$work/$1.out"
}

fail=0
for server in "apr_server" "taxi_server --backend apr" \
  "taxi_server --backend apr:poll"; do
  name=$(echo "$server" | tr ' :' '__')
  # shellcheck disable=SC2086 # the words of $server are its arguments
  start "$name" "$ex/"$server || {
    fail=1
    continue
  }
  if ! "$ex/apr_port_client" --port "$port" --connections 4 <"$req" \
    >"$work/$name.answers"; then
    echo "apr_port: the client failed against $server"
    fail=1
  fi
  stop "$name" || fail=1
  if cmp -s "$work/$name.answers" "$want"; then
    echo "apr_port: $server: $(wc -l <"$want") answers as expected"
  else
    echo "apr_port: $server answered differently:"
    diff "$want" "$work/$name.answers" | head -n 20
    fail=1
  fi
done
[ "$fail" -eq 0 ] && echo "apr_port: both servers gave the same answers"
exit $fail
