#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_peers.sh - a smoke test of the benchmark against peers: every peer
# echo server that was built (tests/bench/peers) echoes 4 KiB messages byte
# for byte under loadgen, over kept connections and over a connection per
# message (--mode cec, which it must close cleanly), and stops cleanly on
# SIGINT, and
# tests/bench/peers.sh completes one short run and writes its table and
# CSV file.  No timing is checked; skipped (77) where loadgen was not built.
# A peer that fails gets a second try with a new server; only the bare
# io_uring loop (not taxi) may fail both and leave just a warning.
#
# Automake runs tests from the build directory with $srcdir exported; when
# run by hand from anywhere, the defaults below find the same files.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
loadgen=$builddir/tests/bench/loadgen
peers=$builddir/tests/bench/peers
if [ ! -x "$loadgen" ]; then
  echo "bench_peers: $loadgen not built; skipped"
  exit 77
fi
make_work peers-test
failed=0

# serve PROG SIZE: start the peer server, drive it, stop it.
serve() {
  prog=$1 size=$2 name=$(basename "$1")
  if ! spawn "$work/out" "$work/err" "$prog" --port 0; then
    case $status in
      1 | 2 | 3)
        if [ "$name" = uring_floor ]; then
          echo "bench_peers: $name refused to start here (skipped): $(head -n 1 "$work/err")"
          return 0
        fi ;;
    esac
    echo "bench_peers: $name did not start (status $status):"
    cat "$work/err"
    return 1
  fi
  # Round trips over kept connections, then a connection per round trip
  # (--mode cec: the peer must close its side cleanly after each).
  for mode in echo cec; do
    if ! "$loadgen" --port "$port" --connections 20 --threads 1 --size "$size" \
      --mode "$mode" --warmup 0.1 --duration 0.3 --time-limit 60 \
      >"$work/lg.$mode" 2>&1; then
      echo "bench_peers: $name, $size-byte messages, --mode $mode: loadgen failed:"
      cat "$work/lg.$mode" "$work/out" "$work/err"
      # Whether the server was still there tells a refused connection from
      # a dead server (and which signal ended it).
      if kill -0 "$pid" 2>/dev/null; then
        echo "bench_peers: $name was still running (pid $pid)"
        command -v ss >/dev/null && ss -ltn "sport = :$port"
        stop_pid "$pid" KILL
      else
        wait_pid "$pid" 0
        echo "bench_peers: $name had ended, status $status" \
          "($([ "$status" -gt 128 ] && kill -l "$status"))"
      fi
      return 1
    fi
  done
  if ! stop_server "bench_peers: $name" "$work/out" "^$name: stopped after"
  then
    cat "$work/err"
    return 1
  fi
  echo "bench_peers: $name, $size-byte messages: $(cat "$work/lg.echo")"
  echo "bench_peers: $name, --mode cec: $(cat "$work/lg.cec")"
}

tested=0
for name in epoll_floor uring_floor libevent_echo libuv_echo asio_echo; do
  if [ ! -x "$peers/$name" ]; then
    echo "bench_peers: $name not built; not tested"
    continue
  fi
  # A second try with a new server tells a one-off (reported above) from
  # a peer that does not work here.
  if ! serve "$peers/$name" 4096; then
    echo "bench_peers: $name: a second try with a new server"
    if serve "$peers/$name" 4096; then
      :
    elif [ "$name" = uring_floor ]; then
      # The bare io_uring loop is the benchmark's floor, not taxi: on a
      # machine where it fails twice (see above) the benchmark goes
      # without that row, and this says so instead of failing the suite.
      echo "bench_peers: WARNING: uring_floor failed twice here; not counted"
    else
      failed=1
    fi
  fi
  tested=$((tested + 1))
done

# The harness, with the first peer built (or else taxi's reactor alone),
# one short run: it must complete and record the run as ok.
only=reactor
[ -x "$peers/epoll_floor" ] && only=epoll-floor
if bash "$srcdir/tests/bench/peers.sh" --builddir "$builddir" --only "$only" \
  --connections 20 --sizes 64 --warmup 0.1 --duration 0.3 --out "$work/results" \
  >"$work/harness" 2>&1 &&
  grep -q "^64,20,$only,.*,ok," "$work/results/results.csv" &&
  grep -q "^$only " "$work/results/table.txt"; then
  echo "bench_peers: peers.sh --only $only: ok"
else
  echo "bench_peers: peers.sh --only $only failed:"
  cat "$work/harness"
  failed=1
fi

# --rounds: two rounds of two servers, the ratios to the second.  Every
# run is recorded with its round, the second round starts with the other
# server, and the table gives the range of the CPU ratio.
second=reactor
[ "$only" = reactor ] && second=lf
if bash "$srcdir/tests/bench/peers.sh" --builddir "$builddir" --only "$only" \
  --only "$second" --rounds 2 --reference "$second" --connections 20 \
  --sizes 64 --warmup 0.1 --duration 0.3 --out "$work/rounds" \
  >"$work/rounds.harness" 2>&1 &&
  [ "$(grep -c "^64,20,[a-z-]*,.*,ok,.*,[12]\$" "$work/rounds/results.csv")" = 4 ] &&
  [ "$(sed -n 2p "$work/rounds/results.csv" | cut -d, -f3)" = "$only" ] &&
  [ "$(grep ',2$' "$work/rounds/results.csv" | head -1 | cut -d, -f3)" = "$second" ] &&
  grep -q "^$only .*cpu x [0-9.]*-[0-9.]*" "$work/rounds/table.txt"; then
  echo "bench_peers: peers.sh --rounds 2 --reference $second: ok"
else
  echo "bench_peers: peers.sh --rounds 2 --reference $second failed:"
  cat "$work/rounds.harness" "$work/rounds/results.csv"
  failed=1
fi

# The datagram echo (--mode udp): the floor, libuv's where built, and
# udp_echo on the Reactor, one short run each; every echo is checked by
# loadgen, and each row must be recorded as ok.
udp_only=(--only reactor)
for p in udp_floor:udp-floor libuv_udp_echo:libuv; do
  [ -x "$peers/${p%%:*}" ] && udp_only+=(--only "${p#*:}")
done
if bash "$srcdir/tests/bench/peers.sh" --builddir "$builddir" --mode udp \
  "${udp_only[@]}" --connections 20 --sizes 64 --warmup 0.1 --duration 0.3 \
  --out "$work/udp" >"$work/udp.harness" 2>&1 &&
  [ "$(grep -c "^64,20,[a-z-]*,.*,ok," "$work/udp/results.csv")" = $((${#udp_only[@]} / 2)) ]; then
  echo "bench_peers: peers.sh --mode udp ${udp_only[*]}: ok"
else
  echo "bench_peers: peers.sh --mode udp ${udp_only[*]} failed:"
  cat "$work/udp.harness"
  failed=1
fi

echo "bench_peers: $tested peer server(s) tested"
exit $failed
