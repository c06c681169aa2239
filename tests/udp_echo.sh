#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# udp_echo.sh - examples/udp_echo as a test: on every dispatcher, the
# server and a client of datagrams of random sizes up to 65,507 bytes
# (every byte checked), over IPv4 and, where the host has it, IPv6; a
# client given the name localhost (resolved by the library's resolver
# threads; an address of the name that refuses is left for the next);
# then the server's stop on SIGINT.  A dispatcher without datagram endpoints
# (exit status 3) is skipped, said so.  Ends with "N passed, N failed";
# exits 77 when nothing could run.

: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
prog=$builddir/examples/udp_echo
need_built udp_echo.sh "$prog"
make_work udp_echo

count=200
[ "$small" = 1 ] && count=50

for dispatcher in reactor lf hsha proactor proactors; do
  for host in 127.0.0.1 '[::1]'; do
    out=$work/server-$dispatcher.out
    if ! spawn "$out" "$out" "$prog" server --address "$host:0" \
      --dispatcher "$dispatcher"; then
      case $status in
        3) echo "$dispatcher: SKIP: no datagram endpoints here" ;;
        *)
          if [ "$host" = '[::1]' ]; then
            echo "$dispatcher: SKIP: no IPv6 here"
          else
            bad "$dispatcher: the server did not start (status $status)"
            cat "$out"
          fi
          ;;
      esac
      break
    fi
    if "$prog" client --address "$host:$port" --count $count \
      --dispatcher "$dispatcher" --time-limit $((60 * scale)) \
      >"$work/client.out" 2>&1 &&
      grep -q "all verified" "$work/client.out"; then
      ok "$dispatcher: $count datagrams echoed over $host"
    else
      bad "$dispatcher: the client over $host:"
      cat "$work/client.out"
    fi
    if [ "$host" = 127.0.0.1 ]; then
      if "$prog" client --address "localhost:$port" --count 10 \
        --dispatcher "$dispatcher" --time-limit $((60 * scale)) \
        >"$work/client.out" 2>&1 &&
        grep -q "all verified" "$work/client.out"; then
        ok "$dispatcher: echoed by the name localhost"
      else
        bad "$dispatcher: the client of localhost:"
        cat "$work/client.out"
      fi
    fi
    stop_server "$dispatcher: the server" "$out" "stopped after" ||
      bad "$dispatcher: the server's stop"
  done
done
finish
