#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/win32/echo-wine.sh - the echo example of a Windows cross build,
# run under wine: for each dispatcher (and backend), start echo_server.exe
# on a free port, exchange messages with echo_client.exe (which checks
# every byte it gets back), then stop the server.  The handler sources are
# the ones the Linux build runs (examples/echo_server.c).
#
# A `make check` test of the cross build (it runs on the build machine and
# starts the programs through tests/win32/wine-run.sh itself); by hand:
#   builddir=. srcdir=.. sh ../tests/win32/echo-wine.sh
#
# Windows has no SIGTERM for the server to catch: it is stopped by ending
# its wine process, which is what Ctrl-C in a console amounts to there.

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
run="sh $srcdir/tests/win32/wine-run.sh"
# The programs themselves, not libtool's wrappers: a wrapper runs the
# program as a child process, which ending the wrapper would leave behind.
# The DLL is found through WINEPATH.
server="$builddir/examples/.libs/echo_server.exe"
client="$builddir/examples/.libs/echo_client.exe"
[ -f "$server" ] || server="$builddir/examples/echo_server.exe"
[ -f "$client" ] || client="$builddir/examples/echo_client.exe"
WINEPATH="$(cd "$builddir" && pwd)/.libs${WINEPATH:+;$WINEPATH}"
export WINEPATH
messages=${ECHO_MESSAGES:-200}
out=$(mktemp -d "${TMPDIR:-/tmp}/taxi-echo-wine.XXXXXX")
trap 'rm -rf "$out"' EXIT
failed=0

# echo_one DISPATCHER BACKEND THREADS
echo_one() {
  log="$out/server-$1-$2.log"
  $run "$server" --port 0 --host 127.0.0.1 --dispatcher "$1" \
    --backend "$2" --threads "$3" >"$log" 2>&1 &
  pid=$!
  port=
  i=0
  while [ $i -lt 300 ] && [ -z "$port" ]; do # up to 30 s: wine starts slowly
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] || { kill -0 $pid 2>/dev/null || break; sleep 0.1; }
    i=$((i + 1))
  done
  if [ -z "$port" ]; then
    echo "FAIL: $1/$2: the server did not start"; cat "$log"
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    failed=1
    return
  fi
  if $run "$client" --port "$port" --host 127.0.0.1 --connections 4 \
    --messages "$messages" >"$out/client.log" 2>&1 &&
    grep -q "all verified" "$out/client.log"; then
    echo "ok: $1/$2 (threads $3): $(cat "$out/client.log")"
  else
    echo "FAIL: $1/$2 (threads $3)"; cat "$out/client.log" "$log"
    failed=1
  fi
  kill $pid 2>/dev/null
  wait $pid 2>/dev/null
}

echo_one reactor wsapoll 1
echo_one lf wsapoll 2
echo_one lf select 2
echo_one hsha select 2
echo_one proactor emulated 2
echo_one proactor iocp 2
exit $failed
