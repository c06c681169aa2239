#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# proactor_emfile.sh - the echo server's proactor dispatcher out of
# descriptors: run under `prlimit --nofile=64` (about 55 connections at
# once), 200 clients connect at once.  Over each completion backend that
# works here (uring, aio, emulated) it must:
#   - serve every client, every byte verified (echo_client exits 0): the
#     connections it could not accept at first wait in the listen backlog
#     and are accepted as served ones close;
#   - say it paused ("retrying: accept failed" from the error callback);
#   - never spin: the accept calls it makes (counted by the fault-injection
#     module, which injects nothing here) stay within a few per connection,
#     where a retry at once would make thousands; io_uring accepts in the
#     kernel, so there the module counts io_uring_enter against a bound per
#     round trip;
#   - still serve afterwards (a second client), and stop on SIGTERM with
#     status 0.
# Skipped (77) without prlimit, the fault-injection module (Linux/glibc)
# or any of the backends.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
module=$builddir/tests/fault/libtaxifault.so
server=$builddir/examples/echo_server
client=$builddir/examples/echo_client
if [ -x "$builddir/examples/.libs/echo_server" ] && [ -d "$builddir/.libs" ]; then
  server=$builddir/examples/.libs/echo_server
  client=$builddir/examples/.libs/echo_client
  LD_LIBRARY_PATH="$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
command -v prlimit >/dev/null 2>&1 || { echo "SKIP: no prlimit"; exit 77; }
[ -f "$module" ] || { echo "SKIP: no fault-injection module ($module)"; exit 77; }

clients=200
messages=50
make_work emfile
backends=$("$server" --list-proactor-backends 2>/dev/null)

for b in uring aio emulated; do
  if ! echo "$backends" | grep -qx "$b"; then
    echo "$b: skipped (not available here)"
    continue
  fi
  : >"$work/stats"
  why=
  # A sanitizer build's server carries its runtime: the module, preloaded
  # before it, only forwards calls (as in tests/fault/sweep.sh).
  if ! spawn "$work/out" "$work/err" \
    env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    LD_PRELOAD="$module" TAXI_FAULT_STATS="$work/stats" \
    TAXI_FAULT_ONLY=echo_server \
    prlimit --nofile=64 "$server" --port 0 --dispatcher proactor \
    --backend "$b" --report; then
    why="the server did not start: $(head -n 1 "$work/err")"
  elif ! "$client" --port "$port" --connections $clients \
    --messages $messages --time-limit $((60 * scale)) >"$work/c1" 2>&1; then
    why="the 200 clients were not all served: $(tail -n 1 "$work/c1")"
  elif ! "$client" --port "$port" --connections 4 --messages 10 \
    --time-limit $((30 * scale)) >"$work/c2" 2>&1; then
    why="not serving afterwards: $(tail -n 1 "$work/c2")"
  fi
  if [ -n "$pid" ]; then
    stop_pid "$pid" TERM
    [ -z "$why" ] && [ "$status" != 0 ] &&
      why="exit status $status after SIGTERM"
  fi
  if [ -z "$why" ] && ! grep -q "retrying: accept failed" "$work/err"; then
    why="no accept pause reported (was the limit reached?)"
  fi
  calls() { awk -v n="$1" '$2 == n { s += $3 } END { print s + 0 }' "$work/stats"; }
  accepts=$(($(calls accept4) + $(calls accept)))
  enters=$(calls io_uring_enter)
  conns=$((clients + 4))
  if [ -z "$why" ]; then
    if [ "$b" = uring ]; then
      bound=$((8 * (clients * messages + 40) + 1000))
      [ "$enters" -le $bound ] ||
        why="io_uring_enter made $enters times (bound $bound): spinning?"
    else
      bound=$((4 * conns + 100))
      [ "$accepts" -le $bound ] ||
        why="accept made $accepts times for $conns connections: spinning?"
    fi
  fi
  pauses=$(grep -c "retrying: accept failed" "$work/err")
  if [ -n "$why" ]; then
    bad "$b: $why"
    sed 's/^/  | /' "$work/err" | tail -n 5
  else
    ok "$b: $conns connections served, $pauses pauses reported, accept calls $accepts, io_uring_enter $enters"
  fi
done

[ $((pass + fail)) -eq 0 ] && echo "SKIP: no completion backend here"
finish
