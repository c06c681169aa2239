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
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
run="sh $srcdir/tests/win32/wine-run.sh"
server=$(wine_exe "$builddir/examples" echo_server)
client=$(wine_exe "$builddir/examples" echo_client)
wine_setup
messages=${ECHO_MESSAGES:-200}
make_work echo-wine

# echo_one DISPATCHER BACKEND THREADS
echo_one() {
  log="$work/server-$1-$2.log"
  # shellcheck disable=SC2086 # $run: the words of a command
  if ! start_server "$1/$2: the server" "$log" $run "$server" --port 0 \
    --host 127.0.0.1 --dispatcher "$1" --backend "$2" --threads "$3"; then
    bad "$1/$2: the server did not start"
    return
  fi
  if $run "$client" --port "$port" --host 127.0.0.1 --connections 4 \
    --messages "$messages" >"$work/client.log" 2>&1 &&
    grep -q "all verified" "$work/client.log"; then
    ok "$1/$2 (threads $3): $(cat "$work/client.log")"
  else
    cat "$work/client.log" "$log"
    bad "$1/$2 (threads $3)"
  fi
  stop_pid "$pid" TERM
}

echo_one reactor wsapoll 1
echo_one lf wsapoll 2
echo_one lf select 2
echo_one hsha select 2
echo_one proactor emulated 2
echo_one proactor iocp 2
finish
