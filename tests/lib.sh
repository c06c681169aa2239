# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
# lib.sh - what the script tests and the benchmark drivers share: servers
# started in the background and the port they print, bounded waits, a stop
# as a user would make it, a temporary directory and an exit that kills
# only this script's own processes, the pass/fail counters, and the median
# for awk.  POSIX sh (dash and bash), clean under `set -u`.  Sourced
# relative to the script, which works from any directory, in a VPATH build
# and in distcheck's read-only source tree:
#
#     . "$(dirname "$0")/lib.sh"
#
# A server must print a line "... listening on HOST:PORT" once it accepts
# connections.  Every wait is bounded; TAXI_TEST_TIMEOUT_SCALE (a whole
# number, for slow builds such as sanitizers or wine; $scale here)
# multiplies the default bounds.  Names the library keeps for itself start
# with lib_.

# The counters of ok and bad.
pass=0 fail=0
# The processes the exit kills (see track), and the directory it removes.
lib_pids=''
lib_work=''
# What time limits are multiplied by.
scale=${TAXI_TEST_TIMEOUT_SCALE:-1}
case $scale in '' | *[!0-9]* | 0) scale=1 ;; esac
# small is 1 when TAXI_TEST_SMALL asks for the small sizes (the sanitizer,
# kqueue and wine builds): fewer connections, messages and seconds, the
# same checks.
small=0
case ${TAXI_TEST_SMALL:-0} in '' | 0) ;; *) small=1 ;; esac
# Seconds a server may take to print its port, and to stop once signalled;
# a script may set others (wine starts slowly).
start_wait=$((10 * scale))
stop_wait=$((10 * scale))

# need_built WHO FILE...: skip the script (exit 77, saying why) unless
# every FILE is built (exists: a Windows program is not executable here).
need_built() {
  lib_who=$1
  shift
  for lib_f in "$@"; do
    if [ ! -f "$lib_f" ]; then
      echo "$lib_who: SKIP: $lib_f is not built"
      exit 77
    fi
  done
}

# need_tools WHO TOOL...: skip the script unless every TOOL is installed.
need_tools() {
  lib_who=$1
  shift
  for lib_t in "$@"; do
    if ! command -v "$lib_t" >/dev/null 2>&1; then
      echo "$lib_who: SKIP: $lib_t is missing"
      exit 77
    fi
  done
}

# raise_nofile N: as many descriptors as N, or as the hard limit allows;
# sets nofile to what the script has then.
raise_nofile() {
  # shellcheck disable=SC3045 # ulimit -n: dash, bash and busybox sh have it
  { ulimit -n "$1" || ulimit -n "$(ulimit -H -n)"; } 2>/dev/null
  # shellcheck disable=SC3045
  nofile=$(ulimit -n)
}

# ok WHAT: a check passed; says so and counts it.
ok() {
  echo "ok: $1"
  pass=$((pass + 1))
}

# bad WHAT: a check failed; says so and counts it.
bad() {
  echo "FAIL: $1"
  fail=$((fail + 1))
}

# expect WHAT WANT GOT: ok when GOT is WANT, else bad with both.
expect() {
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got $3, expected $2"; fi
}

# tally WHY: count a check that failed for the reason WHY, or passed if
# WHY is empty, without a line (the script prints its own row); sets
# verdict to PASS or FAIL.
# shellcheck disable=SC2034 # verdict is the script's
tally() {
  if [ -z "$1" ]; then
    verdict=PASS pass=$((pass + 1))
  else
    verdict=FAIL fail=$((fail + 1))
  fi
}

# finish: the closing line "N passed, N failed", then exit 1 if a check
# failed, 77 (automake's skip) if none ran, else 0.
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ] || exit 1
  [ "$pass" -gt 0 ] || exit 77
  exit 0
}

# make_work NAME: a new directory $work (TMPDIR/taxi-NAME.XXXXXX), removed
# at the exit together with the processes still tracked.  SIGINT and
# SIGTERM exit through the same cleanup (dash runs the EXIT trap only on
# an exit).
make_work() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/taxi-$1.XXXXXX") || exit 1
  lib_work=$work
  trap lib_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# lib_cleanup: the exit trap: kill what this script started and still
