#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# versus-nginx.sh - taxi's web server with its defaults against nginx, the
# comparison of docs/bench/README.md ("taxi against nginx"): run.sh over
# the WebSTONE mix at 50 clients, once with keep-alive and once with a
# connection per request, each server measured --repeat times, round by
# round (--interleave), then the medians and the ratios.
#
#   tests/bench/webstone/versus-nginx.sh [--builddir DIR] [--out DIR]
#       [--repeat N] [--warmup S] [--duration S] [--clients N]
#       [--servers LIST] [--tls [--tls-resume]]
#
# Defaults: --repeat 3 --warmup 4 --duration 6 --clients 50, the servers
# "jaws:default nginx jaws:adaptive nginx:2": jaws as `jaws --root DIR`
# starts it (adaptive, half the host's processors on each of its sides,
# at least one), nginx with one worker, jaws as `jaws --threads 2` starts
# it (jaws:adaptive: --strategy adaptive --threads 2, from
# WS_JAWS_THREADS's default) and nginx with two workers.  24 runs, about
# 4.5 minutes.  OUT (default BUILDDIR/tests/bench/versus-nginx) gets
# keep-alive/ and close/, each run.sh's runs.csv and results.csv and its
# table, and summary.txt: the load average before and after, the medians
# in Mbit/s, and each jaws server's ratio to each other server on the
# medians and round by round.  Needs nginx (Debian:
# nginx-light); exits 1 without it.  --tls: the same over HTTPS (run.sh
# --tls: one certificate for both servers, webstone's OpenSSL client, a
# full handshake per connection, or resumed ones with --tls-resume), the
# summary's first line saying so; OUT's default is then
# BUILDDIR/tests/bench/versus-nginx-tls.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=.
out=''
repeat=3
warmup=4
duration=6
clients=50
servers="jaws:default nginx jaws:adaptive nginx:2"
tls=()
usage() { sed -n '/^#   tests/,/^#       \[--servers/p' "$0" | sed 's/^# //'; }
while [ $# -gt 0 ]; do
  case $1 in
  --builddir) builddir=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --repeat) repeat=$2; shift 2 ;;
  --warmup) warmup=$2; shift 2 ;;
  --duration) duration=$2; shift 2 ;;
  --clients) clients=$2; shift 2 ;;
  --servers) servers=$2; shift 2 ;;
  --tls) [ ${#tls[@]} -gt 0 ] || tls=(--tls); shift ;;
  --tls-resume) tls=(--tls-resume); shift ;;
  -h | --help) usage; exit 0 ;;
  *) echo "versus-nginx.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if ! command -v nginx >/dev/null 2>&1; then
  echo "versus-nginx.sh: nginx is not installed (Debian: nginx-light)" >&2
  exit 1
fi
[ -n "$out" ] || out=$builddir/tests/bench/versus-nginx${tls:+-tls}
mkdir -p "$out" || exit 1
summary=$out/summary.txt
{
    echo "versus-nginx.sh $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores${tls:+, HTTPS (webstone ${tls[0]})}"
    echo "servers: $servers; the mix, $clients clients, $repeat rounds of" \
      "${duration} s after ${warmup} s of warm-up"
    echo "load before: $(uptime)"
  } >"$summary"
  for mode in keep-alive close; do
    flags=(--keep-alive)
    [ "$mode" = close ] && flags=()
    mkdir -p "$out/$mode" || exit 1
    bash "$here/run.sh" --builddir "$builddir" --servers "$servers" \
      --files mix --clients "$clients" --warmup "$warmup" \
      --duration "$duration" --interleave --repeat "$repeat" \
      "${flags[@]}" "${tls[@]}" --out "$out/$mode" >"$out/$mode/table.txt" || exit 1
  done
  {
  echo "load after: $(uptime)"
  # The medians (results.csv: server,file,clients,keep_alive,reqs_per_s,
  # mbit_per_s,...,errors) and every jaws server's ratio to each other.
  for mode in keep-alive close; do
    awk -F, -v mode="$mode" '
      NR == 1 { next }
      { n++; name[n] = $1; mbit[n] = $6; req[n] = $5; err[n] = $14 }
      END {
        printf "%s (medians):\n", mode
        for (i = 1; i <= n; i++)
          printf "  %-14s %9.1f Mbit/s %9.1f req/s %4s errors\n", name[i], mbit[i], req[i], err[i]
        for (i = 1; i <= n; i++)
          for (j = 1; j <= n; j++)
            if (name[i] ~ /^jaws/ && name[j] !~ /^jaws/ && mbit[j] > 0)
              printf "  %s / %s: %.2f\n", name[i], name[j], mbit[i] / mbit[j]
      }' "$out/$mode/results.csv"
  done
  # Round by round (runs.csv: ...,errors,round): each round ran its servers
  # within the same half minute, so its ratio is measured under one load.
  for mode in keep-alive close; do
    awk -F, -v mode="$mode" '
      NR == 1 { next }
      $6 != "" {
        if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
        mbit[$1, $15] = $6; if ($15 > rounds) rounds = $15
      }
      END {
        for (i = 1; i <= n; i++)
          for (j = 1; j <= n; j++) {
            if (order[i] !~ /^jaws/ || order[j] ~ /^jaws/) continue
            line = ""
            for (r = 1; r <= rounds; r++)
              if (mbit[order[i], r] != "" && mbit[order[j], r] > 0)
                line = line sprintf(" %.2f", mbit[order[i], r] / mbit[order[j], r])
            printf "%s rounds, %s / %s:%s\n", mode, order[i], order[j], line
          }
      }' "$out/$mode/runs.csv"
  done
} >>"$summary"
cat "$summary"
