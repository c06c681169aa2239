#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# relay.sh - examples/relay as a test, on every dispatcher: 50 echo
# clients of 1 MB each (echo_client, every byte checked) through the relay
# to examples/echo_server; then tests/relay_check's own upstream behind
# it: a slow reader of a big transfer (the relay stops reading the
# upstream, holding no more than its watermarks allow, from its streams'
# counters) and half-close passed through both ways; and a clean stop.
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
relay=$builddir/examples/relay/relay
server=$builddir/examples/echo_server
client=$builddir/examples/echo_client
check=$builddir/tests/relay_check
need_built relay.sh "$relay" "$server" "$client" "$check"
make_work relay

# 50 clients of 256 messages of 4 KiB: 1 MiB each; 128 KiB each at the
# small sizes (TAXI_TEST_SMALL).
connections=50 messages=256 size=4096
[ "$small" = 1 ] && messages=32

if ! start_server "the echo server" "$work/echo.out" "$server" --port 0; then
  bad "the echo server did not start"
  finish
fi
echo_pid=$pid echo_port=$port

for dispatcher in reactor lf hsha proactor proactors; do
  out=$work/relay-$dispatcher.out
  if ! spawn "$out" "$out" "$relay" --port 0 \
    --upstream "127.0.0.1:$echo_port" --dispatcher "$dispatcher"; then
    if [ "$status" = 3 ]; then
      echo "$dispatcher: SKIP: the relay refuses it here"
      continue
    fi
    bad "$dispatcher: the relay did not start (status $status)"
    cat "$out"
    continue
  fi
  if "$client" --port "$port" --connections $connections \
    --messages $messages --size $size --time-limit $((120 * scale)) \
    >"$work/client.out" 2>&1 && grep -q "all verified" "$work/client.out"; then
    ok "$dispatcher: $connections echo clients of $((messages * size)) bytes through the relay"
  else
    bad "$dispatcher: echo clients through the relay:"
    cat "$work/client.out"
  fi
  stop_server "$dispatcher: the relay" "$out" "relay: stopped after" ||
    bad "$dispatcher: the relay's stop"
  # The checker's own upstream behind a relay of its own.
  "$check" "$relay" "$dispatcher" >"$work/check.out" 2>&1
  rc=$?
  sed "s/^/$dispatcher: /" "$work/check.out" | grep -v ' passed, .* failed$'
  case $rc in
    0) ok "$dispatcher: slow reader, half-close, stop" ;;
    77) echo "$dispatcher: SKIP: relay_check" ;;
    *) bad "$dispatcher: relay_check (status $rc)" ;;
  esac
done

pid=$echo_pid
stop_server "the echo server" "$work/echo.out" "stopped after" ||
  bad "the echo server's stop"
finish
