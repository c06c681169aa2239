#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/win32/udp-echo-wine.sh - the UDP echo example of a Windows cross
# build, run under wine: for each dispatcher and backend of Windows (IOCP's
# WSARecvFrom and WSASendTo under the proactor dispatchers among them),
# start `udp_echo.exe server` on a free port and have `udp_echo.exe
# client` send it datagrams of random sizes up to 65,507 bytes, checking
# every byte of each echo; then stop the server.  The sources are the
# ones the Linux build runs (examples/udp_echo.c).
#
# A `make check` test of the cross build; by hand:
#   builddir=. srcdir=.. sh ../tests/win32/udp-echo-wine.sh
#
# Windows has no SIGTERM for the server to catch: it is stopped by ending
# its wine process, as in echo-wine.sh.

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
run="sh $srcdir/tests/win32/wine-run.sh"
prog=$(wine_exe "$builddir/examples" udp_echo)
wine_setup
count=${UDP_ECHO_COUNT:-50}
make_work udp-echo-wine

# udp_one DISPATCHER BACKEND
udp_one() {
  log="$work/server-$1-$2.log"
  # shellcheck disable=SC2086 # $run: the words of a command
  if ! start_server "$1/$2: the server" "$log" $run "$prog" server \
    --address 127.0.0.1:0 --dispatcher "$1" --backend "$2"; then
    bad "$1/$2: the server did not start"
    return
  fi
  # shellcheck disable=SC2086
  if $run "$prog" client --address "127.0.0.1:$port" --count "$count" \
    --dispatcher "$1" --backend "$2" --time-limit $((120 * scale)) \
    >"$work/client.log" 2>&1 &&
    grep -q "all verified" "$work/client.log"; then
    ok "$1/$2: $(cat "$work/client.log")"
  else
    cat "$work/client.log" "$log"
    bad "$1/$2"
  fi
  stop_pid "$pid" TERM
}

udp_one reactor wsapoll
udp_one lf select
udp_one hsha select
udp_one proactor emulated
udp_one proactor iocp
udp_one proactors iocp
finish
