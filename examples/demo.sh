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
# Starting a server, its port, bounded waits, the cleanup at exit.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../tests/lib.sh"

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

# Whatever happens, do not leave a server running or files behind.
make_work demo

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

  # The server prints its address once it is listening.
  if ! spawn "$out" "$err" "$server" --port 0 --backend "$backend" \
    --dispatcher "$2"; then
    if [ "$status" = 3 ]; then
      # The library refuses this combination here: not a failure.  Keep
      # the server's reason for the notes under the table.
      rate=n/a
      reason=$(sed -n '1s/^echo_server: //p' "$err")
      printf '%s: %s\n' "$name" "$reason" >>"$work/notes"
      return 0
    fi
    if [ "$status" = timeout ]; then
      echo "demo: $name: the server did not start within $start_wait s" >&2
    else
      echo "demo: $name: the server exited with status $status" \
        "before listening" >&2
    fi
    show "$err"
    return 1
  fi

  # The client bounds its own run (30 s).
  client_ok=1
  "$client" --port "$port" --messages "$messages" \
    --connections "$connections" </dev/null >"$work/client.out" \
    2>"$work/client.err" || client_ok=0

  # Stop the server the way a user would, and check it reports and exits 0.
  if ! stop_pid "$pid"; then
    echo "demo: $name: the server did not stop within $stop_wait s of SIGINT" >&2
    show "$err"
    return 1
  fi
  server_status=$status

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
