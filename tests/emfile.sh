#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/emfile.sh - the echo server out of descriptors: it pauses accepting,
# serves the connections it has, and resumes by itself.
#
#   tests/emfile.sh [--configs "DISPATCHER:BACKEND ..."]
#
# For each dispatcher (reactor, lf, hsha over the best readiness backend;
# proactor over each completion backend that works here) it starts
# examples/echo_server under `prlimit --nofile=64` and runs examples/
# echo_client with 200 connections at once, every byte verified: about 50
# fit, the rest wait in the listen backlog until connections that finished
# give their descriptors back.  The run passes when
#   - every one of the 200 connections completed (the client exits 0), and
#     a second client is served afterwards;
#   - the server, stopped with SIGTERM, exits 0 and reports all 204
#     connections, and at least one pause for lack of descriptors (the
#     limit was reached: the case was tested);
#   - the failed accepts are no more than the pauses plus a few: a server
#     that retried at once (a spin) would count thousands (a count, not a
#     time, decides).
#
# Environment: builddir, TAXI_TEST_TIMEOUT_SCALE.  Skips (77) without
# prlimit.  Ends with the line "N passed, N failed".
set -u

: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
server=$builddir/examples/echo_server
client=$builddir/examples/echo_client
nofile=64
conns=200
messages=50
limit=$((60 * scale))

configs=""
while [ $# -gt 0 ]; do
  case $1 in
    --configs) configs=$2; shift ;;
    *) echo "emfile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [ ! -x "$server" ] || [ ! -x "$client" ]; then
  echo "emfile.sh: SKIP: the examples are not built"
  exit 77
fi
if ! command -v prlimit >/dev/null 2>&1 ||
   ! prlimit --nofile=$nofile true 2>/dev/null; then
  echo "emfile.sh: SKIP: prlimit is missing or refused"
  exit 77
fi
if [ -z "$configs" ]; then
  best=$("$server" --list-backends | grep -v '^apr' | head -n 1)
  for d in reactor lf hsha; do configs="$configs $d:$best"; done
  for b in $("$server" --list-proactor-backends); do
    configs="$configs proactor:$b"
  done
fi

make_work emfile
echo "emfile: $conns connections at once to a server limited to $nofile descriptors"
for cfg in $configs; do
  d=${cfg%%:*} b=${cfg#*:}
  if [ "$d" = reactor ]; then t=1; else t=4; fi
  why=""
  if ! spawn "$work/out" "$work/err" prlimit --nofile=$nofile "$server" \
    --port 0 --report --dispatcher "$d" --backend "$b" --threads $t; then
    if [ "$status" = 2 ] || [ "$status" = 3 ]; then
      printf '%-20s SKIP  %s\n' "$cfg" "$(head -n 1 "$work/err")"
      continue
    fi
    why="did not start: $(head -n 1 "$work/err")"
  elif ! "$client" --port "$port" --connections $conns --messages $messages \
      --time-limit "$limit" >"$work/client" 2>&1; then
    why="the $conns connections: $(tail -n 1 "$work/client")"
  elif ! "$client" --port "$port" --connections 4 --messages $messages \
      --time-limit "$limit" >"$work/client2" 2>&1; then
    why="served no more afterwards: $(tail -n 1 "$work/client2")"
  fi
  if [ -n "$pid" ] && ! stop_pid "$pid" TERM; then
    why=${why:-"SIGTERM did not stop the server"}
  fi
  report=$(grep 'report:' "$work/err" | tail -n 1)
  field() { echo "$report" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
  accepted=$(field connections)
  errors=$(field accept_errors)
  pauses=$(field accept_pauses)
  if [ -z "$why" ] && [ "$status" -ne 0 ]; then
    why="exit status $status: $(grep -v report: "$work/err" | head -n 1)"
  fi
  if [ -z "$why" ] && [ -z "$accepted" ]; then
    why="no report line"
  fi
  if [ -z "$why" ] && [ "$accepted" -ne $((conns + 4)) ]; then
    why="accepted $accepted connections, not $((conns + 4))"
  fi
  if [ -z "$why" ] && [ "$pauses" -lt 1 ]; then
    why="never ran out of descriptors (no pause): nothing was tested"
  fi
  if [ -z "$why" ] && [ "$errors" -gt $((pauses + 8)) ]; then
    why="$errors failed accepts for $pauses pauses: accepting spins"
  fi
  if grep -q 'Sanitizer\|runtime error:' "$work/err"; then
    why="sanitizer: $(grep -m1 'Sanitizer\|runtime error:' "$work/err")"
  fi
  tally "$why"
  printf '%-20s %-4s accepted=%s accept_errors=%s accept_pauses=%s %s\n' \
    "$cfg" "$verdict" "${accepted:-?}" "${errors:-?}" "${pauses:-?}" "$why"
done
finish
