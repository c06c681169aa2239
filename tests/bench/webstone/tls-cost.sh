#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tls-cost.sh - what HTTPS costs taxi's web server against plain HTTP on the
# same load: jaws with its defaults serving the WebSTONE mix (or a file
# size) to webstone, plain and over TLS, kept-alive, round by round
# alternating; for each run the server's own CPU time per request, read
# from /proc for the seconds webstone measures (steadier on a busy machine
# than throughput, which the load of the moment sways), and the Mbit/s.
#
#   tests/bench/webstone/tls-cost.sh [--builddir DIR] [--rounds N]
#       [--clients N] [--file mix|BYTES] [--duration S] [--out FILE]
#
# Defaults: --rounds 3 --clients 50 --file mix --duration 6 (after 2 s of
# warm-up).  Prints a row per run and the medians (and OUT, default
# BUILDDIR/tests/bench/tls-cost.txt, gets the same): mode, Mbit/s, req/s,
# server CPU µs per request.  Over TLS a large file is read into the
# engine in pieces and encrypted (no sendfile(2)); a small cached one is
# encrypted from the cache's memory.  Needs openssl for the certificate.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=.
rounds=3
clients=50
file=mix
duration=6
out=''
usage() { sed -n '/^#   tests/,/^#       \[--clients/p' "$0" | sed 's/^# //'; }
while [ $# -gt 0 ]; do
  case $1 in
  --builddir) builddir=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --clients) clients=$2; shift 2 ;;
  --file) file=$2; shift 2 ;;
  --duration) duration=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) echo "tls-cost.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
webstone=$builddir/tests/bench/webstone/webstone
jaws=$builddir/examples/jaws/jaws
for f in "$webstone" "$jaws"; do
  [ -x "$f" ] || { echo "tls-cost.sh: $f not built" >&2; exit 1; }
done
[ -n "$out" ] || out=$builddir/tests/bench/tls-cost.txt
# shellcheck source=tests/lib.sh
. "$here/../../lib.sh"
make_work tls-cost
"$webstone" --make-docroot "$work/docroot" >/dev/null || exit 1
if ! openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout "$work/k.pem" \
  -out "$work/c.pem" -subj /CN=localhost >/dev/null 2>&1; then
  echo "tls-cost.sh: openssl cannot make a certificate" >&2
  exit 1
fi
choice=(--mix)
[ "$file" = mix ] || choice=(--size "$file")
ticks=$(getconf CLK_TCK)
# cpu PID: the process's user and system time so far, in clock ticks.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
{
  echo "tls-cost.sh $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores," \
    "$file, $clients clients, keep-alive, $rounds rounds of ${duration} s"
  echo "load before: $(uptime)"
} >"$out"
printf '%5s %-6s %10s %10s %12s\n' round mode Mbit/s req/s "cpu us/req" |
  tee -a "$out"
for ((r = 1; r <= rounds; r++)); do
  # Alternate which goes first, so that neither always meets the same
  # moment of the machine's load.
  modes="plain tls"
  [ $((r % 2)) -eq 0 ] && modes="tls plain"
  for mode in $modes; do
    set -- --root "$work/docroot" --port 0 --max-connections 20000
    flags=()
    if [ "$mode" = tls ]; then
      set -- "$@" --tls-only --tls-cert "$work/c.pem" --tls-key "$work/k.pem"
      flags=(--tls)
    fi
    if ! spawn "$work/server.log" "$work/server.log" "$jaws" "$@"; then
      echo "tls-cost.sh: jaws did not start:" >&2
      cat "$work/server.log" >&2
      exit 1
    fi
    # The warm-up (and the handshakes of kept-alive clients) before the
    # first reading, the measured seconds between the two.
    "$webstone" --port "$port" --docroot "$work/docroot" --clients "$clients" \
      --warmup 2 --duration "$duration" "${choice[@]}" --keep-alive \
      "${flags[@]}" --json >"$work/run.json" 2>"$work/run.err" &
    ws=$!
    sleep 2
    before=$(cpu "$pid")
    wait "$ws"
    after=$(cpu "$pid")
    stop_pid "$pid" || echo "tls-cost.sh: jaws did not stop" >&2
    field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" "$work/run.json"; }
    reqs=$(field requests)
    if [ -z "$reqs" ] || [ "$reqs" -eq 0 ]; then
      echo "tls-cost.sh: round $r $mode failed:" >&2
      cat "$work/run.err" >&2
      continue
    fi
    awk -v r="$r" -v m="$mode" -v b="$(field bits_per_s)" \
      -v q="$(field reqs_per_s)" -v c=$((after - before)) -v t="$ticks" \
      -v n="$reqs" 'BEGIN {
        printf "%5d %-6s %10.1f %10.1f %12.1f\n", r, m, b / 1e6, q,
          c / t * 1e6 / n }' | tee -a "$out"
  done
done
echo "load after: $(uptime)" >>"$out"
# The medians of each mode's rounds.
awk '$2 == "plain" || $2 == "tls" { n[$2]++; b[$2, n[$2]] = $3; q[$2, n[$2]] = $4; c[$2, n[$2]] = $5 }
  function med(a, m, k,   i, j, t, v) {
    for (i = 1; i <= k; i++) v[i] = a[m, i]
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
      if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
  }
  END {
    printf "medians:\n"
    for (m in n)
      printf "  %-6s %10.1f Mbit/s %10.1f req/s %10.1f cpu us/req\n", m,
        med(b, m, n[m]), med(q, m, n[m]), med(c, m, n[m])
    if (n["plain"] && n["tls"])
      printf "  tls / plain: %.2f the CPU per request, %.2f the Mbit/s\n",
        med(c, "tls", n["tls"]) / med(c, "plain", n["plain"]),
        med(b, "tls", n["tls"]) / med(b, "plain", n["plain"])
  }' "$out" | tee -a "$out"
