#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# quote-wine.sh - examples/quote under wine, in a Windows build's make
# check: every model of quote_server.exe answers 10 connections x 100
# requests (cut in two) of quote_client.exe, every answer checked, then
# stops on SIGINT (which wine delivers as a console Ctrl-C event) with
# exit status 0 and its closing line.

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
run="sh $srcdir/tests/win32/wine-run.sh"
server="$builddir/examples/quote/.libs/quote_server.exe"
client="$builddir/examples/quote/.libs/quote_client.exe"
[ -f "$server" ] || server="$builddir/examples/quote/quote_server.exe"
[ -f "$client" ] || client="$builddir/examples/quote/quote_client.exe"
if [ ! -f "$server" ] || [ ! -f "$client" ]; then
  echo "quote-wine.sh: SKIP: the quote example is not built"
  exit 77
fi
WINEPATH="$(cd "$builddir" && pwd)/.libs${WINEPATH:+;$WINEPATH}"
export WINEPATH
quotes="Z:$(cd "$srcdir" && pwd)/examples/quote/quotes.txt"
out=$(mktemp -d "${TMPDIR:-/tmp}/taxi-quote-wine.XXXXXX")
pid=''
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$out"' EXIT
failed=0

for model in iterative thread-per-request thread-per-connection \
  handle-queue reactor lf hsha proactor; do
  log=$out/server-$model.log
  : >"$log" # before the server starts: its output is what the loop reads
  $run "$server" --model "$model" --quotes "$quotes" --port 0 --threads 3 \
    >"$log" 2>&1 &
  pid=$! # wine-run.sh execs wine: this is the server
  port=''
  i=0
  while [ $i -lt 300 ] && [ -z "$port" ]; do # up to 30 s: wine starts slowly
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] || { kill -0 "$pid" 2>/dev/null || break; sleep 0.1; }
    i=$((i + 1))
  done
  if [ -z "$port" ]; then
    echo "FAIL: $model: the server did not start"
    cat "$log"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=''
    failed=1
    continue
  fi
  if $run "$client" --port "$port" --quotes "$quotes" --connections 10 \
    --requests 100 --split >"$out/client.log" 2>&1 &&
    grep -q "requests=1000 .* wrong=0 missing=0" "$out/client.log"; then
    echo "ok: $model: $(cat "$out/client.log")"
  else
    echo "FAIL: $model"
    cat "$out/client.log" "$log"
    failed=1
  fi
  kill -INT "$pid" 2>/dev/null
  i=0
  while [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
  status=0
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null
    status=timeout
  fi
  wait "$pid" 2>/dev/null || [ "$status" = timeout ] || status=$?
  pid=''
  if [ "$status" != 0 ] || ! grep -q "stopped after 1000 requests" "$log"
  then
    echo "FAIL: $model: the stop (status $status)"
    cat "$log"
    failed=1
  fi
done
exit $failed