# tracks (by process id, nothing else), remove its directory.
lib_cleanup() {
  for lib_p in $lib_pids; do
    kill -9 "$lib_p" 2>/dev/null
    wait "$lib_p" 2>/dev/null # reaped quietly: no "Killed" notice from bash
  done
  lib_pids=''
  if [ -n "$lib_work" ]; then rm -rf "$lib_work"; fi
}

# track PID...: processes of this script's for the exit to kill if they
# still run.
track() {
  lib_pids="$lib_pids $*"
}

# forget PID: one that was waited for: its id may since belong to another
# program, which the exit must not kill.
forget() {
  lib_rest=''
  for lib_p in $lib_pids; do
    [ "$lib_p" = "$1" ] || lib_rest="$lib_rest $lib_p"
  done
  lib_pids=$lib_rest
}

# wait_until SECONDS CMD...: run CMD every tenth of a second until it
# succeeds (return 0) or SECONDS have passed (return 1).  Where sleep takes
# whole seconds only, it sleeps a second and counts ten tenths.
wait_until() {
  lib_left=$(($1 * 10))
  shift
  until "$@"; do
    [ "$lib_left" -gt 0 ] || return 1
    lib_left=$((lib_left - 1))
    sleep 0.1 2>/dev/null || {
      sleep 1
      lib_left=$((lib_left - 9))
    }
  done
}

# wait_for FILE PATTERN [SECONDS]: wait (10 s by default) for a line that
# matches PATTERN (grep's basic regular expression) in FILE.
wait_for() {
  wait_until "${3:-10}" grep -q -e "$2" "$1"
}

# lib_gone PID: PID has ended (the shell has reaped it).
lib_gone() {
  ! kill -0 "$1" 2>/dev/null
}

# lib_port PID FILE: set port from the first "listening on HOST:PORT" line
# of FILE; succeeds once there is one, or once PID has ended (nothing more
# to wait for).
lib_port() {
  port=$(sed -n '/listening on [^ ]*:[0-9]/{
s/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p
q
}' "$2")
  [ -n "$port" ] || lib_gone "$1"
}

# wait_port PID FILE: wait ($start_wait s at most) for the server PID to
# print its port in FILE; sets port, or leaves it empty and returns 1 when
# PID ended first or the time ran out.
wait_port() {
  port=''
  wait_until "$start_wait" lib_port "$1" "$2"
  [ -n "$port" ]
}

# spawn OUT ERR CMD...: start the server CMD in the background, its stdout
# in OUT and its stderr in ERR (OUT again: both in one file), and wait for
# its port.  Sets pid (tracked) and port and returns 0; or, when it does
# not listen, kills it if it still runs, sets status to its exit status
# ("timeout" if it had to be killed), empties pid and returns 1.
spawn() {
  lib_out=$1 lib_err=$2
  shift 2
  # Emptied here: the server's own redirection happens in the child, and
  # until it does the file may still hold the last server's port.
  : >"$lib_out"
  if [ "$lib_err" = "$lib_out" ]; then
    "$@" >"$lib_out" 2>&1 &
  else
    "$@" >"$lib_out" 2>"$lib_err" &
  fi
  pid=$!
  track "$pid"
  wait_port "$pid" "$lib_out" && return 0
  if lib_gone "$pid"; then
    wait "$pid" 2>/dev/null
    status=$?
  else
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    status=timeout
  fi
  forget "$pid"
  pid=''
  return 1
}

# start_server NAME LOG CMD...: spawn CMD with all its output in LOG; when
# it does not listen, says so for NAME with LOG and returns 1.
start_server() {
  lib_name=$1 lib_log=$2
  shift 2
  spawn "$lib_log" "$lib_log" "$@" && return 0
  if [ "$status" = timeout ]; then
    echo "$lib_name did not start within $start_wait s:"
  else
    echo "$lib_name did not start (exit status $status):"
  fi
  cat "$lib_log"
  return 1
}

# wait_pid PID SECONDS: wait for the child PID to end, SECONDS at most,
# then kill it (-9).  Sets status to its exit status and forgets PID;
# returns 1 if it had to be killed.
wait_pid() {
  lib_ended=0
  wait_until "$2" lib_gone "$1" && lib_ended=1
  [ "$lib_ended" = 1 ] || kill -9 "$1" 2>/dev/null
  # (no "Killed" notices from the shell: the callers say what happened)
  wait "$1" 2>/dev/null
  status=$?
  forget "$1"
  [ "$lib_ended" = 1 ]
}

