#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# medians.sh - the medians of repeated runs of the WebSTONE-like experiment:
# reads run.sh's OUT/runs.csv (results.csv's columns and a final `round`)
# and prints results.csv on stdout: one row per (server, file, clients,
# keep_alive), in the order each first appears, each numeric column the
# median of that column over the runs that succeeded (a failed run has its
# numeric columns empty and counts for nothing; a key none of whose runs
# succeeded gets no row).  With an even number of runs the median is the
# mean of the two middle values, printed with as many decimals as it needs
# (one more than the values' when it ends in 5); with one run it is that
# run's value as written.  unfinished, unfinished_oldest_ms and errors are
# medians too, each of its own column: a row's errors need not come from
# the same run as its throughput, and a single bad run out of three does
# not show in them (runs.csv keeps every run).
#
#   tests/bench/webstone/medians.sh [--count] RUNS_CSV
#
# --count adds two columns, ok (the runs that succeeded) and runs (all
# runs), and keeps the keys with no run succeeded (numeric columns empty):
# run.sh's table of medians.
set -u
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../../lib.sh"
count=0
if [ "${1-}" = --count ]; then count=1; shift; fi
runs=${1-}
if [ -z "$runs" ] || [ $# -ne 1 ]; then
  echo "usage: medians.sh [--count] RUNS_CSV" >&2
  exit 2
fi
if [ ! -r "$runs" ]; then
  echo "medians.sh: cannot read '$runs'" >&2
  exit 2
fi
awk -F, -v count="$count" "$median_awk"'
NR == 1 {
  if ($NF != "round") { print "medians.sh: no round column in " FILENAME > "/dev/stderr"; bad = 1; exit 2 }
  header = $1
  for (i = 2; i < NF; i++) header = header "," $i
  ncol = NF - 1
  next
}
{
  key = $1 "," $2 "," $3 "," $4
  if (!(key in runs)) order[++keys] = key
  runs[key]++
  if ($5 == "") next                  # a failed run
  ok[key]++
  for (i = 5; i <= ncol; i++) vals[key, i] = vals[key, i] " " $i
}
END {
  if (bad) exit 2
  if (NR == 0) { print "medians.sh: " ARGV[1] " is empty" > "/dev/stderr"; exit 2 }
  print header (count ? ",ok,runs" : "")
  for (n = 1; n <= keys; n++) {
    key = order[n]
    if (!ok[key] && !count) continue
    row = key
    for (i = 5; i <= ncol; i++) row = row "," (ok[key] ? median(vals[key, i], 1) : "")
    print row (count ? "," (ok[key] + 0) "," runs[key] : "")
  }
}' "$runs"
