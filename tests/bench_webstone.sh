#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2154 # ws_port is set by servers.sh
# bench_webstone.sh - a smoke test of the web load generator
# (tests/bench/webstone): it makes a docroot, starts a stock web server on
# it (nginx or lighttpd where installed, else python3's http.server; see
# tests/bench/webstone/servers.sh) and runs 20 clients briefly over the
# file mix with Connection: close and over the 5 KB file with keep-alive,
# every byte verified, which must succeed.  Then it proves the verification
# works: a server whose copy of the docroot has one byte changed must fail
# the run with "wrong bytes", and servers that answer 404, cut the body,
# send a wrong Content-Length, close at once or never answer
# (tests/bench/webstone/fake_server.py) must fail it with their kind of
# error; bad usage exits 2.  No timing is checked.  Skipped (77) where
# webstone was not built or no server starts.  WEBSTONE_SERVERS names the
# servers to try, in order (default: nginx lighttpd python).
#
# Automake runs tests from the build directory with $srcdir exported; when
# run by hand from anywhere, the defaults below find the same files.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
webstone=$builddir/tests/bench/webstone/webstone
if [ ! -x "$webstone" ]; then
  echo "bench_webstone: $webstone not built; skipped"
  exit 77
fi
# shellcheck source=tests/bench/webstone/servers.sh disable=SC1091
. "$srcdir/tests/bench/webstone/servers.sh"
make_work webstone-test
# The server's workers may run as another user: let them read the files.
chmod 755 "$work"

if ! "$webstone" --make-docroot "$work/docroot" >"$work/make.log" 2>&1; then
  echo "bench_webstone: --make-docroot failed:"
  cat "$work/make.log"
  exit 1
fi

server=''
for kind in ${WEBSTONE_SERVERS:-nginx lighttpd python}; do
  if ws_server_start "$kind" "$work/docroot" "$work/$kind" 2>"$work/start.log"; then
    server=$kind
    break
  fi
  echo "bench_webstone: $kind: $(head -n 1 "$work/start.log")"
done
if [ -z "$server" ]; then
  echo "bench_webstone: no web server could be started; skipped"
  exit 77
fi
echo "bench_webstone: $server on port $ws_port"

failed=0
# run NAME ARGS...: webstone against the server, which must succeed.
run() {
  name=$1
  shift
  if "$webstone" --port "$ws_port" --docroot "$work/docroot" --clients 20 \
    --warmup 0.2 --duration 2 --time-limit 60 "$@" >"$work/run.log" 2>&1; then
    echo "bench_webstone: $server, $name: $(head -n 1 "$work/run.log")"
  else
    echo "bench_webstone: $server, $name failed:"
    cat "$work/run.log"
    failed=1
  fi
}
run "mix, Connection: close" --mix
run "5000 B, keep-alive" --size 5000 --keep-alive
ws_server_stop

# A docroot whose served copy differs by one byte from the one webstone
# verifies against.
cp -R "$work/docroot" "$work/altered"
printf 'Z' | dd of="$work/altered/size/5000.bin" bs=1 seek=1234 conv=notrunc \
  2>/dev/null
if cmp -s "$work/docroot/size/5000.bin" "$work/altered/size/5000.bin"; then
  echo "bench_webstone: the altered copy did not change"
  exit 1
fi
if ! ws_server_start "$server" "$work/altered" "$work/$server-altered" \
  2>"$work/start.log"; then
  echo "bench_webstone: $server did not start on the altered copy:"
  cat "$work/start.log"
  exit 1
fi
if "$webstone" --port "$ws_port" --docroot "$work/docroot" --clients 4 \
  --warmup 0 --duration 0.5 --time-limit 60 --size 5000 >"$work/run.log" 2>&1; then
  echo "bench_webstone: a changed byte went unnoticed:"
  cat "$work/run.log"
  failed=1
elif grep -q "wrong bytes: byte 1234 differs" "$work/run.log" &&
  grep -q "errors:.*wrong bytes [1-9]" "$work/run.log"; then
  echo "bench_webstone: $server, one byte changed: failed with wrong bytes, as it should"
else
  echo "bench_webstone: a changed byte failed the run, but not as wrong bytes:"
  cat "$work/run.log"
  failed=1
fi
ws_server_stop

# Bad usage exits 2; a docroot without the files exits 1 with the reason.
"$webstone" --port 0 --docroot "$work/docroot" >"$work/run.log" 2>&1
status=$?
if [ "$status" -ne 2 ]; then
  echo "bench_webstone: --port 0 exited $status, not 2"
  failed=1
fi
"$webstone" --port 1 --docroot "$work/nowhere" >"$work/run.log" 2>&1
status=$?
if [ "$status" -ne 1 ] || ! grep -q "nowhere/mix/.*--make-docroot" "$work/run.log"; then
  echo "bench_webstone: a missing docroot was not reported (status $status):"
  cat "$work/run.log"
  failed=1
fi

# A server that misbehaves in one way per run: each failure must be
# counted as its kind.
for case in "status:bad status" "short:short body" "length:wrong bytes" \
  "drop:reset" "silent:timeout"; do
  mode=${case%%:*} kind=${case#*:}
  : >"$work/fake.port"
  python3 "$srcdir/tests/bench/webstone/fake_server.py" "$mode" \
    "$work/docroot/size/5000.bin" >"$work/fake.port" 2>&1 &
  # shellcheck disable=SC2034 # read by ws_server_stop (servers.sh)
  ws_pid=$!
  track "$ws_pid"
  wait_until 10 test -s "$work/fake.port"
  "$webstone" --port "$(cat "$work/fake.port")" --docroot "$work/docroot" \
    --clients 2 --size 5000 --warmup 0 --duration 0.5 --timeout 0.2 \
    --time-limit 30 >"$work/run.log" 2>&1
  status=$?
  ws_server_stop
  if [ "$status" -eq 1 ] && grep -q "errors:.* $kind [1-9]" "$work/run.log"; then
    echo "bench_webstone: a server answering '$mode': failed with $kind, as it should"
  else
    echo "bench_webstone: a server answering '$mode' did not fail with $kind (status $status):"
    cat "$work/fake.port" "$work/run.log"
    failed=1
  fi
done
exit $failed