# stop_pid PID [SIGNAL]: send SIGNAL (INT, a user's Ctrl-C, by default)
# and wait_pid PID $stop_wait.
stop_pid() {
  kill -"${2:-INT}" "$1" 2>/dev/null
  wait_pid "$1" "$stop_wait"
}

# stop_server NAME LOG [PATTERN]: stop the server $pid as a user would
# (SIGINT): it must end by itself within $stop_wait s, with exit status 0
# and, with PATTERN, a line in LOG that matches it (its closing line).
# Otherwise says how for NAME, with LOG, and returns 1.  Empties pid.
stop_server() {
  lib_stopped=0
  stop_pid "$pid" && lib_stopped=1
  pid=''
  if [ "$lib_stopped" = 0 ]; then
    echo "$1 did not stop within $stop_wait s of SIGINT:"
  elif [ "$status" = 137 ] && [ "$lib_wine" = 1 ] && [ -n "${3:-}" ] &&
    grep -q -e "$3" "$2"; then
    # Under wine: the closing line comes after the program's teardown.
    # Once a process's last thread has ended, wineserver SIGKILLs its Unix
    # process if that has not exited within a short grace (server/process.c,
    # start_sigkill_timer), which a loaded host can exceed: wine's exit,
    # not the program's.
    echo "note: $1 closed, then wineserver killed the exiting process"
    return 0
  elif [ "$status" != 0 ]; then
    echo "$1 stopped with exit status $status:"
  elif [ -n "${3:-}" ] && ! grep -q -e "$3" "$2"; then
    echo "$1 stopped without a line matching '$3':"
  else
    return 0
  fi
  cat "$2"
  return 1
}

# wine_exe DIR NAME: the program DIR/NAME.exe of a Windows build itself,
# from DIR/.libs where libtool keeps it: its wrapper would run it as a
# child process, which ending the wrapper (to stop a server) would leave
# behind.
wine_exe() {
  if [ -f "$1/.libs/$2.exe" ]; then echo "$1/.libs/$2.exe"; else echo "$1/$2.exe"; fi
}

# wine_setup: for the programs of the Windows build in $builddir, run under
# wine: its DLL ($builddir/.libs) on wine's search path, and 30 s (scaled)
# to start, as wine starts slowly.
# shellcheck disable=SC2154 # builddir is the script's
lib_wine=0
wine_setup() {
  lib_wine=1
  WINEPATH="$(cd "$builddir" && pwd)/.libs${WINEPATH:+;$WINEPATH}"
  export WINEPATH
  start_wait=$((30 * scale))
}

# median_awk: awk functions for the benchmark drivers' awk programs (put
# it before the program).  median(LIST[, MEAN]): the median of the numbers
# in LIST (separated by spaces), "-" for none; of an even count, the lower
# of the two middle ones, or with MEAN their mean, written with as many
# decimals as it needs (one more than the values' when it ends in 5).
# With an odd count it is the middle value as written.
# shellcheck disable=SC2016,SC2034 # awk's own $; for the sourcing script
median_awk='
function lib_decimals(s) { return index(s, ".") ? length(s) - index(s, ".") : 0 }
function median(list, mean,    v, n, i, j, t, a, b, d, k) {
  n = split(list, v, " ")
  if (n == 0) return "-"
  for (i = 2; i <= n; i++) {          # insertion sort, numerically
    t = v[i]
    for (j = i - 1; j >= 1 && v[j] + 0 > t + 0; j--) v[j + 1] = v[j]
    v[j + 1] = t
  }
  if (n % 2) return v[(n + 1) / 2]
  if (!mean) return v[n / 2]
  a = v[n / 2]; b = v[n / 2 + 1]
  d = lib_decimals(a) > lib_decimals(b) ? lib_decimals(a) : lib_decimals(b)
  k = int((a + b) * 10 ^ d + 0.5)     # the sum in units of the last decimal
  if (k % 2 == 0) return sprintf("%." d "f", k / 2 / 10 ^ d)
  return sprintf("%." (d + 1) "f", k / 2 / 10 ^ d)
}
'
