#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# proactor_echo.sh - examples/proactor_echo as a test: over every
# completion backend that works here, with 1 and 3 threads, it echoes
# tests/bench/loadgen's messages (64 B and 5000 B, every byte checked by
# loadgen), then stops on SIGINT with exit status 0 and its closing line.
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
server=$builddir/examples/proactor_echo
loadgen=$builddir/tests/bench/loadgen
lister=$builddir/examples/echo_server
need_built proactor_echo.sh "$server" "$loadgen" "$lister"
make_work pecho

# The small sizes (TAXI_TEST_SMALL): 500 messages a load.
messages=2000
[ "$small" = 1 ] && messages=500

# run BACKEND THREADS: one server, two loads, a stop.
run() {
  out=$work/server.out
  ok=1
  if ! start_server "$1, $2 threads: the server" "$out" "$server" --port 0 \
    --backend "$1" --threads "$2"; then
    ok=0
  else
    for size in 64 5000; do
      if ! "$loadgen" --port "$port" --connections 20 --threads 1 \
        --size "$size" --messages $messages --warmup 0 --time-limit 60 \
        >"$work/load.out" 2>&1 ||
        ! grep -q "errors 0" "$work/load.out"; then
        echo "FAIL: $1, $2 threads, $size B:"
        cat "$work/load.out"
        ok=0
      fi
    done
    stop_server "$1, $2 threads: the server" "$out" "stopped after" || ok=0
  fi
  if [ $ok = 1 ]; then ok "$1, $2 threads"; else bad "$1, $2 threads"; fi
}

for backend in $("$lister" --list-proactor-backends); do
  case $backend in *:*) continue ;; esac # variants: covered by the suites
  for threads in 1 3; do run "$backend" "$threads"; done
done
finish
