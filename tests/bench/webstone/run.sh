#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2059 # the printf formats are our own
# shellcheck disable=SC2154 # ws_port is set by servers.sh
# run.sh - the WebSTONE-like experiment against stock web servers: each
# server (tests/bench/webstone/servers.sh) serves a fresh docroot and
# webstone drives it with each number of clients and each file choice in
# turn, each --repeat times; a table on stdout, every run in OUT/runs.csv
# and the median of each server's runs in OUT/results.csv.
#
#   tests/bench/webstone/run.sh [--builddir DIR] [--servers LIST]
#       [--clients LIST] [--files LIST] [--warmup S] [--duration S]
#       [--threads T] [--keep-alive] [--interleave] [--repeat N] [--out DIR]
#       [--tls [--tls-resume]]
#
# LIST is space-separated.  Servers: nginx lighttpd python (the default:
# all three; one not installed is skipped with a message; nginx and
# lighttpd with one worker), nginx:N (nginx with N worker processes,
# under its master: nginx:2), and taxi's web server in a strategy,
# jaws:STRATEGY[:BACKEND] (jaws:lf, jaws:proactive:uring, jaws:adaptive;
# threads from WS_JAWS_THREADS, default 2), or jaws:default (jaws as
# `jaws --root DIR` starts it: no --strategy, --threads or --backend).
# versus-nginx.sh runs jaws:default against nginx and nginx:2.  Clients:
# default "10 100 1000".  Files: "mix" (the paper's mix, the default) or a
# size of /size/BYTES.bin: 500 5000 50000 500000 5000000, the paper's
# Figures 6-10.  Errors are counted, not fatal (--allow-errors): the table
# shows them.
#
# Columns: req/s; Mbit/s, the bits received per second (headers and
# bodies) over the measurement; per-req Mbit/s, the average of each
# request's own rate; first and last byte latency (mean and p99, ms) of the
# completed requests; unfinished, the requests in flight at the stop and
# the oldest one's age (ms), where a server that starves some clients
# shows; errors.  --repeat N (default 1) measures each server, file and
# client count N times: OUT/runs.csv holds every run (results.csv's
# columns and its round; a failed run with the numbers empty) and
# OUT/results.csv, with the columns it has without --repeat, the median of
# each column over the runs that succeeded (medians.sh; errors and
# unfinished too), which the charts and compare.sh read; the table shows
# each run with its round and ends with the medians.  With --repeat 1
# results.csv is the runs themselves (a server, file and client count
# named twice in the lists is one row, the median of its runs).
# --interleave goes round the servers for each file and client count (a
# server started afresh each time) instead of measuring one server after
# the other, round by round (for each file and client
# count, round 1 over every server, then round 2, ...; without it a server
# is measured N times in a row): on a machine shared with other work, a
# change of load then does not favour the servers measured at a quiet
# moment.  Round k starts with the k-th server of the list (round 1 with
# the first), so that the order of the servers in a round favours none.
# --tls: HTTPS, the servers on a certificate for localhost made for the run
# with openssl (or the PEM files in WS_TLS_CERT and WS_TLS_KEY), webstone
# --tls (its OpenSSL client: a full handshake per connection, or with
# --tls-resume a resumed one); servers.sh says which servers serve it
# (nginx, jaws).  The table's first line says HTTPS; the columns are the
# same (with a connection per request, req/s is the handshake rate).
# With gnuplot, OUT/*.svg: throughput and latency against the number of
# clients, one chart per file choice (charts.sh).  With
# WS_LOG_DIR set, each server's own output is kept there, a file per run
# (with --interleave; -rROUND with --repeat) or per server (jaws adaptive
# logs its decisions).
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=.
servers="nginx lighttpd python"
clients="10 100 1000"
files=mix
warmup=1
duration=5
threads=1
keep=()
tls=()
interleave=''
repeat=1
out=''
usage() { sed -n '/^#   tests/,/^#       \[--threads/p' "$0" | sed 's/^# //'; }
while [ $# -gt 0 ]; do
  case $1 in
  --builddir) builddir=$2; shift 2 ;;
  --servers) servers=$2; shift 2 ;;
  --clients) clients=$2; shift 2 ;;
  --files) files=$2; shift 2 ;;
  --warmup) warmup=$2; shift 2 ;;
  --duration) duration=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --keep-alive) keep=(--keep-alive); shift ;;
  --tls) [ ${#tls[@]} -gt 0 ] || tls=(--tls); shift ;;
  --tls-resume) tls=(--tls-resume); shift ;;
  --interleave) interleave=1; shift ;;
  --repeat) repeat=${2-}; shift $(($# > 1 ? 2 : 1)) ;;
  --out) out=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case $repeat in
'' | *[!0-9]* | 0*)
  echo "run.sh: --repeat wants a number of runs, 1 or more, not '$repeat'" >&2
  exit 2 ;;
