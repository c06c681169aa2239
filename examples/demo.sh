#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# demo.sh DIR - run the echo example over every event backend that works on
# this machine, under every dispatcher, and print the round trips per second
# each combination managed.
#
# DIR holds echo_server and echo_client (e.g. the build's examples/).  For
# each backend that `echo_server --list-backends` prints and each dispatcher
# (reactor: one thread; lf: a Leader/Followers pool; hsha: a
# half-sync/half-async pool; the pools with the server's default options),
# and then for each completion backend that `echo_server
# --list-proactor-backends` prints, with the proactor dispatcher,
# the script starts a server on a free port, runs the client against it,
# stops the server with SIGINT and checks that it shut down cleanly.  A
# combination the library refuses (the server exits with status 3 before
# listening) shows as n/a and is not a failure.
#
# Environment:
#   DEMO_MESSAGES     round trips per connection (default 20000)
#   DEMO_CONNECTIONS  client connections (default 4)
#   DEMO_DISPATCHERS  the readiness dispatchers to run (default
#                     "reactor lf hsha")
#   DEMO_PROACTOR     0 to skip the proactor runs (default 1)
#
# Exits 0 if every combination passed or was refused, 1 otherwise (2 for
# bad usage).

set -u

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR   (DIR contains echo_server and echo_client)" >&2
  exit 2
fi
dir=$1
server=$dir/echo_server
client=$dir/echo_client
messages=${DEMO_MESSAGES:-20000}
connections=${DEMO_CONNECTIONS:-4}
dispatchers=${DEMO_DISPATCHERS:-reactor lf hsha}
proactor=${DEMO_PROACTOR:-1}

for prog in "$server" "$client"; do
  if [ ! -x "$prog" ]; then
    echo "demo: $prog not found or not executable" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/taxi-demo.XXXXXX") || exit 1
server_pid=
# Kill the server of a run that went wrong, if it is still there.
kill_server() {
  if [ -n "$server_pid" ]; then
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
  fi
}
# Whatever happens, do not leave a server running or files behind.
# shellcheck disable=SC2317 # reached through the trap
cleanup() {
  kill_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# `sleep 0.1` is not POSIX; fall back to whole seconds where it is refused.
if sleep 0.1 2>/dev/null; then tick=0.1 ticks_per_sec=10; else tick=1 ticks_per_sec=1; fi

# wait_bounded PID SECONDS - wait for a child process and set $wait_status
# to its exit status.  If it is still running after SECONDS, kill it and
# return 1.
wait_bounded() {
  rm -f "$work/killed"
  # The guard sleeps in short ticks so that, killed early, it leaves no long
  # sleep behind; its output goes to /dev/null so that such a sleep holds no
  # pipe open for whoever runs this script.
  (
    n=$(($2 * ticks_per_sec))
    while [ "$n" -gt 0 ]; do
      sleep "$tick"
      kill -0 "$1" 2>/dev/null || exit 0
      n=$((n - 1))
    done
    : >"$work/killed"
    kill -KILL "$1"
  ) >/dev/null 2>&1 &
  guard=$!
  wait "$1"
  wait_status=$?
  # KILL, not TERM: the guard may not yet have dropped the TERM trap it
  # inherited from this script, and would then survive a TERM.
  kill -KILL "$guard" 2>/dev/null
  wait "$guard" 2>/dev/null
  [ ! -e "$work/killed" ]
}

# Show a failed step's output, indented, to explain the failure.
show() {
  [ -s "$1" ] && sed 's/^/    | /' "$1" >&2
}

# run_config BACKEND DISPATCHER - one server/client run; sets $rate to the
# client's round trips per second and returns 0; or, if the server refuses
# the combination, sets $rate to n/a and returns 0; or explains the failure
# on stderr and returns 1.
run_config() {
  backend=$1
  name=$1/$2
  out=$work/$1.$2.server.out
  err=$work/$1.$2.server.err
  rate=

  : >"$out" # exists before the server opens it, for the loop below
  "$server" --port 0 --backend "$backend" --dispatcher "$2" \
    </dev/null >"$out" 2>"$err" &
  server_pid=$!

  # The server prints its address once it is listening.
  n=$((10 * ticks_per_sec))
  port=
  while :; do
    line=$(sed -n 1p "$out")
    case $line in
      *" listening on "*:*) port=${line##*:}; break ;;
    esac
    if ! kill -0 "$server_pid" 2>/dev/null; then
      wait "$server_pid"
      server_status=$?
      server_pid=
      if [ "$server_status" -eq 3 ]; then
        # The library refuses this combination here: not a failure.  Keep
        # the server's reason for the notes under the table.
        rate=n/a
        reason=$(sed -n '1s/^echo_server: //p' "$err")
        printf '%s: %s\n' "$name" "$reason" >>"$work/notes"
        return 0
      fi
      echo "demo: $name: the server exited with status $server_status" \
        "before listening" >&2
      show "$err"
      return 1
    fi
    n=$((n - 1))
    if [ "$n" -lt 0 ]; then
      echo "demo: $name: the server did not start within 10 s" >&2
      show "$err"
      return 1
    fi
    sleep "$tick"
  done
  case $port in
    '' | *[!0-9]*)
      echo "demo: $name: cannot read the port from: $line" >&2
      return 1 ;;
  esac

  # The client bounds its own run (30 s).
  client_ok=1
  "$client" --port "$port" --messages "$messages" \
    --connections "$connections" </dev/null >"$work/client.out" \
    2>"$work/client.err" || client_ok=0

  # Stop the server the way a user would, and check it reports and exits 0.
  kill -INT "$server_pid" 2>/dev/null
  if ! wait_bounded "$server_pid" 10; then
    server_pid=
    echo "demo: $name: the server did not stop within 10 s of SIGINT" >&2
    show "$err"
    return 1
  fi
  server_status=$wait_status
  server_pid=

  if [ "$client_ok" -ne 1 ]; then
    echo "demo: $name: the client failed" >&2
    show "$work/client.err"
    return 1
  fi
  if [ "$server_status" -ne 0 ]; then
    echo "demo: $name: the server exited with status $server_status" >&2
    show "$err"
    return 1
  fi
  if ! grep -q '^echo_server: stopped after ' "$out"; then
    echo "demo: $name: the server did not report stopping" >&2
    show "$out"
    show "$err"
    return 1
  fi
  # "echo_client: 4 connections, N round trips, X round trips/s, all verified"
  rate=$(sed -n 's/.*, \([0-9][0-9]*\) round trips\/s,.*/\1/p' "$work/client.out")
  if [ -z "$rate" ]; then
    echo "demo: $name: unexpected client output" >&2
    show "$work/client.out"
    return 1
  fi
  return 0
}

