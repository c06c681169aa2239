#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/bench/oltp.sh - the OLTP back end under the Leader/Followers pool
# and under the half-sync/half-async pool, side by side in one run: the
# Leader/Followers paper's claim that its pool avoids the hand-off (a
# context switch, a synchronisation and an allocation per request in a
# half-sync/half-reactive pool) measured on the same handlers.
#
#   tests/bench/oltp.sh [--builddir DIR] [--threads N] [--connections C]
#                       [--duration S] [--rounds R] [--work UNITS]
#
# Each round runs every configuration once, in turn (so a slower moment
# of the machine hits all of them), and the table gives each figure's
# median over the rounds: requests/s and p99 latency as oltp_client
# measured them, and per request the server's allocations (the
# malloc_count preload, read through SIGUSR2 before and after the load),
# context switches (voluntary + involuntary, every thread, /proc) and CPU
# time.  The window includes the clients' connects (one allocation per
# connection in the server, C of them over the whole run).
# make bench-oltp runs it with $(SHELL), which may be dash: the arrays
# below need bash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
builddir=build threads=4 connections=50 duration=3 rounds=3 units=2
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) builddir=$2; shift ;;
    --threads) threads=$2; shift ;;
    --connections) connections=$2; shift ;;
    --duration) duration=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --work) units=$2; shift ;;
    *) echo "oltp.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
backend=$builddir/examples/oltp/oltp_backend
client=$builddir/examples/oltp/oltp_client
preload=$builddir/tests/bench/.libs/malloc_count.so
for p in "$backend" "$client"; do
  [ -x "$p" ] || { echo "oltp.sh: $p is not built" >&2; exit 1; }
done
[ -r "$preload" ] || preload=''
make_work oltp-bench
configs=("lf" "hsha")

# snap PID COUNTFILE: "cpu_ticks ctx allocs" of the server now.
snap() {
  local before now n allocs=- stat rest ctx
  local -a f
  if [ -n "$2" ]; then
    before=$(grep -c ' sigusr2$' "$2")
    kill -USR2 "$1"
    for ((n = 0; n < 200; n++)); do
      now=$(grep -c ' sigusr2$' "$2")
      [ "$now" -gt "$before" ] && break
      sleep 0.01
    done
    allocs=$(grep ' sigusr2$' "$2" | tail -n 1 | cut -d' ' -f2)
  fi
  stat=$(cat "/proc/$1/stat")
  rest=${stat##*) }
  read -r -a f <<<"$rest"
  ctx=$(awk '/ctxt_switches:/ { s += $2 } END { print s + 0 }' \
    "/proc/$1"/task/*/status 2>/dev/null)
  echo "$((f[11] + f[12])) $ctx $allocs"
}

# run CONFIG ROUND: one measured run; appends a line to results.
run() {
  local cfg=$1 out=$work/$1.$2.out count=$work/$1.$2.malloc
  local s0 s1 line
  : >"$count"
  spawn "$out" "$out" env LD_PRELOAD="$preload" MALLOC_COUNT_FILE="$count" \
    "$backend" --port 0 --dispatcher "$cfg" --threads "$threads" \
    --work "$units" ||
    { echo "oltp.sh: $cfg did not start" >&2; cat "$out" >&2; exit 1; }
  # Warm up: connections, the pool's threads, the stream buffers.
  "$client" --port "$port" --connections "$connections" --duration 1 \
    >/dev/null || { echo "oltp.sh: warm-up against $cfg failed" >&2; exit 1; }
  s0=$(snap "$pid" "${preload:+$count}")
  line=$("$client" --port "$port" --connections "$connections" \
    --duration "$duration" --time-limit $((duration + 60))) ||
    { echo "oltp.sh: the client failed against $cfg" >&2; exit 1; }
  s1=$(snap "$pid" "${preload:+$count}")
  stop_pid "$pid"
  echo "$cfg $s0 $s1 $line" >>"$work/results"
}

echo "oltp.sh: $rounds rounds of ${configs[*]}, $threads threads," \
  "$connections connections, $duration s each, work $units" >&2
for ((r = 1; r <= rounds; r++)); do
  for cfg in "${configs[@]}"; do
    echo "oltp.sh: round $r: $cfg" >&2
    run "$cfg" "$r"
  done
done

# Per run: requests/s, p99, allocs/req, ctx/req, CPU us/req; medians (each
# figure's list of runs kept with all its digits: CONVFMT).
awk -v tck="$(getconf CLK_TCK)" -v CONVFMT=%.17g "$median_awk"'
  {
    cfg = $1; cpu = $5 - $2; ctx = $6 - $3; al = $7 - $4
    for (i = 8; i <= NF; i++) {
      if ($(i) == "requests,") req = $(i - 1)
      if ($(i) == "requests/s,") rate = $(i - 1)
      if ($(i) == "p99") p99 = $(i + 1)
    }
    R[cfg] = R[cfg] " " rate; P[cfg] = P[cfg] " " p99
    A[cfg] = A[cfg] " " (($4 == "-") ? -1 : al / req)
    C[cfg] = C[cfg] " " (ctx / req); U[cfg] = U[cfg] " " (cpu * 1e6 / tck / req)
    if (!(cfg in seen)) { seen[cfg] = 1; order[++m] = cfg }
  }
  END {
    printf "%-8s %12s %9s %12s %10s %12s\n", "pool", "requests/s", "p99 us",
      "allocs/req", "ctx/req", "CPU us/req"
    for (o = 1; o <= m; o++) {
      cfg = order[o]
      a = median(A[cfg])
      printf "%-8s %12.0f %9.0f %12s %10.3f %12.2f\n", cfg, median(R[cfg]),
        median(P[cfg]), a < 0 ? "-" : sprintf("%.4f", a),
        median(C[cfg]), median(U[cfg])
    }
  }' "$work/results"
