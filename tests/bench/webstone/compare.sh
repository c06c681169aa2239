#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# compare.sh - taxi's web server against its peer in a results.csv of the
# WebSTONE-like experiment (run.sh's, or the medians of its --repeat runs).
#
#   tests/bench/webstone/compare.sh RESULTS_CSV [--peer NAME]
#       [--adaptive NAME] [--runs RUNS_CSV]
#
# For each file choice and client count, in the order they first appear in
# the CSV, a row: the best fixed strategy (the server named jaws:* other
# than the adaptive one, default jaws:adaptive, with the highest Mbit/s)
# and its Mbit/s; adaptive's Mbit/s and adaptive/best; the peer's (default
# nginx) Mbit/s and taxi-best/peer, taxi-best being the highest Mbit/s of
# all jaws:* servers, adaptive included.  Then, per ratio, a summary over
# the rows that have it: the minimum, the geometric mean and how many rows
# are >= 0.95 and >= 1.0.  Then, for each file choice, the peer's peak: the
# client count at which the peer's Mbit/s is highest, and taxi-best/peer
# there.  A server or row missing shows as '-'.  A file choice measured
# with keep-alive is shown as FILE+ka.
#
# --runs RUNS_CSV (run.sh --repeat's runs.csv, whose medians RESULTS_CSV
# holds) adds the rounds, paired: with --interleave, round k of every
# server ran in the same few minutes, so adaptive/best of each round is
# measured under the same load of the machine.  For each row, those
# ratios in round order, how many rounds adaptive won (>= 1.0), the best
# fixed strategy's own spread over its rounds (its highest Mbit/s over its
# lowest), p: the chance of adaptive winning that few rounds or fewer if
# it and the best were level (each round a coin toss: the binomial sign
# test), and a verdict: "ahead" (adaptive/best of the medians >= 1.0),
# "level" (behind on the medians, but p >= 0.05: the rounds do not tell
# the two apart), "behind" (p < 0.05: it lost more rounds than chance
# would; with fewer than five rounds no row can be: losing all four has
# p 1/16).  Then how many rows have each verdict, and the rounds of every
# row pooled (won of paired, p): a small gap on every row, each within the
# noise of its own rounds, shows there.  Exits 2 on bad usage or a CSV it
# cannot read.
set -u
usage() { sed -n '/^#   tests/,/^#       \[--adaptive/p' "$0" | sed 's/^# //'; }
csv='' peer=nginx adaptive=jaws:adaptive runs=''
while [ $# -gt 0 ]; do
  case $1 in
  --peer | --adaptive)
    if [ $# -lt 2 ] || [ -z "$2" ]; then
      echo "compare.sh: $1 wants a server name" >&2; exit 2
    fi
    if [ "$1" = --peer ]; then peer=$2; else adaptive=$2; fi
    shift 2 ;;
  --runs)
    if [ $# -lt 2 ] || [ ! -f "$2" ] || [ ! -r "$2" ]; then
      echo "compare.sh: --runs wants a runs.csv it can read" >&2; exit 2
    fi
    runs=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  -*) echo "compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  *)
    if [ -n "$csv" ]; then
      echo "compare.sh: one CSV only ('$csv', '$1')" >&2; exit 2
    fi
    csv=$1; shift ;;
  esac
done
if [ -z "$csv" ]; then usage >&2; exit 2; fi
if [ ! -f "$csv" ] || [ ! -r "$csv" ]; then
  echo "compare.sh: cannot read '$csv'" >&2
  exit 2
