#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2059 # the printf formats are our own ($fmt, $rfmt)
# bench.sh - benchmark examples/echo_server over every backend and dispatcher.
#
#   tests/bench/bench.sh [--builddir DIR] [--duration SEC] [--warmup SEC]
#                        [--connections C] [--threads N] [--client-threads T]
#                        [--size S] [--repeat R] [--csv FILE]
#                        [--backend NAME]... [--config LABEL]... [--quick]
#
# For each backend `echo_server --list-backends` prints and each dispatcher
# configuration below, and for each completion backend `echo_server
# --list-proactor-backends` prints with the proactor dispatcher (configuration
# "proactor": completion handlers run by an L/F pool), the script starts the
# server (port 0) with the
# malloc_count preload, drives it with tests/bench/loadgen (closed-loop
# ping-pong, warm-up first), stops it with SIGINT and reports:
#
#   msgs/s          round trips per second over the measured phase
#   p50/p99/p999    round-trip latency, microseconds
#   cpu us/msg      server CPU time (user + system, all threads) per message
#   ctx/msg         server context switches (voluntary + involuntary, summed
#                   over all its threads) per message
#   allocs/msg      server malloc-family calls per message
#   sys/msg         server system calls per message (all its threads;
#                   counted by `perf stat -e raw_syscalls:sys_enter`, "-"
#                   where perf cannot attach)
#
# The last three cover the measured phase only: loadgen quiesces the load
# before and after it and runs this script's --snapshot mode, which reads
# /proc/PID/stat and /proc/PID/task/*/status and sends the server SIGUSR2
# (the preload then appends its count to a file).  The server is idle while
# a snapshot is taken, so the differences are exactly the measured messages'
# work.  Values that cannot be had here (no /proc, no preload) show as "-".
#
# A configuration the server refuses at start (non-zero exit before it
# listens: an unknown --dispatcher, --leaders many on a backend that cannot
# have several waiters, ...) is reported as n/a, not as a failure.
#
# Peers: where the build has it (configure found APR and apr-util), the APR
# server of examples/apr_port runs as backend "apr", configuration
# "apr_server": an apr_pollset loop handing each readable connection to an
# apr_thread_pool (half-sync/half-async, as APR servers are written), in
# --echo mode, against the same loadgen.  It is compared at the end with
# taxi's Leader/Followers pool on the same APR pollset ("apr" backend) and
# on the first (native) backend.  The APR methods named "apr:METHOD" run only
# when asked for with --backend.
#
# tests/bench/peers.sh (make bench-peers) runs taxi beside echo servers on
# other event libraries (Boost.Asio, libevent, libuv) and two bare loops.
#
# With --repeat R each configuration runs R times and the table shows the run
# with the median msgs/s.  Raw results, every run, go to a CSV file (default
# DIR/tests/bench/results.csv).  At the end, for each backend,
# Leader/Followers (lifo, one leader) is compared with Half-Sync/Half-Async.
#
# The server and loadgen share the machine's CPUs, and anything else running
# there disturbs msgs/s and the latencies most; CPU time, context switches
# and allocations per message are much steadier.  The load average at the
# start is printed with the results for that reason.
#
# Every step is bounded in time and the script kills (by PID) whatever it
# started when it exits.  Exit status: 0, or 1 if some run failed (2 for
# bad usage).  Linux is assumed for the /proc and preload columns.

if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

# ---- snapshot mode (run by loadgen's hooks) --------------------------------

