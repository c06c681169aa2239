#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# quote-wine.sh - examples/quote under wine, in a Windows build's make
# check: every model of quote_server.exe answers 10 connections x 100
# requests (cut in two) of quote_client.exe, every answer checked, then
# stops on SIGINT (which wine delivers as a console Ctrl-C event) with
# exit status 0 and its closing line.

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
run="sh $srcdir/tests/win32/wine-run.sh"
server=$(wine_exe "$builddir/examples/quote" quote_server)
client=$(wine_exe "$builddir/examples/quote" quote_client)
if [ ! -f "$server" ] || [ ! -f "$client" ]; then
  echo "quote-wine.sh: SKIP: the quote example is not built"
  exit 77
fi
wine_setup
quotes="Z:$(cd "$srcdir" && pwd)/examples/quote/quotes.txt"
make_work quote-wine

for model in iterative thread-per-request thread-per-connection \
  handle-queue reactor lf hsha proactor; do
  log=$work/server-$model.log
  # wine-run.sh execs wine: the process started is the server
  # shellcheck disable=SC2086 # $run: the words of a command
  if ! start_server "$model: the server" "$log" $run "$server" \
    --model "$model" --quotes "$quotes" --port 0 --threads 3; then
    bad "$model: the server did not start"
    continue
  fi
  if $run "$client" --port "$port" --quotes "$quotes" --connections 10 \
    --requests 100 --split >"$work/client.log" 2>&1 &&
    grep -q "requests=1000 .* wrong=0 missing=0" "$work/client.log"; then
    ok "$model: $(cat "$work/client.log")"
  else
    cat "$work/client.log" "$log"
    bad "$model"
  fi
  stop_server "$model: the server" "$log" "stopped after 1000 requests" ||
    bad "$model: the stop (status $status)"
done
finish