esac
webstone=$builddir/tests/bench/webstone/webstone
# shellcheck disable=SC2034 # read by servers.sh
ws_jaws=$builddir/examples/jaws/jaws
if [ ! -x "$webstone" ]; then
  echo "run.sh: $webstone not built (make it in $builddir)" >&2
  exit 1
fi
[ -n "$out" ] || out=$builddir/tests/bench/webstone-results
mkdir -p "$out" || exit 1
# shellcheck source=tests/lib.sh
. "$here/../../lib.sh"
make_work webstone
# shellcheck source=tests/bench/webstone/servers.sh disable=SC1091
. "$here/servers.sh"
chmod 755 "$work" # the servers' workers may run as another user
"$webstone" --make-docroot "$work/docroot" >/dev/null || exit 1
if [ ${#tls[@]} -gt 0 ] && [ -z "${WS_TLS_CERT:-}" ]; then
  # A certificate for the run (an RSA 2048 key, as most sites still have).
  if ! openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
    -keyout "$work/tls.key" -out "$work/tls.pem" -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1; then
    echo "run.sh: --tls: openssl cannot make a certificate" >&2
    exit 1
  fi
  chmod 644 "$work/tls.key" # nginx's workers read it as another user
  WS_TLS_CERT=$work/tls.pem WS_TLS_KEY=$work/tls.key
fi
[ ${#tls[@]} -eq 0 ] || export WS_TLS_CERT WS_TLS_KEY

csv=$out/results.csv
runs_csv=$out/runs.csv
columns=server,file,clients,keep_alive,reqs_per_s,mbit_per_s,per_req_mbit_per_s,first_mean_ms,first_p99_ms,last_mean_ms,last_p99_ms,unfinished,unfinished_oldest_ms,errors
echo "$columns" >"$csv"
echo "$columns,round" >"$runs_csv"
[ ${#tls[@]} -eq 0 ] || echo "HTTPS (webstone ${tls[0]})"
fmt='%-9s %-8s %6s %9s %9s %8s %8s %8s %8s %8s %11s %6s\n'
heads=(server file clients req/s Mbit/s per-req first first-p99 last last-p99 unfinished errors)
# With --repeat, each row of the table starts with its round.
if [ "$repeat" -gt 1 ]; then
  printf "%5s $fmt" round "${heads[@]}"
else
  printf "$fmt" "${heads[@]}"
fi
# row ROUND FIELDS...: a row of the table.
row() {
  if [ "$repeat" -gt 1 ]; then printf "%5s $fmt" "$@"; else shift; printf "$fmt" "$@"; fi
}
# A field of webstone's JSON line.
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" "$work/run.json"; }
# Progress on stderr: which run of how many.
total=0
for server in $servers; do for file in $files; do for c in $clients; do
  total=$((total + repeat))
done; done; done
run=0
# measure SERVER FILE CLIENTS ROUND: one webstone run against the server
# started, a row of the table and of runs.csv; results.csv follows.
measure() {
  local server=$1 file=$2 c=$3 round=$4 choice=(--mix) status row of=''
  [ "$file" = mix ] || choice=(--size "$file")
  run=$((run + 1))
  [ "$repeat" -eq 1 ] || of=", round $round/$repeat"
  echo "run.sh: [$run/$total] $server, $file, $c clients$of" >&2
  "$webstone" --port "$ws_port" --docroot "$work/docroot" --clients "$c" \
    --threads "$threads" --warmup "$warmup" --duration "$duration" \
    "${choice[@]}" "${keep[@]}" "${tls[@]}" --allow-errors --json \
    >"$work/run.json" 2>"$work/run.err"
  status=$?
  if [ "$status" -ne 0 ] || [ ! -s "$work/run.json" ]; then
    row "$round" "$server" "$file" "$c" failed '' '' '' '' '' '' '' ''
    sed 's/^/  /' "$work/run.err" | tail -n 5 >&2
    echo "$server,$file,$c,${#keep[@]},,,,,,,,,,,$round" >>"$runs_csv"
    return
  fi
  row=("$(field reqs_per_s)"
    "$(awk -v b="$(field bits_per_s)" 'BEGIN { printf "%.1f", b / 1e6 }')"
    "$(awk -v b="$(field per_request_bits_per_s)" 'BEGIN { printf "%.2f", b / 1e6 }')"
    "$(field first_byte_mean_ms)" "$(field first_byte_p99_ms)"
    "$(field last_byte_mean_ms)" "$(field last_byte_p99_ms)"
    "$(field unfinished)" "$(field unfinished_oldest_ms)" "$(field errors)")
  row "$round" "$server" "$file" "$c" "${row[0]}" "${row[1]}" "${row[2]}" \
    "${row[3]}" "${row[4]}" "${row[5]}" "${row[6]}" \
    "${row[7]}/${row[8]}" "${row[9]}"
  (IFS=,; echo "$server,$file,$c,${#keep[@]},${row[*]},$round") >>"$runs_csv"
  # After every run, so that an experiment cut short keeps its medians.
  bash "$here/medians.sh" "$runs_csv" >"$csv.new" && mv "$csv.new" "$csv"
}
# keep_log SERVER FILE CLIENTS [ROUND]: with WS_LOG_DIR set, the server's
# own output of that run (jaws adaptive's decisions) is kept there.
keep_log() {
  local name=${1//[:\/]/_}-$2-$3
  [ -n "${WS_LOG_DIR:-}" ] || return 0
  [ "$repeat" -eq 1 ] || [ -z "${4-}" ] || name=$name-r$4
  mkdir -p "$WS_LOG_DIR" &&
    cp "$work/$1/server.log" "$WS_LOG_DIR/$name.log" 2>/dev/null
  return 0
}
# start SERVER: 0 with it listening, or 1 after saying why it is skipped.
start() {
  ws_server_start "$1" "$work/docroot" "$work/$1" 2>"$work/start.log" && return 0
  echo "run.sh: $1 skipped: $(head -n 1 "$work/start.log")" >&2
  return 1
}
if [ -n "$interleave" ]; then
  # Each file and client count goes round every server (each started
  # afresh), so that a change in the machine's load over the experiment
  # falls on all servers alike rather than on those measured last; each
  # round starts one server further along the list, so that none is
  # always measured first (the cyclic order stays: a server still follows
  # the same one, except when it starts the round).
  read -r -a ring <<<"$servers"
  for file in $files; do
    for c in $clients; do
      for ((round = 1; round <= repeat; round++)); do
        for ((i = 0; i < ${#ring[@]}; i++)); do
          server=${ring[(i + round - 1) % ${#ring[@]}]}
          if start "$server"; then
            measure "$server" "$file" "$c" "$round"
            ws_server_stop
            keep_log "$server" "$file" "$c" "$round"
          else
            run=$((run + 1))
          fi
        done
      done
    done
  done
else
  for server in $servers; do
    if ! start "$server"; then
      for file in $files; do for c in $clients; do run=$((run + repeat)); done; done
      continue
    fi
    for file in $files; do
      for c in $clients; do
        for ((round = 1; round <= repeat; round++)); do
          measure "$server" "$file" "$c" "$round"
        done
      done
    done
    ws_server_stop
    keep_log "$server" all all
  done
fi
if [ "$repeat" -gt 1 ]; then
  # The table of medians, its first column the runs that succeeded.
  echo
  echo "medians of $repeat rounds (every run in $runs_csv):"
  printf "%5s $fmt" ok "${heads[@]}"
  bash "$here/medians.sh" --count "$runs_csv" | tail -n +2 |
    while IFS=, read -r -a m; do
      if [ "${m[14]}" -eq 0 ]; then
        printf "%5s $fmt" "0/${m[15]}" "${m[0]}" "${m[1]}" "${m[2]}" failed '' '' '' '' '' '' '' ''
      else
        printf "%5s $fmt" "${m[14]}/${m[15]}" "${m[0]}" "${m[1]}" "${m[2]}" \
          "${m[4]}" "${m[5]}" "${m[6]}" "${m[7]}" "${m[8]}" "${m[9]}" \
          "${m[10]}" "${m[11]}/${m[12]}" "${m[13]}"
      fi
    done
  echo "run.sh: every run in $runs_csv, their medians in $csv" >&2
else
  echo "run.sh: every run in $csv (and $runs_csv)" >&2
fi
bash "$here/charts.sh" "$csv" "$out"