# snapshot PID COUNTFILE OUT - append "utime stime vcsw nvcsw allocs sys" for
# the server PID to OUT.  COUNTFILE is the preload's output file, or "" if
# the server does not count allocations (allocs is then "-"); sys is 0 the
# first time and "perf" the second (see syscall_counter), or "-".
snapshot() {
  local pid=$1 countfile=$2 out=$3 allocs=- before=0 now=0 n stat rest ctx
  local sys=-
  local -a f
  sys=$(syscall_counter "$pid" "$out.perf")
  if [ -n "$countfile" ]; then
    before=$(grep -c ' sigusr2$' "$countfile" 2>/dev/null)
    kill -USR2 "$pid" || return 1
    # The handler appends a line; wait for it (2 s at most).
    for ((n = 0; n < 200; n++)); do
      now=$(grep -c ' sigusr2$' "$countfile" 2>/dev/null)
      [ "${now:-0}" -gt "${before:-0}" ] && break
      sleep 0.01
    done
    if [ "${now:-0}" -gt "${before:-0}" ]; then
      allocs=$(grep ' sigusr2$' "$countfile" | tail -n 1 | cut -d' ' -f2)
    else
      echo "bench: no malloc_count line after SIGUSR2 (is it blocked?)" >&2
    fi
  fi
  if [ -r "/proc/$pid/stat" ]; then
    stat=$(cat "/proc/$pid/stat") || return 1
    rest=${stat##*) } # the command name may contain spaces and parentheses
    read -r -a f <<<"$rest"
    # Fields 14 and 15 (utime, stime, in clock ticks, all threads) are the
    # 12th and 13th after the name.  Context switches are per thread.
    ctx=$(awk '/^voluntary_ctxt_switches:/ { v += $2 }
               /^nonvoluntary_ctxt_switches:/ { n += $2 }
               END { print v + 0, n + 0 }' "/proc/$pid"/task/*/status 2>/dev/null)
    echo "${f[11]} ${f[12]} $ctx $allocs $sys" >>"$out"
  else
    echo "- - - - $allocs $sys" >>"$out"
  fi
}

# syscall_counter PID STATE - at the first call, start counting PID's system
# calls with perf (its threads as of now: the pools are running by then) and
# print 0 once perf counts; at the second, stop counting, ask perf to exit
# and print "perf": perf writes the count to STATE.out as it exits, which
# takes it a second or so, and perf_syscalls in run.sh reads it once the
# server has stopped.  Prints "-" when perf is missing or cannot attach.
#
# perf starts with its counter disabled and takes "enable" and "disable"
# through a control FIFO (STATE.ctl), answering each on STATE.ack once
# done, so the count covers exactly the time between the two calls.
syscall_counter() {
  local pid=$1 state=$2
  if [ ! -e "$state" ]; then
    if ! command -v perf >/dev/null 2>&1 ||
      ! mkfifo "$state.ctl" "$state.ack" 2>/dev/null; then
      echo - >"$state"
      echo -
      return
    fi
    perf stat -e raw_syscalls:sys_enter -x, -o "$state.out" -p "$pid" \
      -D -1 --control "fifo:$state.ctl,$state.ack" \
      </dev/null >/dev/null 2>"$state.err" &
    echo $! >"$state"
    perf_command "$state" enable && echo 0 && return
    kill -KILL "$(cat "$state")" 2>/dev/null
    echo - >"$state"
    echo -
    return
  fi
  [ "$(cat "$state")" = - ] && { echo -; return; }
  if perf_command "$state" disable; then
    kill -INT "$(cat "$state")" 2>/dev/null # it stops while the run ends
    echo perf
  else
    echo -
  fi
}

# perf_command STATE COMMAND - send perf a control command and wait (5 s at
# most, less if perf dies: it cannot attach, say) for its answer.  The
# FIFOs are opened read-write so that neither open blocks should perf be
# gone.
perf_command() {
  local answer='' pid n
  pid=$(cat "$1")
  exec 8<>"$1.ctl" 9<>"$1.ack"
  echo "$2" >&8
  for ((n = 0; n < 50; n++)); do
    read -r -t 0.1 answer <&9 && break
    kill -0 "$pid" 2>/dev/null || break
  done
  exec 8>&- 9<&-
  [ "$answer" = ack ]
}

if [ "${1:-}" = --snapshot ]; then
  shift
  [ $# -eq 3 ] || { echo "usage: $0 --snapshot PID COUNTFILE OUT" >&2; exit 2; }
  snapshot "$@"
  exit $?
fi

# ---- configuration ----------------------------------------------------------

# The dispatcher configurations, "label|echo_server arguments"; @N@ is the
# --threads value.  The reactor passes no --dispatcher so that it runs on
# servers that predate the option.
CONFIGS=(
  "reactor|"
  "lf/lifo/one|--dispatcher lf --threads @N@ --promotion lifo --leaders one"
  "lf/fifo/one|--dispatcher lf --threads @N@ --promotion fifo --leaders one"
  "lf/shared/one|--dispatcher lf --threads @N@ --promotion shared --leaders one"
  "lf/lifo/many|--dispatcher lf --threads @N@ --promotion lifo --leaders many"
  "lf/fifo/many|--dispatcher lf --threads @N@ --promotion fifo --leaders many"
  "lf/shared/many|--dispatcher lf --threads @N@ --promotion shared --leaders many"
  "hsha|--dispatcher hsha --threads @N@"
)
# The peer servers, "label|arguments" (run without --backend).
APR_PEER_CONFIG="apr_server|--echo --threads @N@"
# The configuration each completion backend runs in.
PROACTOR_CONFIG="proactor|--dispatcher proactor --threads @N@"
# What the final comparison sets side by side.
RATIO_A=lf/lifo/one
RATIO_B=hsha

usage() {
  cat <<EOF
usage: $0 [options]
  --builddir DIR        the build tree (default: .)
  --duration SEC        measured seconds per run (default 3; --quick: 1)
  --warmup SEC          warm-up seconds per run (default 1; --quick: 0.5)
  --connections C       loadgen connections (default 64)
  --threads N           server threads for lf and hsha (default: CPUs, >= 2)
  --client-threads T    loadgen threads (default 2)
  --size S              message size in bytes (default 64)
  --repeat R            run each configuration R times, show the median
  --csv FILE            raw results (default DIR/tests/bench/results.csv)
  --backend NAME        only this backend (repeatable)
  --config LABEL        only this configuration (repeatable), one of:
                        $(for c in "${CONFIGS[@]}"; do printf '%s ' "${c%%|*}"; done)proactor
                        apr_server
  --quick               short runs
EOF
}

builddir=.
duration='' warmup='' quick=0
connections=64 client_threads=2 size=64 repeat=1 csv=
server_threads=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
[ "$server_threads" -ge 2 ] 2>/dev/null || server_threads=2
only_backends=() only_configs=()

need_value() {
  if [ $# -lt 2 ]; then
    echo "bench: $1 needs a value" >&2
    usage >&2
    exit 2
  fi
}
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) need_value "$@"; builddir=$2; shift 2 ;;
    --duration) need_value "$@"; duration=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --connections) need_value "$@"; connections=$2; shift 2 ;;
    --threads) need_value "$@"; server_threads=$2; shift 2 ;;
    --client-threads) need_value "$@"; client_threads=$2; shift 2 ;;
    --size) need_value "$@"; size=$2; shift 2 ;;
    --repeat) need_value "$@"; repeat=$2; shift 2 ;;
    --csv) need_value "$@"; csv=$2; shift 2 ;;
    --backend) need_value "$@"; only_backends+=("$2"); shift 2 ;;
    --config) need_value "$@"; only_configs+=("$2"); shift 2 ;;
    --quick) quick=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  : "${duration:=1}" "${warmup:=0.5}"
