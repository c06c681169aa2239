# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # r_* are for the caller, which sets the inputs
# run.sh - one benchmark run: start an echo server, drive it with loadgen,
# take the server's counters around the measured phase, stop it.  Sourced
# by bench.sh and peers.sh, which set, before calling bench_setup:
#
#   bench_name       prefix of messages ("bench", "peers")
#   loadgen          the loadgen program
#   preload          tests/bench/.libs/malloc_count.so, or "" (no counts)
#   snapshot_script  bench.sh, whose --snapshot mode loadgen's hooks run
#   loadgen_mode     loadgen's --mode (echo, the default when unset, or
#                    cec: a connection per round trip)
#
# The server must print a line ending in "listening on HOST:PORT", stop
# on SIGINT with exit status 0 after printing a line "NAME: stopped
# ...", and exit non-zero before listening if it refuses the configuration
# (reported as n/a).  It runs with the malloc_count preload; loadgen quiesces
# the load before and after the measured phase and runs the snapshot hook
# each time (CPU time and context switches from /proc, allocations through
# SIGUSR2 to the preload, system calls through perf), so that the
# differences are the measured messages' work.
#
# Every step is bounded in time (start_wait and stop_wait of tests/lib.sh
# for the server), and whatever was started is killed (by PID) when the
# sourcing script exits.

# shellcheck source=tests/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# bench_setup - the temporary directory, the exit trap, facts about /proc.
bench_setup() {
  make_work bench
  have_proc=0
  [ -r /proc/self/stat ] && [ -d /proc/self/task ] && have_proc=1
  clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
  usr2=$(kill -l USR2)
}

