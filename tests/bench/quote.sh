#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# quote.sh - the stock quote server of examples/quote in every concurrency
# model, side by side (`make bench-quote`).  For each model and client
# count, one quote_server (--threads T) and one quote_client that sends
# for D seconds over C connections, one request outstanding on each,
# every answer checked.  Prints a table: requests/s, median and 99th
# percentile latency, how many connections got an answer while the client
# was sending, and the rate relative to the Leader/Followers model at the
# same client count.  With --repeat N every figure is the median of N
# runs; the runs go round all models in turn, so that a change in the
# machine's other load falls on every model alike.
#
#   quote.sh --builddir DIR --quotes FILE [--duration D] [--threads T]
#            [--clients "10 100 1000"] [--models "..."] [--repeat N]
#
# Bounded: each client runs D s plus at most 2 s of grace (and is killed
# after D + 30 s); a server that does not stop within 10 s of SIGINT is
# killed and marked.  A wrong answer is marked WRONG and makes the script
# exit 1; missing answers (connections a model never got to) are only
# reported, since that is what some models do under load.

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
builddir=. quotes='' duration=3 threads=4 clients="10 100 1000" repeat=1
models="iterative thread-per-request thread-per-connection handle-queue reactor lf hsha proactor"
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) builddir=$2 ;;
    --quotes) quotes=$2 ;;
    --duration) duration=$2 ;;
    --threads) threads=$2 ;;
    --clients) clients=$2 ;;
    --models) models=$2 ;;
    --repeat) repeat=$2 ;;
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
# 1,000 clients take 1,000 descriptors on each side.  (ulimit -n is not
# POSIX, but every shell this runs under has it.)
# shellcheck disable=SC3045
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
limit=''
command -v timeout >/dev/null 2>&1 && limit="timeout $((duration + 30))"

make_work bench-quote
results=$work/results
: >"$results"
wrong=0

field() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" "$work/client.out"; }

run=0
while [ $run -lt "$repeat" ]; do
  run=$((run + 1))
  for c in $clients; do
    for model in $models; do
      out=$work/server.out
      note=''
      if ! spawn "$out" "$out" "$server" --model "$model" --quotes "$quotes" \
        --port 0 --threads "$threads"; then
        note="server did not start"
        echo "$model $c - - - - $note" >>"$results"
        continue
      fi
      client_status=0
      $limit "$client" --port "$port" --quotes "$quotes" --connections "$c" \
        --duration "$duration" >"$work/client.out" 2>&1 || client_status=$?
      stop_pid "$pid" || note="${note}server did not stop; "
      rate=$(field rate) p50=$(field p50_us) p99=$(field p99_us)
      starved=$(field starved) refused=$(field refused) bad=$(field wrong)
      case $client_status in
        0 | 4) ;;
        124) note="${note}client killed after $((duration + 30)) s; " ;;
        *) note="${note}client status $client_status; " ;;
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
      echo "quote.sh: run $run, $model, $c clients: ${rate:-?} requests/s" >&2
    done
  done
done

printf '%-22s %7s %10s %8s %8s %10s %6s  %s\n' model clients "requests/s" \
  "p50 us" "p99 us" served "/lf" notes
# Median of each figure over the runs ("-" when a run has none); models in
# the order given, client counts as given.
awk -v models="$models" -v clients="$clients" "$median_awk"'
  {
    k = $1 " " $2
    for (f = 3; f <= 6; f++) if ($f != "-") fig[k, f] = fig[k, f] " " $f
    notes = $0
    for (f = 1; f <= 6; f++) sub(/^[^ ]* ?/, "", notes)
    if (notes != "") note[k] = note[k] notes
  }
  END {
    nm = split(models, m, " "); nc = split(clients, c, " ")
    for (j = 1; j <= nc; j++) lf[c[j]] = median(fig["lf " c[j], 3])
    for (i = 1; i <= nm; i++)
      for (j = 1; j <= nc; j++) {
        k = m[i] " " c[j]
        rate = median(fig[k, 3])
        ratio = "-"
        if (rate != "-" && lf[c[j]] != "-" && lf[c[j]] > 0)
          ratio = sprintf("%.2f", rate / lf[c[j]])
        served = median(fig[k, 6])
        printf "%-22s %7s %10s %8s %8s %10s %6s  %s\n", m[i], c[j], rate,
          median(fig[k, 4]), median(fig[k, 5]), served "/" c[j], ratio, note[k]
      }
  }' "$results"
exit $wrong
