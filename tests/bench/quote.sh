#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# quote.sh - the stock quote server of examples/quote in every concurrency
# model, side by side (`make bench-quote`).  For each model and client
# count, one quote_server (--threads T) and one quote_client that sends
# for D seconds over C connections, one request outstanding on each,
# every answer checked.  Prints a table: requests/s, median and 99th
# percentile latency, how many connections got any answer at all, and the
# rate relative to the Leader/Followers model at the same client count.
#
#   quote.sh --builddir DIR --quotes FILE [--duration D] [--threads T]
#            [--clients "10 100 1000"] [--models "..."]
#
# Bounded: each client runs D s plus at most 2 s of grace (and is killed
# after D + 30 s); a server that does not stop within 10 s of SIGINT is
# killed and marked.  A wrong answer is marked WRONG and makes the script
# exit 1; missing answers (connections a model never got to) are only
# reported, since that is what some models do under load.

builddir=. quotes='' duration=3 threads=4 clients="10 100 1000"
models="iterative thread-per-request thread-per-connection handle-queue reactor lf hsha proactor"
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) builddir=$2 ;;
    --quotes) quotes=$2 ;;
    --duration) duration=$2 ;;
    --threads) threads=$2 ;;
    --clients) clients=$2 ;;
    --models) models=$2 ;;
    *)
      echo "quote.sh: unknown argument '$1'" >&2
      exit 2
      ;;
  esac
  shift 2 || {
    echo "quote.sh: $1 needs a value" >&2
    exit 2
  }
done
server=$builddir/examples/quote/quote_server
client=$builddir/examples/quote/quote_client
for p in "$server" "$client"; do
  [ -x "$p" ] || {
    echo "quote.sh: $p is not built" >&2
    exit 2
  }
done
[ -r "$quotes" ] || {
  echo "quote.sh: --quotes FILE is required" >&2
  exit 2
}
# 1,000 clients take 1,000 descriptors on each side.
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
limit=''
command -v timeout >/dev/null 2>&1 && limit="timeout $((duration + 30))"

work=$(mktemp -d "${TMPDIR:-/tmp}/taxi-bench-quote.XXXXXX") || exit 1
pid=''
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
results=$work/results
: >"$results"
wrong=0

field() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" "$work/client.out"; }

for model in $models; do
  for c in $clients; do
    out=$work/server.out
    : >"$out" # before the server starts: its output is what the loop reads
    "$server" --model "$model" --quotes "$quotes" --port 0 \
      --threads "$threads" >"$out" 2>&1 &
    pid=$!
    port='' i=0
    while [ $i -lt 100 ] && [ -z "$port" ]; do
      port=$(sed -n 's/.* listening on .*:\([0-9][0-9]*\)$/\1/p' "$out")
      [ -z "$port" ] && sleep 0.1
      i=$((i + 1))
    done
    note=''
    if [ -z "$port" ]; then
      note="server did not start"
      echo "$model $c - - - - $note" >>"$results"
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      pid=''
      continue
    fi
    status=0
    $limit "$client" --port "$port" --quotes "$quotes" --connections "$c" \
      --duration "$duration" >"$work/client.out" 2>&1 || status=$?
    kill -INT "$pid" 2>/dev/null
    i=0
    while [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
      sleep 0.1
      i=$((i + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null
      note="${note}server did not stop; "
    fi
    wait "$pid" 2>/dev/null
    pid=''
    rate=$(field rate) p50=$(field p50_us) p99=$(field p99_us)
    starved=$(field starved) refused=$(field refused) bad=$(field wrong)
    case $status in
      0 | 4) ;;
      124) note="${note}client killed after $((duration + 30)) s; " ;;
      *) note="${note}client status $status; " ;;
    esac
    if [ -n "$bad" ] && [ "$bad" != 0 ]; then
      note="${note}WRONG answers: $bad; "
      wrong=1
    fi
    [ -n "$refused" ] && [ "$refused" != 0 ] &&
      note="${note}$refused connections refused; "
    grep -q "connections refused" "$out" &&
      note="${note}server: $(sed -n 's/.*: \([0-9]* connections refused\)/\1/p' "$out"); "
    served=''
    [ -n "$starved" ] && served=$((c - starved))
    echo "$model $c ${rate:--} ${p50:--} ${p99:--} ${served:--} $note" >>"$results"
    echo "quote.sh: $model, $c clients: ${rate:-?} requests/s" >&2
  done
done

printf '%-22s %7s %10s %8s %8s %10s %6s  %s\n' model clients "requests/s" \
  "p50 us" "p99 us" served "/lf" notes
awk -v q="'" '
  { line[NR] = $0; if ($1 == "lf") lf[$2] = $3 }
  END {
    for (n = 1; n <= NR; n++) {
      split(line[n], f, " ")
      notes = line[n]
      for (k = 1; k <= 6; k++) sub(/^[^ ]* ?/, "", notes)
      ratio = "-"
      if (f[3] != "-" && lf[f[2]] > 0) ratio = sprintf("%.2f", f[3] / lf[f[2]])
      printf "%-22s %7s %10s %8s %8s %10s %6s  %s\n", f[1], f[2], f[3], f[4],
        f[5], f[6] "/" f[2], ratio, notes
    }
  }' "$results"
exit $wrong
