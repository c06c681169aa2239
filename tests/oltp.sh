#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# oltp.sh - the OLTP example as a test: the back end under every dispatcher
# (the Leader/Followers pool, the half-sync/half-async pool, the Reactor,
# the Proactor) serves examples/oltp/oltp_client, which checks every reply
# and that an audit after the load finds the money it found before; then
# the three tiers, the client going through examples/oltp/oltp_frontend; a
# malformed command line is refused with status 2; the server stops on
# SIGINT with status 0 and its closing line.
# Ends with "N passed, N failed"; exits 77 when the programs are not built.

: "${builddir:=.}"
backend=$builddir/examples/oltp/oltp_backend
client=$builddir/examples/oltp/oltp_client
for p in "$backend" "$client"; do
  if [ ! -x "$p" ]; then
    echo "oltp.sh: SKIP: $p is not built"
    exit 77
  fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/taxi-oltp.XXXXXX") || exit 1
pid=''
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
pass=0 fail=0

verdict() { # verdict OK WHAT
  if [ "$1" = 1 ]; then
    echo "ok: $2"
    pass=$((pass + 1))
  else
    echo "FAIL: $2"
    fail=$((fail + 1))
  fi
}

# start NAME ARGS...: start the back end; sets $pid and $port (empty if it
# did not come up).
start() {
  out=$work/$1.out
  shift
  : >"$out" # now: the server's own redirection may come after a read
  "$backend" --port 0 "$@" >"$out" 2>&1 &
  pid=$!
  port=''
  i=0
  while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/^oltp_backend: .* listening on .*:\([0-9][0-9]*\)$/\1/p' "$out")
    [ -z "$port" ] && sleep 0.1
    i=$((i + 1))
  done
}

# stop: SIGINT; the server must exit 0 with its closing line.
stop() {
  stopped=1
  kill -INT "$pid" 2>/dev/null
  wait "$pid" || stopped=0
  pid=''
  grep -q "^oltp_backend: stopped after [0-9]* transactions" "$out" ||
    stopped=0
  [ $stopped = 1 ] || cat "$out"
  [ $stopped = 1 ]
}

for cfg in "lf 4" "hsha 4" "reactor 1" "proactor 3"; do
  set -- $cfg
  start "$1" --dispatcher "$1" --threads "$2" --accounts 100 --work 2
  ok=1
  if [ -z "$port" ]; then
    echo "$1: the back end did not start:"
    cat "$out"
    ok=0
  else
    # 100 accounts and 30 connections: transfers contend for accounts.
    "$client" --port "$port" --connections 30 --requests 300 --accounts 100 \
      --time-limit 60 >"$work/client.out" 2>&1 || ok=0
    grep -q "all verified, audit 100000000 conserved" "$work/client.out" ||
      ok=0
    [ $ok = 1 ] || cat "$work/client.out"
    stop || ok=0
  fi
  verdict $ok "back end with $1 ($2 threads): $(cat "$work/client.out")"
done

# The three tiers: the front end (a hybrid L/F pool: client streams
# unbound, the back-end links bound) between the client and the back end.
# 4 front-end threads and 40 clients, so every thread waits on the back
# end at once while requests and replies must still flow.
frontend=$builddir/examples/oltp/oltp_frontend
if [ -x "$frontend" ]; then
  start tiers --dispatcher lf --threads 4 --accounts 100 --work 2
  back_pid=$pid back_out=$out back_port=$port
  ok=1
  fout=$work/frontend.out
  : >"$fout"
  "$frontend" --port 0 --backend-port "$back_port" --links 2 --threads 4 \
    >"$fout" 2>&1 &
  front_pid=$!
  fport='' i=0
  while [ $i -lt 100 ] && [ -z "$fport" ]; do
    fport=$(sed -n 's/^oltp_frontend: .* listening on .*:\([0-9][0-9]*\)$/\1/p' "$fout")
    [ -z "$fport" ] && sleep 0.1
    i=$((i + 1))
  done
  if [ -z "$fport" ]; then
    echo "the front end did not start:"
    cat "$fout"
    ok=0
  else
    "$client" --port "$fport" --connections 40 --requests 200 --accounts 100 \
      --time-limit 60 >"$work/client.out" 2>&1 || ok=0
    grep -q "all verified, audit 100000000 conserved" "$work/client.out" ||
      ok=0
    [ $ok = 1 ] || cat "$work/client.out"
  fi
  kill -INT "$front_pid" 2>/dev/null
  wait "$front_pid" || {
    status=$?
    ok=0
    echo "the front end's exit status: $status"
  }
  grep -q "^oltp_frontend: stopped after 8002 transactions relayed, 0 unavailable" \
    "$fout" || { ok=0; cat "$fout"; }
  pid=$back_pid out=$back_out
  stop || ok=0
  verdict $ok "client - front end (hybrid L/F) - back end: $(cat "$work/client.out")"
  # Bad command lines of the front end.
  for args in "--links 2" "--backend-port 0" "--backend-port $back_port --links 0" \
    "--backend-port $back_port --bogus"; do
    # shellcheck disable=SC2086 # the words are the arguments
    "$frontend" $args >"$work/bad.out" 2>&1
    status=$?
    ok=0
    [ $status = 2 ] && [ -s "$work/bad.out" ] && ok=1
    verdict $ok "oltp_frontend $args: status $status"
  done
fi

# Bad command lines: status 2, a message, no server left behind.
for args in "--dispatcher nosuch" "--threads 0" "--accounts 1" "--port 70000" \
  "--bogus"; do
  # shellcheck disable=SC2086 # the words are the arguments
  "$backend" $args >"$work/bad.out" 2>&1
  status=$?
  ok=0
  [ $status = 2 ] && [ -s "$work/bad.out" ] && ok=1
  verdict $ok "oltp_backend $args: status $status"
done
"$client" --connections 2 >"$work/bad.out" 2>&1
status=$?
ok=0
[ $status = 2 ] && ok=1
verdict $ok "oltp_client without --port: status $status"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
