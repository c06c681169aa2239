#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_webstone_tools.sh - a test of the WebSTONE-like experiment's
# report tools, without servers or measurements: compare.sh on a small
# hand-written results.csv (its best fixed strategy, Mbit/s and ratios per
# row, missing servers as '-', the summaries and the peer's peak per file)
# and with --runs (the rounds paired, the verdicts),
# medians.sh on a hand-written runs.csv (odd and even numbers of runs,
# failed runs left out, a key with no run succeeded), and bad usage of
# compare.sh, medians.sh and run.sh --repeat, which must exit 2.
#
# Automake runs tests from the build directory with $srcdir exported; when
# run by hand from anywhere, the default below finds the same files.

: "${srcdir:=$(dirname "$0")/..}"
ws=$srcdir/tests/bench/webstone
tmp=$(mktemp -d "${TMPDIR:-/tmp}/taxi-webstone-tools.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
failed=0
fail() {
  echo "bench_webstone_tools: $*"
  failed=1
}
# expect NAME FILE: FILE, its runs of blanks made one, must be stdin.
expect() {
  tr -s ' ' <"$2" >"$tmp/got"
  if ! diff "$tmp/want" "$tmp/got" >"$tmp/diff"; then
    fail "$1 differs (want <, got >):"
    cat "$tmp/diff"
  fi
}
header=server,file,clients,keep_alive,reqs_per_s,mbit_per_s,per_req_mbit_per_s,first_mean_ms,first_p99_ms,last_mean_ms,last_p99_ms,unfinished,unfinished_oldest_ms,errors

# compare.sh: at 500 B, 10 clients adaptive beats the best fixed strategy
# (thread-pool) and taxi nginx; at 50 nginx peaks above every jaws; at 200
# adaptive ties thread-pool and taxi-best is 0.95 of nginx.  The mix has
# neither adaptive nor nginx; lighttpd is not a jaws and counts for nothing.
cat >"$tmp/results.csv" <<CSV
$header
jaws:lf,500,10,0,1,100.0,1,1,1,1,1,0,0.0,0
jaws:thread-pool,500,10,0,1,120.0,1,1,1,1,1,0,0.0,0
jaws:adaptive,500,10,0,1,126.0,1,1,1,1,1,0,0.0,0
nginx,500,10,0,1,105.0,1,1,1,1,1,0,0.0,0
lighttpd,500,10,0,1,999.0,1,1,1,1,1,0,0.0,0
jaws:lf,500,50,0,1,130.0,1,1,1,1,1,0,0.0,0
jaws:thread-pool,500,50,0,1,110.0,1,1,1,1,1,0,0.0,0
jaws:adaptive,500,50,0,1,117.0,1,1,1,1,1,0,0.0,0
nginx,500,50,0,1,140.0,1,1,1,1,1,0,0.0,0
jaws:lf,500,200,0,1,90.0,1,1,1,1,1,0,0.0,0
jaws:thread-pool,500,200,0,1,95.0,1,1,1,1,1,0,0.0,0
jaws:adaptive,500,200,0,1,95.0,1,1,1,1,1,0,0.0,0
nginx,500,200,0,1,100.0,1,1,1,1,1,0,0.0,0
jaws:lf,mix,10,0,1,200.0,1,1,1,1,1,0,0.0,0
CSV
if ! bash "$ws/compare.sh" "$tmp/results.csv" >"$tmp/out" 2>"$tmp/err"; then
  fail "compare.sh failed: $(cat "$tmp/err")"
fi
cat >"$tmp/want" <<'OUT'
file clients best fixed Mbit/s adaptive adaptive/best nginx taxi-best/peer
500 10 jaws:thread-pool 120.0 126.0 1.05 105.0 1.20
500 50 jaws:lf 130.0 117.0 0.90 140.0 0.93
500 200 jaws:thread-pool 95.0 95.0 1.00 100.0 0.95
mix 10 jaws:lf 200.0 - - - -

adaptive/best: min 0.90, geometric mean 0.98, >= 0.95 in 2/3 rows, >= 1.0 in 2/3
taxi-best/peer: min 0.93, geometric mean 1.02, >= 0.95 in 2/3 rows, >= 1.0 in 1/3

at nginx's peak (the client count where its Mbit/s is highest):
500 clients 50: nginx 140.0, taxi-best 130.0, taxi-best/peer 0.93
mix clients -: nginx -, taxi-best -, taxi-best/peer -
OUT
expect "compare.sh's report" "$tmp/out"

# Another peer and another adaptive: lighttpd peaks at 10 clients, and
# with thread-pool taken as the adaptive one lf is the best fixed.
bash "$ws/compare.sh" "$tmp/results.csv" --peer lighttpd \
  --adaptive jaws:thread-pool >"$tmp/out" 2>"$tmp/err" ||
  fail "compare.sh --peer --adaptive failed: $(cat "$tmp/err")"
cat >"$tmp/want" <<'OUT'
500 10 jaws:adaptive 126.0 120.0 0.95 999.0 0.13
500 clients 10: lighttpd 999.0, taxi-best 126.0, taxi-best/peer 0.13
OUT
grep -e '^500 *10 ' -e '^500 *clients' "$tmp/out" >"$tmp/rows"
expect "compare.sh --peer lighttpd --adaptive jaws:thread-pool" "$tmp/rows"

# compare.sh --runs: the rounds paired.  500 B, 10 clients: adaptive
# behind thread-pool on the medians (105/110) but ahead in two rounds of
# three: level (p 7/8).  50 clients: behind in each of five rounds (p
# 1/32): behind.  200: ahead, one round to pair (thread-pool's second
# failed).  The mix: no adaptive.  Pooled: 3 of 9 rounds won, p 130/512.
cat >"$tmp/runs2.csv" <<CSV
$header,round
jaws:thread-pool,500,10,0,1,100.0,1,1,1,1,1,0,0.0,0,1
jaws:adaptive,500,10,0,1,105.0,1,1,1,1,1,0,0.0,0,1
jaws:thread-pool,500,10,0,1,110.0,1,1,1,1,1,0,0.0,0,2
jaws:adaptive,500,10,0,1,100.0,1,1,1,1,1,0,0.0,0,2
jaws:thread-pool,500,10,0,1,120.0,1,1,1,1,1,0,0.0,0,3
jaws:adaptive,500,10,0,1,130.0,1,1,1,1,1,0,0.0,0,3
jaws:thread-pool,500,50,0,1,100.0,1,1,1,1,1,0,0.0,0,1
jaws:lf,500,50,0,1,80.0,1,1,1,1,1,0,0.0,0,1
jaws:adaptive,500,50,0,1,90.0,1,1,1,1,1,0,0.0,0,1
jaws:thread-pool,500,50,0,1,100.0,1,1,1,1,1,0,0.0,0,2
jaws:adaptive,500,50,0,1,95.0,1,1,1,1,1,0,0.0,0,2
jaws:thread-pool,500,50,0,1,100.0,1,1,1,1,1,0,0.0,0,3
jaws:adaptive,500,50,0,1,99.0,1,1,1,1,1,0,0.0,0,3
jaws:thread-pool,500,50,0,1,100.0,1,1,1,1,1,0,0.0,0,4
jaws:adaptive,500,50,0,1,98.0,1,1,1,1,1,0,0.0,0,4
jaws:thread-pool,500,50,0,1,100.0,1,1,1,1,1,0,0.0,0,5
jaws:adaptive,500,50,0,1,97.0,1,1,1,1,1,0,0.0,0,5
jaws:thread-pool,500,200,0,1,100.0,1,1,1,1,1,0,0.0,0,1
jaws:adaptive,500,200,0,1,120.0,1,1,1,1,1,0,0.0,0,1
jaws:thread-pool,500,200,0,,,,,,,,,,,2
jaws:adaptive,500,200,0,1,110.0,1,1,1,1,1,0,0.0,0,2
jaws:lf,mix,10,0,1,200.0,1,1,1,1,1,0,0.0,0,1
CSV
bash "$ws/medians.sh" "$tmp/runs2.csv" >"$tmp/results2.csv" 2>"$tmp/err" ||
  fail "medians.sh failed: $(cat "$tmp/err")"
bash "$ws/compare.sh" "$tmp/results2.csv" --runs "$tmp/runs2.csv" \
  >"$tmp/out" 2>"$tmp/err" || fail "compare.sh --runs failed: $(cat "$tmp/err")"
cat >"$tmp/want" <<OUT
round by round ($tmp/runs2.csv): adaptive/best in each round, paired
file clients best fixed adaptive/best won spread p verdict
500 10 jaws:thread-pool 1.05 0.91 1.08 2/3 1.20 0.88 level
500 50 jaws:thread-pool 0.90 0.95 0.99 0.98 0.97 0/5 1.00 0.03 behind
500 200 jaws:thread-pool 1.20 1/1 1.00 1.00 ahead
mix 10 jaws:lf - - 1.00 - -

verdicts: ahead 1, level 1, behind 1, no rounds to pair 1 (of 4 rows)
every row's rounds pooled: adaptive won 3/9, p 0.25
OUT
sed -n '/^round by round/,$p' "$tmp/out" >"$tmp/rows"
expect "compare.sh --runs" "$tmp/rows"

# medians.sh: three runs (the middle one of each column, as written), two
# (the mean of both, a decimal more where it ends in 5), a failed run left
# out, and a key whose only run failed: no row, or one with --count.
cat >"$tmp/runs.csv" <<CSV
$header,round
a,mix,10,0,100.0,12.3,1.20,0.5000,1.0000,2.0000,3.0000,1,5.0,0,1
a,mix,10,0,300.0,12.4,1.30,0.7000,1.0000,2.0000,3.0000,2,6.0,3,2
b,mix,10,0,,,,,,,,,,,1
b,mix,10,0,50.5,9.0,1.00,0.1000,0.2000,0.3000,0.4000,0,0.0,0,2
c,mix,10,0,,,,,,,,,,,1
a,mix,100,0,1.0,10.0,1.00,1.0000,1.0000,1.0000,1.0000,4,1.0,1,1
a,mix,100,0,3.0,2.0,3.00,3.0000,1.0000,1.0000,1.0000,9,1.0,0,2
a,mix,100,0,2.0,30.0,2.00,2.0000,1.0000,1.0000,1.0000,1,1.0,7,3
CSV
cat >"$tmp/want" <<CSV
$header
a,mix,10,0,200.0,12.35,1.25,0.6000,1.0000,2.0000,3.0000,1.5,5.5,1.5
b,mix,10,0,50.5,9.0,1.00,0.1000,0.2000,0.3000,0.4000,0,0.0,0
a,mix,100,0,2.0,10.0,2.00,2.0000,1.0000,1.0000,1.0000,4,1.0,1
CSV
bash "$ws/medians.sh" "$tmp/runs.csv" >"$tmp/out" 2>"$tmp/err" ||
  fail "medians.sh failed: $(cat "$tmp/err")"
expect "medians.sh's results.csv" "$tmp/out"
bash "$ws/medians.sh" --count "$tmp/runs.csv" >"$tmp/out" 2>"$tmp/err" ||
  fail "medians.sh --count failed: $(cat "$tmp/err")"
grep '^c,' "$tmp/out" >"$tmp/rows"
echo "c,mix,10,0,,,,,,,,,,,0,1" >"$tmp/want"
expect "medians.sh --count's failed key" "$tmp/rows"
# One run per key: results.csv is runs.csv without its round column.
grep -v -e '^b,' -e '^c,' -e ',[23]$' "$tmp/runs.csv" >"$tmp/one.csv"
cut -d, -f1-14 "$tmp/one.csv" >"$tmp/want"
bash "$ws/medians.sh" "$tmp/one.csv" >"$tmp/out" 2>&1
expect "medians.sh of single runs" "$tmp/out"

# Bad usage exits 2 with a message.
# usage NAME COMMAND...: COMMAND must exit 2 and say something on stderr.
usage() {
  name=$1
  shift
  "$@" >/dev/null 2>"$tmp/err"
  status=$?
  if [ "$status" -ne 2 ]; then
    fail "$name exited $status, not 2"
  elif [ ! -s "$tmp/err" ]; then
    fail "$name said nothing"
  fi
}
usage "compare.sh without a CSV" bash "$ws/compare.sh" "$tmp/nowhere.csv"
usage "compare.sh with no argument" bash "$ws/compare.sh"
usage "compare.sh --peer without a name" bash "$ws/compare.sh" "$tmp/results.csv" --peer
echo "no,columns" >"$tmp/bad.csv"
usage "compare.sh on a CSV without its columns" bash "$ws/compare.sh" "$tmp/bad.csv"
usage "compare.sh --runs without a file" bash "$ws/compare.sh" "$tmp/results.csv" --runs
usage "compare.sh --runs of a missing file" bash "$ws/compare.sh" "$tmp/results.csv" --runs "$tmp/nowhere.csv"
usage "compare.sh --runs of a CSV without rounds" bash "$ws/compare.sh" "$tmp/results.csv" --runs "$tmp/results.csv"
usage "medians.sh without a CSV" bash "$ws/medians.sh" "$tmp/nowhere.csv"
usage "medians.sh on results.csv (no round)" bash "$ws/medians.sh" "$tmp/results.csv"
for n in 0 x -1 ''; do
  usage "run.sh --repeat '$n'" bash "$ws/run.sh" --builddir "$tmp" --repeat "$n"
done
[ "$failed" -eq 0 ] && echo "bench_webstone_tools: compare.sh, medians.sh and bad usage as expected"
exit "$failed"
