#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/soak.sh - the echo soak: every dispatcher over every backend, with
# 8 threads, carries a million messages exactly once.
#
#   tests/soak.sh [--big] [--messages N]
#
# For each configuration (reactor, lf and hsha over each readiness backend
# that works here; proactor over each completion backend; proactors, a
# proactor per thread, over uring and emulated: the stream suite covers
# its aio pair, and a million messages through aio take minutes under a
# sanitizer) it starts examples/echo_server (8 threads: the L/F pool, the
# HS/HA workers, the Proactor's pool or the group's proactors; the
# reactor dispatcher has its one thread) and runs
# examples/echo_client with 16 connections.  Every message differs (by
# connection and round trip) and the client checks every byte of every
# reply in order on its connection, so a message lost, doubled, reordered
# or delivered to another connection fails it; then the server, stopped
# with SIGTERM, must report exactly the bytes the client sent (nothing
# echoed twice, nothing dropped) and exit 0; a Proactor's count may lag by
# completions not yet dispatched at the stop, at most a message per
# connection (said in the output).
#
# Sizes: --big (or TAXI_SOAK_BIG=1): 1,000,000 messages per configuration;
# otherwise 20,000 (TAXI_TEST_SMALL: 5,000); --messages N sets it.
#
# Environment: builddir, TAXI_TEST_TIMEOUT_SCALE.  Ends with the line
# "N passed, N failed".
set -u

: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
server=$builddir/examples/echo_server
client=$builddir/examples/echo_client

total=20000
[ -n "${TAXI_TEST_SMALL:-}" ] && [ "${TAXI_TEST_SMALL}" != 0 ] && total=5000
[ -n "${TAXI_SOAK_BIG:-}" ] && [ "${TAXI_SOAK_BIG}" != 0 ] && total=1000000
while [ $# -gt 0 ]; do
  case $1 in
    --big) total=1000000 ;;
    --messages) total=$2; shift ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [ ! -x "$server" ] || [ ! -x "$client" ]; then
  echo "soak.sh: SKIP: the examples are not built"
  exit 77
fi

conns=16
per=$(( (total + conns - 1) / conns ))
size=200
threads=8
# The client's time limit: generous, since a million round trips on a slow
# backend (aio, select under a sanitizer) take minutes.
limit=$(awk -v s="$scale" -v m="$per" 'BEGIN { printf "%d", (60 + m / 100) * s }')

configs=""
for b in $("$server" --list-backends | grep -v '^apr'); do
  for d in reactor lf hsha; do configs="$configs $d:$b"; done
done
for b in $("$server" --list-proactor-backends); do
  configs="$configs proactor:$b"
  case $b in uring | emulated) configs="$configs proactors:$b" ;; esac
done

make_work soak
echo "soak: $((per * conns)) messages of $size bytes over $conns connections per configuration"
for cfg in $configs; do
  d=${cfg%%:*} b=${cfg#*:}
  if [ "$d" = reactor ]; then t=1; else t=$threads; fi
  why=""
  start=$(date +%s)
  if ! spawn "$work/out" "$work/err" "$server" --port 0 --report \
    --dispatcher "$d" --backend "$b" --threads $t; then
    # 2, 3: the backend is compiled in but does not work here, or the
    # library refuses the configuration.
    if [ "$status" = 2 ] || [ "$status" = 3 ]; then
      printf '%-20s SKIP  %s\n' "$cfg" "$(head -n 1 "$work/err")"
      continue
    fi
    why="did not start: $(head -n 1 "$work/err")"
  elif ! "$client" --port "$port" --connections $conns --messages $per \
      --size $size --time-limit "$limit" >"$work/client" 2>&1; then
    why=$(tail -n 1 "$work/client")
  fi
  if [ -n "$pid" ] && ! stop_pid "$pid" TERM; then
    why=${why:-"SIGTERM did not stop the server"}
  fi
  secs=$(($(date +%s) - start))
  bytes=$(sed -n 's/.*report: status=.* bytes=\([0-9]*\).*/\1/p' "$work/err")
  want=$((per * conns * size))
  if [ -z "$why" ] && [ "$status" -ne 0 ]; then
    why="exit status $status: $(grep -v report: "$work/err" | head -n 1)"
  fi
  note=''
  case $d in proactor | proactors) proactive=1 ;; *) proactive=0 ;; esac
  if [ -z "$why" ] && [ $proactive = 1 ] && [ -n "$bytes" ] &&
    [ "$bytes" -lt "$want" ] && [ $((want - bytes)) -le $((conns * size)) ]; then
    # echo_server reads its counters when the run ends, before the
    # destroy that closes the connections; a Proactor counts a write when
    # its completion is dispatched, and the stop may come before the last
    # ones are (the client has verified every byte of every reply, so
    # they were sent; the stream suite checks that a close counts them):
    # at most one message per connection may be missing from the count,
    # never more, and never an extra one.
    note="(the server's count $((want - bytes)) bytes behind at the stop)"
  elif [ -z "$why" ] && [ "$bytes" != "$want" ]; then
    why="the server echoed $bytes bytes, the client sent $want"
  fi
  if grep -q 'Sanitizer\|runtime error:' "$work/err"; then
    why="sanitizer: $(grep -m1 'Sanitizer\|runtime error:' "$work/err")"
  fi
  tally "$why"
  printf '%-20s %-4s %4ss  %s %s\n' "$cfg" "$verdict" "$secs" \
    "$(sed -n 's/.*round trips, \([0-9]* round trips\/s\).*/\1/p' "$work/client")" "$why$note"
done
finish
