#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# charts.sh - the charts of the WebSTONE-like experiment, like the paper's
# figures: for each file choice of CSV (run.sh's results.csv), throughput
# (Mbit/s received) and mean latency to the last byte against the number of
# clients, a line per server, as OUTDIR/throughput-FILE.svg and
# OUTDIR/latency-FILE.svg.
#
#   tests/bench/webstone/charts.sh CSV[=LABEL]... OUTDIR
#
# Several CSVs share the charts: those of a plain run and of an HTTPS run
# (run.sh --tls), say, with LABEL added to the names of a CSV's servers
# ("results.csv=HTTPS": "nginx/HTTPS"; a name is one word to gnuplot).
# Needs gnuplot (Debian: gnuplot-nox); without it says so and does
# nothing.
set -u
usage='usage: charts.sh CSV[=LABEL]... OUTDIR'
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
out=${!#}
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "charts.sh: gnuplot not found (Debian: gnuplot-nox): no charts" >&2
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/taxi-charts.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# One CSV of them all: the first one's header, each one's rows with its
# label after the server's name.
csv=$work/all.csv
first=1
for arg in "${@:1:$#-1}"; do
  file=${arg%%=*} label=''
  [ "$file" = "$arg" ] || label=${arg#*=}
  [ -r "$file" ] || { echo "charts.sh: cannot read $file" >&2; exit 1; }
  awk -F, -v OFS=, -v label="$label" -v first=$first '
    NR == 1 { if (first) print; next }
    { if (label != "") $1 = $1 "/" label; print }' "$file" >>"$csv"
  first=0
done

# The columns of results.csv this reads.
col_server=1 col_file=2 col_clients=3 col_mbit=6 col_last=10
files=$(awk -F, -v c=$col_file 'NR > 1 { print $c }' "$csv" | awk '!seen[$0]++')
servers=$(awk -F, -v c=$col_server 'NR > 1 { print $c }' "$csv" | awk '!seen[$0]++')
clients=$(awk -F, -v c=$col_clients 'NR > 1 { print $c }' "$csv" | sort -n -u)
[ -n "$files" ] || { echo "charts.sh: no runs in $csv" >&2; exit 0; }
mapfile -t server_list <<<"$servers"
# taxi's strategies solid, the stock servers dashed.
colours=('#000000' '#e41a1c' '#377eb8' '#4daf4a' '#984ea3' '#ff7f00'
  '#a65628' '#f781bf' '#17becf' '#999999' '#bcbd22' '#1f3f7f')
plot=''
for i in "${!server_list[@]}"; do
  case ${server_list[i]} in jaws:*) dt=1 ;; *) dt=2 ;; esac
  plot+="${plot:+, }DAT using 1:$((i + 2)) with linespoints lw 2 dt $dt"
  plot+=" lc rgb '${colours[i % ${#colours[@]}]}' title columnheader($((i + 2)))"
done
xtics=$(echo "$clients" | paste -s -d, -)
made=()
for file in $files; do
  for metric in throughput latency; do
    if [ "$metric" = throughput ]; then col=$col_mbit; else col=$col_last; fi
    dat=$work/$metric-$file.dat
    # A row per client count, a column per server ("-": no run).
    awk -F, -v f="$file" -v col="$col" -v servers="$servers" \
      -v clients="$clients" '
      NR > 1 && $2 == f && $14 == 0 { v[$1 "|" $3] = $col }
      END {
        ns = split(servers, s, "\n"); nc = split(clients, c, "\n")
        printf "clients"
        for (i = 1; i <= ns; i++) printf " %s", s[i]
        printf "\n"
        for (j = 1; j <= nc; j++) {
          printf "%s", c[j]
          for (i = 1; i <= ns; i++) {
            k = s[i] "|" c[j]
            printf " %s", (k in v) ? v[k] : "-"
          }
          printf "\n"
        }
      }' "$csv" >"$dat"
    if [ "$file" = mix ]; then what='the file mix'; else what="$file-byte files"; fi
    case $metric in
    throughput) ylabel='Mbit/s received' title="Throughput, $what" ;;
    latency) ylabel='mean latency to the last byte (ms)' title="Latency, $what" ;;
    esac
    svg=$out/$metric-$file.svg
    if gnuplot >"$work/gnuplot.err" 2>&1 <<GP; then
set terminal svg size 900,560 dynamic enhanced font 'sans,12'
set output '$svg'
set title "$title"
set datafile missing '-'
set key outside right top noenhanced
set logscale x
set xlabel 'concurrent clients'
set ylabel '$ylabel'
set yrange [0:*]
set grid
set xtics ($xtics)
DAT = '$dat'
plot $plot
GP
      made+=("$svg")
    else
      echo "charts.sh: gnuplot failed for $svg:" >&2
      cat "$work/gnuplot.err" >&2
    fi
  done
done
[ ${#made[@]} -gt 0 ] && echo "charts.sh: ${made[*]}" >&2
exit 0
