#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# proactor_echo.sh - examples/proactor_echo as a test: over every
# completion backend that works here, with 1 and 3 threads, it echoes
# tests/bench/loadgen's messages (64 B and 5000 B, every byte checked by
# loadgen), then stops on SIGINT with exit status 0 and its closing line.
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
server=$builddir/examples/proactor_echo
loadgen=$builddir/tests/bench/loadgen
lister=$builddir/examples/echo_server
for p in "$server" "$loadgen" "$lister"; do
  if [ ! -x "$p" ]; then
    echo "proactor_echo.sh: SKIP: $p is not built"
    exit 77
  fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/taxi-pecho.XXXXXX") || exit 1
pid=''
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

pass=0 fail=0
# run BACKEND THREADS: one server, two loads, a stop.
run() {
  out=$work/server.out
  : >"$out" # now: the server's redirection may come after the loop's read
  "$server" --port 0 --backend "$1" --threads "$2" >"$out" 2>&1 &
  pid=$!
  port=''
  i=0
  while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.* listening on .*:\([0-9][0-9]*\)$/\1/p' "$out")
    [ -z "$port" ] && sleep 0.1
    i=$((i + 1))
  done
  ok=1
  if [ -z "$port" ]; then
    echo "FAIL: $1, $2 threads: the server did not start:"
    cat "$out"
    ok=0
  else
    for size in 64 5000; do
      if ! "$loadgen" --port "$port" --connections 20 --threads 1 \
        --size "$size" --messages 2000 --warmup 0 --time-limit 60 \
        >"$work/load.out" 2>&1 ||
        ! grep -q "errors 0" "$work/load.out"; then
        echo "FAIL: $1, $2 threads, $size B:"
        cat "$work/load.out"
        ok=0
      fi
    done
  fi
  kill -INT "$pid" 2>/dev/null
  if ! wait "$pid"; then
    echo "FAIL: $1, $2 threads: exit status not 0"
    ok=0
  fi
  pid=''
  if ! grep -q "stopped after" "$out"; then
    echo "FAIL: $1, $2 threads: no closing line"
    cat "$out"
    ok=0
  fi
  if [ $ok = 1 ]; then
    echo "ok: $1, $2 threads"
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
  fi
}

for backend in $("$lister" --list-proactor-backends); do
  case $backend in *:*) continue ;; esac # variants: covered by the suites
  for threads in 1 3; do run "$backend" "$threads"; done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