else
  : "${duration:=3}" "${warmup:=1}"
fi
for v in duration warmup; do
  if ! [[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "bench: --$v wants seconds, not '${!v}'" >&2
    exit 2
  fi
done
for v in connections server_threads client_threads size repeat; do
  if ! [[ ${!v} =~ ^[1-9][0-9]*$ ]]; then
    echo "bench: ${v//_/-} wants a positive whole number, not '${!v}'" >&2
    exit 2
  fi
done

script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
builddir=$(cd "$builddir" 2>/dev/null && pwd) || {
  echo "bench: no build directory '$builddir'" >&2
  exit 2
}
server=$builddir/examples/echo_server
loadgen=$builddir/tests/bench/loadgen
preload=$builddir/tests/bench/.libs/malloc_count.so
apr_server=$builddir/examples/apr_port/apr_server
: "${csv:=$builddir/tests/bench/results.csv}"
for prog in "$server" "$loadgen"; do
  if [ ! -x "$prog" ]; then
    echo "bench: $prog not found; build first (make)" >&2
    exit 1
  fi
done
if [ ! -f "$preload" ]; then
  echo "bench: note: $preload not built; no allocation counts" >&2
  preload=
fi
bench_name=bench
snapshot_script=$script
# shellcheck source=tests/bench/run.sh
. "$(dirname "$script")/run.sh"
bench_setup

# run_one BACKEND LABEL ARGS - one configuration of echo_server (or of the
# APR server); sets r_status (ok, n/a, FAILED), r_note and the r_* metrics
# (see run_server in run.sh).
run_one() {
  local backend=$1 label=$2 args=$3
  local -a argv
  read -r -a argv <<<"${args//@N@/$server_threads}"
  if [ "$label" = apr_server ]; then # chooses its own backend
    run_server "$backend $label" "$connections" "$client_threads" "$size" \
      "$warmup" "$duration" "$apr_server" --port 0 "${argv[@]}"
  else
    run_server "$backend $label" "$connections" "$client_threads" "$size" \
      "$warmup" "$duration" "$server" --port 0 --backend "$backend" "${argv[@]}"
  fi
}

# ---- main -------------------------------------------------------------------

if ! "$server" --list-backends >"$work/backends" 2>"$work/backends.err" ||
  [ ! -s "$work/backends" ]; then
  echo "bench: $server --list-backends failed or listed nothing" >&2
  show "$work/backends.err"
  exit 1
fi
backends=()
while read -r b; do
  [ -n "$b" ] || continue
  if [ ${#only_backends[@]} -gt 0 ]; then
    case " ${only_backends[*]} " in *" $b "*) ;; *) continue ;; esac
  else
    # "apr:poll", "apr:select", ...: only on request.
    case $b in *:*) continue ;; esac
  fi
  backends+=("$b")
done <"$work/backends"
if [ ${#backends[@]} -eq 0 ]; then
  echo "bench: no backend to run (available: $(tr '\n' ' ' <"$work/backends"))" >&2
  exit 2
fi
wanted() { # LIST... -- ITEM: is ITEM in the --backend/--config filter?
  local item=${*: -1}
  [ $# -eq 2 ] && return 0 # the filter is empty
  case " ${*:1:$#-2} " in *" $item "*) return 0 ;; esac
  return 1
}
# Every run: "backend|label|echo_server arguments".
plan=() proactors=()
for b in "${backends[@]}"; do
  for c in "${CONFIGS[@]}"; do
    wanted "${only_configs[@]}" -- "${c%%|*}" && plan+=("$b|$c")
  done
done
# The completion backends, with the proactor dispatcher.
if wanted "${only_configs[@]}" -- proactor &&
  "$server" --list-proactor-backends >"$work/proactors" 2>/dev/null; then
  while read -r b; do
    [ -n "$b" ] || continue
    wanted "${only_backends[@]}" -- "$b" || continue
    plan+=("$b|$PROACTOR_CONFIG")
    proactors+=("$b")
  done <"$work/proactors"
fi
# The APR server as a peer, where it was built.
have_apr_peer=0
if [ -x "$apr_server" ] && wanted "${only_configs[@]}" -- apr_server &&
  wanted "${only_backends[@]}" -- apr; then
  plan+=("apr|$APR_PEER_CONFIG")
  have_apr_peer=1
fi
if [ ${#plan[@]} -eq 0 ]; then
  echo "bench: nothing matches --backend and --config" >&2
  exit 2
fi

mkdir -p "$(dirname "$csv")" || exit 1
echo "backend,config,run,status,server_threads,connections,client_threads,size,duration_s,messages,msgs_per_s,p50_us,p99_us,p999_us,max_us,cpu_us_per_msg,utime_us_per_msg,stime_us_per_msg,vcsw_per_msg,nvcsw_per_msg,ctx_per_msg,allocs_per_msg,syscalls_per_msg,note" >"$csv" || exit 1

ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')
loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
echo "taxi echo benchmark: ${#plan[@]} configuration(s)" \
  "x $repeat run(s); $connections connections x $size B from $client_threads loadgen thread(s);"
echo "  ${warmup} s warm-up + ${duration} s measured per run; server threads (lf, hsha): $server_threads;" \
  "$ncpu CPUs shared by server and loadgen; load average $loadavg"
fmt='%-9s %-15s %10s %9s %9s %9s %8s %8s %8s %8s  %s\n'
printf "$fmt" backend config msgs/s p50us p99us p999us cpu_us ctx allocs sys ''
printf "$fmt" '' '' '' '' '' '' /msg /msg /msg /msg ''

# The r_* results of each run, saved as one "|"-joined line per run.
RESULT_VARS=(r_status r_rate r_p50 r_p99 r_p999 r_cpu r_ctx r_allocs r_sys r_note)
save_run() {
  local v line=
  for v in "${RESULT_VARS[@]}"; do line+=${!v}'|'; done
  runs+=("$line")
}
load_run() {
  local IFS='|' v i=0
  local -a f
  read -r -a f <<<"$1"
  for v in "${RESULT_VARS[@]}"; do
    printf -v "$v" '%s' "${f[i]:-}"
    i=$((i + 1))
  done
}

declare -A res_rate res_ctx res_allocs res_sys res_status
failures=0
for p in "${plan[@]}"; do
    backend=${p%%|*}
    c=${p#*|}
    label=${c%%|*}
    runs=()
    status=ok
    for ((run = 1; run <= repeat; run++)); do
      run_one "$backend" "$label" "${c#*|}"
      note=${r_note//\"/\"\"}
      echo "$backend,$label,$run,$r_status,$server_threads,$connections,$client_threads,$size,$r_seconds,$r_msgs,$r_rate,$r_p50,$r_p99,$r_p999,$r_max,$r_cpu,$r_utime,$r_stime,$r_vcsw,$r_nvcsw,$r_ctx,$r_allocs,$r_sys,\"$note\"" >>"$csv"
      save_run
      if [ "$r_status" != ok ]; then
        status=$r_status
        break # n/a stays n/a; a failure is reported as it is
      fi
    done
    if [ "$status" = ok ]; then
      # The run with the median msgs/s (the lower middle one for even R).
      pick=$(for i in "${!runs[@]}"; do
        load_run "${runs[i]}"
        echo "$r_rate $i"
      done | sort -g | sed -n "$(((${#runs[@]} + 1) / 2))p" | cut -d' ' -f2)
      load_run "${runs[pick]}"
      [ "$repeat" -gt 1 ] && r_note="median of $repeat${r_note:+; $r_note}"
    fi
    res_status[$backend\|$label]=$r_status
    res_rate[$backend\|$label]=$r_rate
    res_ctx[$backend\|$label]=$r_ctx
    res_allocs[$backend\|$label]=$r_allocs
    res_sys[$backend\|$label]=$r_sys
    case $r_status in
      ok)
        printf "$fmt" "$backend" "$label" "$(printf '%.0f' "$r_rate")" \
          "$r_p50" "$r_p99" "$r_p999" "${r_cpu:--}" "${r_ctx:--}" \
          "${r_allocs:--}" "${r_sys:--}" "$r_note" ;;
      n/a)
        printf "$fmt" "$backend" "$label" n/a '' '' '' '' '' '' '' "$r_note" ;;
      *)
        failures=$((failures + 1))
        printf "$fmt" "$backend" "$label" FAILED '' '' '' '' '' '' '' "$r_note" ;;
    esac
done
echo "raw results: $csv"

# ---- the comparison ---------------------------------------------------------

# x / y with two decimals for the tables below ("-" when either is
# unknown), prepended to each awk program that prints a row.
ratio_awk='
function ratio(x, y) {
  if (x == "-" || y == "-") return "-"
  if (y + 0 == 0) return x + 0 == 0 ? "1.00" : "inf"
  return sprintf("%.2f", x / y)
}'

echo
echo "$RATIO_A relative to $RATIO_B:"
rfmt='%-8s %14s %14s %16s %16s\n'
printf "$rfmt" backend msgs/s-ratio ctx/msg-ratio "allocs/msg $RATIO_A" "allocs/msg $RATIO_B"
for backend in "${backends[@]}"; do
  a=$backend\|$RATIO_A b=$backend\|$RATIO_B
  if [ "${res_status[$a]:-}" != ok ] || [ "${res_status[$b]:-}" != ok ]; then
    printf "$rfmt" "$backend" n/a n/a "${res_allocs[$a]:--}" "${res_allocs[$b]:--}"
    continue
  fi
  awk -v f="$rfmt" -v be="$backend" -v ra="${res_rate[$a]}" -v rb="${res_rate[$b]}" \
    -v ca="${res_ctx[$a]:--}" -v cb="${res_ctx[$b]:--}" \
    -v aa="${res_allocs[$a]:--}" -v ab="${res_allocs[$b]:--}" "$ratio_awk"'
    BEGIN { printf f, be, ratio(ra, rb), ratio(ca, cb), aa, ab }'
done

# Each completion backend against the Reactor's L/F pool on the first
# readiness backend (the native one), and the system calls each needs.
ref=${backends[0]}\|$RATIO_A
if [ ${#proactors[@]} -gt 0 ] && [ "${res_status[$ref]:-}" = ok ]; then
  echo
  echo "proactor relative to ${ref/\\|/ }:"
  pfmt='%-9s %14s %14s %12s %12s\n'
  printf "$pfmt" backend msgs/s-ratio sys/msg-ratio sys/msg "sys/msg ref"
  for b in "${proactors[@]}"; do
    a=$b\|proactor
    if [ "${res_status[$a]:-}" != ok ]; then
      printf "$pfmt" "$b" n/a n/a - "${res_sys[$ref]:--}"
      continue
    fi
    awk -v f="$pfmt" -v be="$b" -v ra="${res_rate[$a]}" -v rb="${res_rate[$ref]}" \
      -v sa="${res_sys[$a]:--}" -v sb="${res_sys[$ref]:--}" "$ratio_awk"'
      BEGIN { printf f, be, ratio(ra, rb), ratio(sa, sb), sa, sb }'
  done
fi

# The APR server (apr_pollset + apr_thread_pool) against taxi's
# Leader/Followers pool, on APR's own pollset and on the native backend.
peer=apr\|apr_server
if [ "$have_apr_peer" = 1 ] && [ "${res_status[$peer]:-}" = ok ]; then
  echo
  echo "$RATIO_A relative to the APR server (apr_pollset + apr_thread_pool):"
  afmt='%-9s %14s %14s %16s %18s\n'
  printf "$afmt" backend msgs/s-ratio ctx/msg-ratio "allocs/msg $RATIO_A" "allocs/msg apr_server"
  for b in apr "${backends[0]}"; do
    a=$b\|$RATIO_A
    if [ "${res_status[$a]:-}" != ok ]; then
      printf "$afmt" "$b" n/a n/a - "${res_allocs[$peer]:--}"
      continue
    fi
    awk -v f="$afmt" -v be="$b" -v ra="${res_rate[$a]}" -v rb="${res_rate[$peer]}" \
      -v ca="${res_ctx[$a]:--}" -v cb="${res_ctx[$peer]:--}" \
      -v aa="${res_allocs[$a]:--}" -v ab="${res_allocs[$peer]:--}" "$ratio_awk"'
      BEGIN { printf f, be, ratio(ra, rb), ratio(ca, cb), aa, ab }'
  done
fi

if [ "$failures" -ne 0 ]; then
  echo "bench: $failures run(s) failed" >&2
  exit 1
fi
exit 0
