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
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
backend=$builddir/examples/oltp/oltp_backend
client=$builddir/examples/oltp/oltp_client
need_built oltp.sh "$backend" "$client"
make_work oltp

verdict() { # verdict OK WHAT
  if [ "$1" = 1 ]; then ok "$2"; else bad "$2"; fi
}

# start NAME ARGS...: start the back end; sets $pid and $port, or says why
# it did not come up and returns 1.
start() {
  out=$work/$1.out name=$1
  shift
  start_server "$name: the back end" "$out" "$backend" --port 0 "$@"
}

# stop: SIGINT; the server must exit 0 with its closing line.
stop() {
  stop_server "the back end" "$out" \
    "^oltp_backend: stopped after [0-9]* transactions"
}

# The small sizes (TAXI_TEST_SMALL): fewer connections and requests; the
# front end's 20 clients still outnumber its threads.
back_conns=30 back_reqs=300 tier_conns=40 tier_reqs=200
[ "$small" = 1 ] && back_conns=10 back_reqs=100 tier_conns=20 tier_reqs=100
for cfg in "lf 4" "hsha 4" "reactor 1" "proactor 3"; do
  set -- $cfg
  ok=1
  if ! start "$1" --dispatcher "$1" --threads "$2" --accounts 100 --work 2
  then
    ok=0
  else
    # 100 accounts and 30 connections: transfers contend for accounts.
    "$client" --port "$port" --connections $back_conns --requests $back_reqs --accounts 100 \
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
  if start_server "the front end" "$fout" "$frontend" --port 0 \
    --backend-port "$back_port" --links 2 --threads 4; then
    "$client" --port "$port" --connections $tier_conns --requests $tier_reqs --accounts 100 \
      --time-limit 60 >"$work/client.out" 2>&1 || ok=0
    grep -q "all verified, audit 100000000 conserved" "$work/client.out" ||
      ok=0
    [ $ok = 1 ] || cat "$work/client.out"
    stop_server "the front end" "$fout" \
      "^oltp_frontend: stopped after $((tier_conns * tier_reqs + 2)) transactions relayed, 0 unavailable" ||
      ok=0
  else
    ok=0
  fi
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

finish