fi
awk -F, -v peer="$peer" -v adaptive="$adaptive" -v runs="$runs" '
function r2(x) { return sprintf("%.2f", x) }
function orelse(v) { return v == "" ? "-" : v }
# ratio(A, B): A/B, or "" when either is missing or B is 0 (the summaries
# count the ratios unrounded; the rows show them to two decimals).
function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "" : a / b }
function shown(r) { return r == "" ? "-" : r2(r) }
# note(NAME, R): R counted in the summary of the ratio NAME.
function note(name, r) {
  if (r == "") return
  n[name]++
  if (!(name in lo) || r + 0 < lo[name]) lo[name] = r + 0
  if (r + 0 == 0) zero[name] = 1; else logs[name] += log(r)
  if (r + 0 >= 0.95) ge95[name]++
  if (r + 0 >= 1.0) ge1[name]++
}
function summary(name) {
  if (!n[name]) { printf "%-16s no rows\n", name ":"; return }
  printf "%-16s min %s, geometric mean %s, >= 0.95 in %d/%d rows, >= 1.0 in %d/%d\n",
    name ":", r2(lo[name]), r2(zero[name] ? 0 : exp(logs[name] / n[name])),
    ge95[name], n[name], ge1[name], n[name]
}
# The runs (with --runs) come first, then the medians; each has a header.
FNR == 1 {
  fileno++
  for (i in col) delete col[i]
  for (i = 1; i <= NF; i++) col[$i] = i
  if (!("server" in col) || !("file" in col) || !("clients" in col) || !("mbit_per_s" in col) ||
      (runs != "" && fileno == 1 && !("round" in col))) {
    print "compare.sh: " FILENAME " has no server, file, clients" (runs != "" && fileno == 1 ? ", round" : "") \
      " and mbit_per_s columns" > "/dev/stderr"
    bad = 1; exit 2
  }
  next
}
{
  f = $col["file"]
  if (("keep_alive" in col) && $col["keep_alive"] != "" && $col["keep_alive"] != 0) f = f "+ka"
  c = $col["clients"]; s = $col["server"]; m = $col["mbit_per_s"]
  if (m == "") next
  key = f SUBSEP c
  if (runs != "" && fileno == 1) {
    r = $col["round"]
    run[s, key, r] = m
    if (!((key, r) in rseen)) { rseen[key, r] = 1; rounds[key] = rounds[key] " " r }
    next
  }
  if (!(key in seen)) { seen[key] = 1; order[++keys] = key }
  if (!(f in fseen)) { fseen[f] = 1; forder[++nf] = f }
  if (s == peer) { peermb[key] = m; haspeer[key] = 1 }
  else if (s == adaptive) adapt[key] = m
  if (s ~ /^jaws:/) {
    if (s != adaptive && (!(key in best) || m + 0 > best[key] + 0)) { best[key] = m; bestname[key] = s }
    if (!(key in taxi) || m + 0 > taxi[key] + 0) taxi[key] = m
  }
}
END {
  if (bad) exit 2
  if (!keys) { print "compare.sh: no rows in " FILENAME > "/dev/stderr"; exit 0 }
  fmt = "%-12s %7s  %-28s %9s %9s %13s %9s %15s\n"
  printf fmt, "file", "clients", "best fixed", "Mbit/s", "adaptive", "adaptive/best", peer, "taxi-best/peer"
  for (k = 1; k <= keys; k++) {
    key = order[k]; split(key, p, SUBSEP)
    ab = ratio(adapt[key], best[key]); tp = ratio(taxi[key], peermb[key])
    note("adaptive/best", ab); note("taxi-best/peer", tp)
    printf fmt, p[1], p[2], orelse(bestname[key]), orelse(best[key]), orelse(adapt[key]),
      shown(ab), orelse(peermb[key]), shown(tp)
  }
  print ""
  summary("adaptive/best")
  summary("taxi-best/peer")
  print ""
  print "at " peer "'"'"'s peak (the client count where its Mbit/s is highest):"
  for (i = 1; i <= nf; i++) {
    f = forder[i]; pk = ""
    for (k = 1; k <= keys; k++) {
      key = order[k]; split(key, p, SUBSEP)
      if (p[1] != f || !(key in haspeer)) continue
      if (pk == "" || peermb[key] + 0 > peermb[pk] + 0) pk = key
    }
    if (pk == "") { printf "%-12s clients -: %s -, taxi-best -, taxi-best/peer -\n", f, peer; continue }
    split(pk, p, SUBSEP)
    printf "%-12s clients %s: %s %s, taxi-best %s, taxi-best/peer %s\n", f, p[2], peer,
      peermb[pk], orelse(taxi[pk]), shown(ratio(taxi[pk], peermb[pk]))
  }
  if (runs != "") paired()
}
# sign_p(K, N): the chance of K or fewer heads in N tosses of a fair coin.
# Each term in logarithms, so that 2^-N does not underflow for many rounds.
function sign_p(k, n,   i, lc, sum) {
  lc = 0; sum = 0
  for (i = 0; i <= k; i++) {
    sum += exp(lc - n * log(2))
    lc += log(n - i) - log(i + 1)
  }
  return sum > 1 ? 1 : sum
}
# The rounds of each row side by side (see --runs above).
function paired(   k, key, p, nr, rs, i, a, b, won, both, list, hi, lo2, ab, v, fmt2, pr, allwon, all) {
  print ""
  print "round by round (" runs "): adaptive/best in each round, paired"
  fmt2 = "%-12s %7s  %-28s %-22s %5s %7s %5s  %s\n"
  printf fmt2, "file", "clients", "best fixed", "adaptive/best", "won", "spread", "p", "verdict"
  for (k = 1; k <= keys; k++) {
    key = order[k]; split(key, p, SUBSEP)
    nr = split(rounds[key], rs, " ")
    won = both = 0; list = ""; hi = lo2 = ""
    for (i = 1; i <= nr; i++) {
      b = (bestname[key], key, rs[i]) in run ? run[bestname[key], key, rs[i]] : ""
      a = (adaptive, key, rs[i]) in run ? run[adaptive, key, rs[i]] : ""
      if (b != "") {
        if (hi == "" || b + 0 > hi + 0) hi = b
        if (lo2 == "" || b + 0 < lo2 + 0) lo2 = b
      }
      if (ratio(a, b) == "") continue
      both++
      if (ratio(a, b) >= 1.0) won++
      list = list (list == "" ? "" : " ") r2(ratio(a, b))
    }
    ab = ratio(adapt[key], best[key])
    pr = both ? sign_p(won, both) : ""
    allwon += won; all += both
    if (ab == "" || !both) v = "-"
    else if (ab >= 1.0) v = "ahead"
    else if (pr >= 0.05) v = "level"
    else v = "behind"
    verdicts[v]++
    printf fmt2, p[1], p[2], orelse(bestname[key]), list == "" ? "-" : list,
      both ? won "/" both : "-", shown(ratio(hi, lo2)), shown(pr), v
  }
  print ""
  printf "verdicts: ahead %d, level %d, behind %d", verdicts["ahead"], verdicts["level"], verdicts["behind"]
  if (verdicts["-"]) printf ", no rounds to pair %d", verdicts["-"]
  printf " (of %d rows)\n", keys
  if (all) printf "every row'"'"'s rounds pooled: adaptive won %d/%d, p %s\n", allwon, all, shown(sign_p(allwon, all))
}' ${runs:+"$runs"} "$csv"
