#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# udp_echo.sh - examples/udp_echo as a test: on every dispatcher x backend
# pair this build has (the readiness backends under reactor, lf and hsha,
# the completion backends under proactor and proactors, as
# examples/echo_server lists them), the server and a client of datagrams
# of random sizes up to 65,507 bytes (every byte checked), over IPv4 and,
# where the host has it, IPv6; a client given the name localhost
# (resolved by the library's resolver threads; an address of the name
# that refuses is left for the next); then the server's stop on SIGINT.  A pair
# that does not work here (exit status 3) is skipped, said so.  Then
# --handoff-us: an L/F server given 400 answers, and a value out of
# 1..10000 is a usage error (exit status 2).  Ends with
# "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
prog=$builddir/examples/udp_echo
need_built udp_echo.sh "$prog"
make_work udp_echo

count=100
[ "$small" = 1 ] && count=30

lister=$builddir/examples/echo_server
need_built udp_echo.sh "$lister"
pairs=
for b in $("$lister" --list-backends); do
  case $b in *:*) continue ;; esac # a method of the backend before it
  for d in reactor lf hsha; do pairs="$pairs $d/$b"; done
done
for b in $("$lister" --list-proactor-backends); do
  case $b in *:*) continue ;; esac
  for d in proactor proactors; do pairs="$pairs $d/$b"; done
done

# echoed LABEL ADDRESS COUNT [CLIENT-ARGS...]: a client of COUNT
# datagrams to ADDRESS, every one verified: "ok LABEL", else "bad" with
# the client's output.
echoed() {
  label=$1 address=$2 n=$3
  shift 3
  if "$prog" client --address "$address" --count "$n" \
    --time-limit $((60 * scale)) "$@" >"$work/client.out" 2>&1 &&
    grep -q "all verified" "$work/client.out"; then
    ok "$label"
  else
    bad "$label: the client:"
    cat "$work/client.out"
  fi
}

for pair in $pairs; do
  dispatcher=${pair%/*}
  backend=${pair#*/}
  for host in 127.0.0.1 '[::1]'; do
    out=$work/server-$dispatcher-$backend.out
    if ! spawn "$out" "$out" "$prog" server --address "$host:0" \
      --dispatcher "$dispatcher" --backend "$backend"; then
      case $status in
        3) echo "$pair: SKIP: this pair does not work here" ;;
        *)
          if [ "$host" = '[::1]' ]; then
            echo "$pair: SKIP: no IPv6 here"
          else
            bad "$pair: the server did not start (status $status)"
            cat "$out"
          fi
          ;;
      esac
      break
    fi
    echoed "$pair: $count datagrams echoed over $host" "$host:$port" \
      $count --dispatcher "$dispatcher" --backend "$backend"
    if [ "$host" = 127.0.0.1 ]; then
      echoed "$pair: echoed by the name localhost" "localhost:$port" 10 \
        --dispatcher "$dispatcher" --backend "$backend"
    fi
    stop_server "$pair: the server" "$out" "stopped after" ||
      bad "$pair: the server's stop"
  done
done

out=$work/server-handoff.out
if spawn "$out" "$out" "$prog" server --dispatcher lf --handoff-us 400; then
  echoed "lf --handoff-us 400: 10 datagrams echoed" "127.0.0.1:$port" 10
  stop_server "lf --handoff-us 400" "$out" "stopped after" ||
    bad "lf --handoff-us 400: the server's stop"
else
  bad "lf --handoff-us 400: the server did not start (status $status)"
  cat "$out"
fi
for us in 0 10001 20us; do
  "$prog" server --dispatcher lf --handoff-us "$us" >"$work/usage.out" 2>&1
  rc=$?
  if [ "$rc" = 2 ] && grep -q -- "--handoff-us" "$work/usage.out"; then
    ok "--handoff-us $us: refused"
  else
    bad "--handoff-us $us: exit status $rc, not 2"
    cat "$work/usage.out"
  fi
done
finish
