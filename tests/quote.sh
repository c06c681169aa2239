#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# quote.sh - examples/quote as a test.  Every concurrency model of
# quote_server (--threads 3) serves 20 connections x 200 requests (10 x 50
# with TAXI_TEST_SMALL) of
# quote_client, which checks every answer against the quote file (known,
# unknown and malformed requests alike), then 500 requests sent in two
# pieces each; then the server stops on SIGINT with exit status 0 and its
# closing line.  Each model is also stopped while a client is still
# connected and sending, and must neither hang nor fail.  Bad command
# lines must be refused with status 2.
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
: "${srcdir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
server=$builddir/examples/quote/quote_server
client=$builddir/examples/quote/quote_client
quotes=$srcdir/examples/quote/quotes.txt
need_built quote.sh "$server" "$client"
make_work quote
out=$work/server.out

# start MODEL: a server on a free port; sets pid and port.
start() {
  start_server "the $1 server" "$out" "$server" --model "$1" \
    --quotes "$quotes" --port 0 --threads 3
}

# stop MODEL: SIGINT; within 10 s, exit status 0 and the closing line.
stop() {
  stop_server "the $1 server" "$out" "stopped after [0-9]* requests"
}

# The small sizes (TAXI_TEST_SMALL): 10 connections x 50 requests.
conns=20 reqs=200
[ "$small" = 1 ] && conns=10 reqs=50
for model in iterative thread-per-request thread-per-connection \
  handle-queue reactor lf hsha proactor; do
  # Every answer of a short run checked.
  if start "$model"; then
    if "$client" --port "$port" --quotes "$quotes" --connections $conns \
      --requests $reqs --time-limit 120 >"$work/client.out" 2>&1 &&
      grep -q "requests=$((conns * reqs)) .* wrong=0 missing=0" "$work/client.out"; then
      ok "$model: $((conns * reqs)) requests verified"
      # Requests cut in two: the server must wait for the rest.
      if "$client" --port "$port" --quotes "$quotes" --connections 5 \
        --requests 100 --split --seed 7 --time-limit 120 \
        >"$work/client.out" 2>&1 &&
        grep -q "requests=500 .* wrong=0 missing=0" "$work/client.out"; then
        ok "$model: 500 split requests verified"
      else
        cat "$work/client.out"
        bad "$model: split requests"
      fi
      if stop "$model"; then
        ok "$model: stopped"
      else
        bad "$model: stop"
      fi
    else
      cat "$work/client.out"
      stop "$model"
      bad "$model: 4000 requests"
    fi
  else
    bad "$model: start"
  fi
  # A stop in the middle of a run: the server must not wait for clients.
  if start "$model"; then
    "$client" --port "$port" --quotes "$quotes" --connections 5 \
      --duration 30 >"$work/client.out" 2>&1 &
    cpid=$!
    track "$cpid"
    sleep 1
    if stop "$model"; then
      ok "$model: stopped with clients connected"
    else
      bad "$model: stop with clients connected"
    fi
    # The client sees its connections end: it reports them and stops
    # without a wrong answer (status 1 would also mean one).
    status=0
    wait "$cpid" || status=$?
    forget "$cpid"
    if grep -q "wrong=0" "$work/client.out"; then
      ok "$model: the interrupted client saw no wrong answer"
    else
      cat "$work/client.out"
      bad "$model: the interrupted client (status $status)"
    fi
  else
    bad "$model: start"
  fi
done

# Bad input: refused with status 2 and a message, never a crash.
refused() {
  what=$1
  shift
  status=0
  "$@" >"$work/bad.out" 2>&1 || status=$?
  if [ $status -eq 2 ] && [ -s "$work/bad.out" ]; then
    ok "refused: $what"
  else
    cat "$work/bad.out"
    bad "$what: status $status, expected 2"
  fi
}
printf 'ACE 12.5\nbad line here\n' >"$work/broken.txt"
printf 'ACE 12.5\nACE 13\n' >"$work/twice.txt"
printf 'ace 12.5\n' >"$work/lower.txt"
printf 'ACE 12.555\n' >"$work/price.txt"
refused "unknown model" "$server" --model fork --quotes "$quotes"
refused "no model" "$server" --quotes "$quotes"
refused "bad port" "$server" --model reactor --quotes "$quotes" --port 70000
refused "port not a number" "$server" --model lf --quotes "$quotes" --port x
refused "missing quotes file" "$server" --model lf --quotes "$work/none.txt"
refused "malformed quotes file" "$server" --model lf --quotes "$work/broken.txt"
refused "symbol twice" "$server" --model lf --quotes "$work/twice.txt"
refused "lower-case symbol" "$server" --model lf --quotes "$work/lower.txt"
refused "three decimals" "$server" --model lf --quotes "$work/price.txt"
refused "threads 0" "$server" --model lf --quotes "$quotes" --threads 0
refused "unknown backend" "$server" --model reactor --quotes "$quotes" \
  --backend nosuch
refused "backend for a plain model" "$server" --model iterative \
  --quotes "$quotes" --backend poll
refused "client without port" "$client" --quotes "$quotes"
refused "client bad connections" "$client" --port 1 --quotes "$quotes" \
  --connections 0

finish