"$server" --list-backends >"$work/backends" 2>"$work/backends.err"
status=$?
if [ "$status" -ne 0 ] || [ ! -s "$work/backends" ]; then
  echo "demo: $server --list-backends failed or listed nothing" >&2
  show "$work/backends.err"
  exit 1
fi

echo "echo demo: $connections connections x $messages round trips per run"
printf '%-10s %-10s %15s\n' backend dispatcher round-trips/s
failures=0
while read -r backend_name; do
  [ -n "$backend_name" ] || continue
  for dispatcher in $dispatchers; do
    if run_config "$backend_name" "$dispatcher"; then
      printf '%-10s %-10s %15s\n' "$backend_name" "$dispatcher" "$rate"
    else
      kill_server
      printf '%-10s %-10s %15s\n' "$backend_name" "$dispatcher" FAILED
      failures=$((failures + 1))
    fi
  done
done <"$work/backends"

# The completion backends, each with the proactor dispatcher.
if [ "$proactor" != 0 ]; then
  "$server" --list-proactor-backends >"$work/proactors" 2>"$work/proactors.err" || {
    echo "demo: $server --list-proactor-backends failed" >&2
    show "$work/proactors.err"
    exit 1
  }
  while read -r backend_name; do
    [ -n "$backend_name" ] || continue
    if run_config "$backend_name" proactor; then
      printf '%-10s %-10s %15s\n' "$backend_name" proactor "$rate"
    else
      kill_server
      printf '%-10s %-10s %15s\n' "$backend_name" proactor FAILED
      failures=$((failures + 1))
    fi
  done <"$work/proactors"
fi

if [ -s "$work/notes" ]; then
  echo "n/a: not supported here:"
  sed 's/^/  /' "$work/notes"
fi
if [ "$failures" -ne 0 ]; then
  echo "demo: $failures run(s) failed" >&2
  exit 1
fi
exit 0