# Quote for sh -c.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# Does PID catch SIGUSR2 (the preload's handler is installed)?
catches_usr2() {
  local mask
  mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
  [ -n "$mask" ] && (((16#$mask >> (usr2 - 1)) & 1))
}

# Show the start of a step's output, indented.
show() {
  local n
  [ -s "$1" ] || return 0
  sed -n '1,20s/^/    | /p' "$1" >&2
  n=$(wc -l <"$1")
  [ "$n" -le 20 ] || echo "    | ... ($((n - 20)) more lines)" >&2
}

# perf_syscalls STATE - the system calls perf counted between the two
# snapshots (syscall_counter in bench.sh), once perf has exited: it does
# when the server does.  "-" if unknown.
perf_syscalls() {
  local pid n count
  pid=$(cat "$1" 2>/dev/null)
  [[ $pid =~ ^[0-9]+$ ]] || { echo -; return; }
  for ((n = 0; n < 500; n++)); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$n" = 250 ] && kill -INT "$pid" 2>/dev/null # 5 s: remind it
    sleep 0.02
  done
  kill -KILL "$pid" 2>/dev/null
  count=$(awk -F, '/raw_syscalls:sys_enter/ { print $1 }' "$1.out" 2>/dev/null)
  [[ $count =~ ^[0-9]+$ ]] && echo "$count" || echo -
}

# json_field VAR JSON NAME: set VAR to the number NAME in loadgen's JSON
# line, or to "" (no fork: the machine may be busy).
json_field() {
  local value=''
  [[ $2 =~ \"$3\":([-0-9.eE+]+) ]] && value=${BASH_REMATCH[1]}
  printf -v "$1" '%s' "$value"
}

# run_server WHAT CONNECTIONS CLIENT_THREADS SIZE WARMUP DURATION PROG ARG...
# Run PROG ARG... (it is given no port: pass "--port 0" among the ARGs)
# against loadgen.  WHAT names the run in messages.  Sets r_status (ok,
# n/a, FAILED), r_note and the metrics: r_msgs, r_rate, r_p50, r_p99,
# r_p999, r_max, r_seconds, r_connect (seconds to open the connections),
# and per message r_cpu, r_utime, r_stime, r_vcsw, r_nvcsw, r_ctx,
# r_allocs, r_sys ("" where unknown).
run_server() {
  local what=$1 connections=$2 client_threads=$3 size=$4 warmup=$5
  local duration=$6 prog=$7 tag out err countfile snapfile port status pid
  local hook lg_status loadgen_limit watchdog_limit loadgen_pid
  local -a preload_env=(env)
  shift 7
  r_status=FAILED r_note='' r_msgs='' r_rate='' r_p50='' r_p99='' r_p999=''
  r_max='' r_cpu='' r_utime='' r_stime='' r_vcsw='' r_nvcsw='' r_ctx=''
  r_allocs='' r_seconds='' r_sys='' r_connect=''
  tag=${what//[^A-Za-z0-9_.-]/_}
  out=$work/$tag.server.out err=$work/$tag.server.err
  countfile=$work/$tag.malloc snapfile=$work/$tag.snap
  rm -f "$snapfile".perf*
  : >"$snapfile"
  # loadgen enforces its own limit (opening 10,000 connections takes a few
  # seconds on a busy machine); this watchdog is the backstop.
  loadgen_limit=$(awk -v w="$warmup" -v d="$duration" -v c="$connections" \
    'BEGIN { print int(w + d + 20 + c / 500) }')
  watchdog_limit=$((loadgen_limit + 15))

  if [ -n "$preload" ]; then
    : >"$countfile"
    preload_env+=("LD_PRELOAD=$preload${LD_PRELOAD:+ $LD_PRELOAD}"
      "MALLOC_COUNT_FILE=$countfile")
  fi
  # Wait for "NAME: ... listening on HOST:PORT".
  if ! spawn "$out" "$err" "${preload_env[@]}" "$prog" "$@"; then
    if [ "$status" = timeout ]; then
      r_note="did not start within $start_wait s"
      return 1
    fi
    r_note=$(head -n 1 "$err")
    r_note=${r_note#*: }
    if [ "$status" -ge 1 ] && [ "$status" -lt 128 ]; then
      r_status=n/a
      [ -n "$r_note" ] || r_note="refused (exit $status)"
    else
      r_note="exited with status $status before listening${r_note:+: $r_note}"
      show "$err"
    fi
    return 1
  fi

  local cf=
  if [ -n "$preload" ] && [ "$have_proc" = 1 ] && catches_usr2 "$pid"; then
    cf=$countfile
  elif [ -n "$preload" ]; then
    r_note="no allocation counts (SIGUSR2 not caught)"
  fi
  hook="bash $(q "$snapshot_script") --snapshot $pid $(q "$cf") $(q "$snapfile")"

  "$loadgen" --port "$port" --connections "$connections" \
    --threads "$client_threads" --size "$size" --duration "$duration" \
    --warmup "$warmup" --time-limit "$loadgen_limit" --json \
    --mode "${loadgen_mode:-echo}" \
    --on-measure-start "$hook" --on-measure-end "$hook" \
    </dev/null >"$work/$tag.loadgen.out" 2>"$work/$tag.loadgen.err" &
  loadgen_pid=$!
  track "$loadgen_pid"
  if wait_pid "$loadgen_pid" "$watchdog_limit"; then
    lg_status=$status
  else
    lg_status=killed
  fi

  # Stop the server as a user would; it must report and exit 0.
  local fail=''
  if stop_pid "$pid"; then
    if [ "$status" -ne 0 ]; then
      fail="the server exited with status $status"
    elif ! grep -q '^[a-z_]*: stopped' "$out"; then
      fail="the server did not report stopping"
    fi
  else
    fail="the server did not stop within $stop_wait s of SIGINT"
  fi
  if [ "$lg_status" != 0 ]; then
    fail="loadgen failed (status $lg_status)${fail:+; $fail}"
    echo "$bench_name: $what: loadgen's messages:" >&2
    show "$work/$tag.loadgen.err"
  fi
  if [ -n "$fail" ]; then
    r_note=$fail
    echo "$bench_name: $what: the server's messages:" >&2
    show "$err"
    return 1
  fi

  local j=''
  read -r j <"$work/$tag.loadgen.out"
  json_field r_msgs "$j" messages
  json_field r_rate "$j" msgs_per_s
  json_field r_p50 "$j" p50_us
  json_field r_p99 "$j" p99_us
  json_field r_p999 "$j" p999_us
  json_field r_max "$j" max_us
  json_field r_seconds "$j" duration_s
  json_field r_connect "$j" connect_s
  if [ -z "$r_msgs" ] || [ "$r_msgs" -eq 0 ]; then
    r_note="loadgen measured no messages"
    show "$work/$tag.loadgen.err"
    return 1
  fi

  if [ "$(wc -l <"$snapfile")" -eq 2 ]; then
    local -a s1 s2
    read -r -a s1 < <(sed -n 1p "$snapfile")
    read -r -a s2 < <(sed -n 2p "$snapfile")
    [ "${s2[5]:-}" = perf ] && s2[5]=$(perf_syscalls "$snapfile.perf")
    eval "$(awk -v m="$r_msgs" -v hz="$clk_tck" \
      -v u1="${s1[0]}" -v t1="${s1[1]}" -v v1="${s1[2]}" -v n1="${s1[3]}" \
      -v a1="${s1[4]}" -v u2="${s2[0]}" -v t2="${s2[1]}" -v v2="${s2[2]}" \
      -v n2="${s2[3]}" -v a2="${s2[4]}" -v y1="${s1[5]:--}" -v y2="${s2[5]:--}" '
      function num(x) { return x ~ /^[0-9]+$/ }
      BEGIN {
        if (num(u1) && num(u2)) {
          printf "r_utime=%.3f r_stime=%.3f r_cpu=%.3f\n",
            (u2 - u1) * 1e6 / hz / m, (t2 - t1) * 1e6 / hz / m,
            ((u2 - u1) + (t2 - t1)) * 1e6 / hz / m
          printf "r_vcsw=%.4f r_nvcsw=%.4f r_ctx=%.4f\n",
            (v2 - v1) / m, (n2 - n1) / m, ((v2 - v1) + (n2 - n1)) / m
        }
        if (num(a1) && num(a2)) printf "r_allocs=%.4f\n", (a2 - a1) / m
        if (num(y1) && num(y2)) printf "r_sys=%.4f\n", (y2 - y1) / m
      }')"
  else
    r_note="no server snapshots"
    show "$work/$tag.loadgen.err"
  fi
  r_status=ok
  return 0
}
