#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2059 # the printf formats are our own
# peers.sh - taxi's dispatchers against other event libraries and two bare
# loops, side by side, on the echo benchmark.
#
#   tests/bench/peers.sh [--builddir DIR] [--quick] [--connections LIST]
#                        [--sizes LIST] [--client-threads T]
#                        [--server-threads N] [--warmup SEC] [--duration SEC]
#                        [--only NAME]... [--mode echo|cec|udp] [--out DIR]
#                        [--rounds N] [--reference NAME]
#
# For each message size (default 64 and 4096 bytes) and each number of
# connections (default 100, 1000 and 10000), every server below runs in
# turn against tests/bench/loadgen (closed-loop ping-pong, one client
# thread by default), one after the other, each measured as bench.sh
# measures (see run.sh): the server runs with the malloc_count preload and
# is snapshotted, idle, before and after the measured phase.
#
# The servers, by the names the table uses:
#
#   asio         Boost.Asio: one io_context run by N threads (peers/asio_echo)
#   libevent     libevent 2: bufferevents, one thread (peers/libevent_echo)
#   libuv        libuv: one loop, one thread (peers/libuv_echo)
#   epoll-floor  a bare level-triggered epoll loop, recv + send, one thread
#   uring-floor  a bare io_uring loop: multishot accept, multishot recv into
#                a provided buffer ring, send; one ring, one thread
#   reactor      taxi's Reactor over epoll, one thread
#   reactor-1t   the same, the context TAXI_IO_ONE_THREAD (--one-thread):
#                its streams take no lock
#   lf           taxi's Leader/Followers pool over epoll, N threads
#   lf-eager     the same, a thread keeping only 20 us of its batch for
#                itself before it wakes a follower for the rest
#                (--handoff-us 20, the default before it became 1000)
#   hsha         taxi's half-sync/half-async pool over epoll, N workers
#   uring        taxi's Proactor over io_uring, dispatched by 1 thread
#   uring-1t     the same, the context TAXI_IO_ONE_THREAD (--one-thread)
#   uring-Nt     the same, dispatched by N threads (Leader/Followers, one
#                ring)
#   uring-rings-Nt  the same, a proactor per thread (--dispatcher
#                proactors): N threads, a ring each
#   uring-pooled examples/proactor_echo: the Proactor alone, no stream layer;
#                one multishot read per connection into the proactor's
#                buffer pool, echoed from those buffers; 1 thread, 1 ring
#   uring-pooled-Nt  the same, N threads, one ring (proactor) per thread
#   aio          taxi's Proactor over POSIX aio, 1 thread
#   emulated     taxi's Proactor emulated over the epoll Reactor, 1 thread
#
# (N is --server-threads, default 2.)  taxi's servers are
# examples/echo_server, called through its flags only; the others are built
# from tests/bench/peers/ where configure found their library.  A server
# that was not built, or that echo_server does not list, is skipped with a
# message; one that refuses to start here (io_uring disabled, say) shows as
# n/a.
#
# --mode cec (connect, echo, close) makes every round trip a connection of
# its own: loadgen connects, sends one message, reads its echo and closes,
# and the server closes its side at that end.  A "message" in the columns
# is then a connection, and cpu is the server's CPU per connection:
# accepting it, setting it up, one echo, tearing it down.  The default
# cell is then 50 connections at a time, 64-byte messages (WebSTONE's
# clients, a connection per request).  The goal for taxi's readiness
# servers: no more than 1.1 times the epoll floor's CPU per connection.
#
# --mode udp is the datagram echo: loadgen's peers are UDP sockets (each
# sends one datagram and waits for its echo, checked whole), the servers
# the datagram servers below, udp-floor the reference.  The default cells
# are 1 and 100 peers ("connections"), 64 and 1,200 bytes.  The goal for
# taxi's readiness dispatchers: no more than 1.1 times udp-floor's CPU per
# datagram, and no allocation per datagram.  The datagram servers:
#
#   udp-floor    a bare loop: epoll, then recvmmsg of up to 64 datagrams and
#                one sendmmsg of their echoes, 1 thread (peers/udp_floor)
#   libuv        libuv's uv_udp_t with recvmmsg, uv_udp_try_send, 1 thread
#                (peers/libuv_udp_echo)
#   reactor      examples/udp_echo on taxi's Reactor over epoll, 1 thread
#   lf           the same on Leader/Followers, N threads
#   hsha         the same on half-sync/half-async, N workers
#   uring        the same on the Proactor over io_uring, 1 thread: 64 KiB
#                buffers, one multishot receive into the proactor's group
#                of provided buffers of that size
#   uring-pooled the same with --recv-size 2048: one multishot receive into
#                the proactor's pool of provided buffers
#
# A row is one line of UDP_SERVERS below ("udp:DISPATCHER ARGS" runs
# examples/udp_echo server with those arguments): a dispatcher that gains
# datagram endpoints is one more line.
#
# Columns, per message: msgs/s (round trips per second), p99 (round-trip
# latency, microseconds), cpu (server CPU time, user + system, all
# threads, microseconds), sys (server system calls, counted by `perf stat -e
# raw_syscalls:sys_enter`), ctx (server context switches, voluntary +
# involuntary), allocs (server malloc-family calls).  Next to each, its
# ratio to asio's figure in the same cell, or with --reference NAME to
# NAME's ("-" where either is unknown).
#
# Output: progress on stderr while it runs, the tables on stdout (also in
# OUT/table.txt), every run in OUT/results.csv, and where gnuplot is found
# the charts OUT/msgs-SIZE.svg and OUT/cpu-SIZE.svg (msgs/s and CPU per
# message against connections, one line per server).  OUT defaults to
# DIR/tests/bench/peers-results.
#
# A full sweep (12 servers x 3 connection counts x 2 sizes) takes about 15
# minutes; --quick (100 and 10000 connections, 64-byte messages, short
# runs) about 2.  The connections need as many descriptors in loadgen and
# in the server: the soft RLIMIT_NOFILE is raised as far as the hard limit
# allows, and a connection count beyond it, or beyond the local port range
# on loopback, is skipped with a message.
#
# --rounds N runs each cell N times over, the servers in turn each round and
# the round's first server one further on each time (round 2 starts with
# the second).  A host whose speed drifts over minutes moves every server
# of a round alike, so a ratio taken within one round is steadier than
# one taken across the sweep: the table then shows each figure's median
# over the rounds, and each ratio as the median of the N ratios measured
# within a round, with their range for cpu.  results.csv has every run
# (its last column the round).
#
# Exit status: 0, or 1 if some run failed (2 for bad usage).

if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

usage() {
  cat <<EOF
usage: $0 [options]
  --builddir DIR        the build tree (default: .)
  --quick               a smoke test: 100 and 10000 connections, 64 B, short
  --connections LIST    comma-separated connection counts (default 100,1000,10000)
  --sizes LIST          comma-separated message sizes (default 64,4096)
  --client-threads T    loadgen threads (default 1)
  --server-threads N    threads of asio, lf, hsha and the -Nt servers
                        (default 2)
  --warmup SEC          warm-up per run (default 1; doubled from 5000
                        connections on; --quick: 0.5)
  --duration SEC        measured seconds per run (default 5; --quick: 1)
  --mode echo|cec|udp   echo: connections kept open (default); cec: a
                        connection per round trip (connect, echo, close;
                        default cell 50 connections x 64 B); udp: the
                        datagram echo (default cells 1 and 100 peers x
                        64 and 1200 B)
  --only NAME           only this server (repeatable): asio libevent libuv
                        epoll-floor uring-floor reactor lf hsha uring
                        uring-Nt uring-rings-Nt uring-pooled
                        uring-pooled-Nt aio emulated
  --out DIR             results directory (default DIR/tests/bench/peers-results)
  --reference NAME      the server the ratios are to (default asio; with
                        --mode udp, udp-floor)
  --rounds N            run each cell N times, the servers' order turned by
                        one each round; figures are medians, ratios the
                        median of each round's own (default 1)
EOF
}

builddir=. quick=0 connections_list='' sizes_list='' client_threads=1
server_threads=2 warmup='' duration='' out='' only=() mode=echo rounds=1 reference=''
need_value() {
  if [ $# -lt 2 ]; then
    echo "peers: $1 needs a value" >&2
    usage >&2
    exit 2
  fi
}
while [ $# -gt 0 ]; do
  case $1 in
    --builddir) need_value "$@"; builddir=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --connections) need_value "$@"; connections_list=$2; shift 2 ;;
    --sizes) need_value "$@"; sizes_list=$2; shift 2 ;;
    --client-threads) need_value "$@"; client_threads=$2; shift 2 ;;
    --server-threads) need_value "$@"; server_threads=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --duration) need_value "$@"; duration=$2; shift 2 ;;
    --only) need_value "$@"; only+=("$2"); shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --mode) need_value "$@"; mode=$2; shift 2 ;;
    --rounds) need_value "$@"; rounds=$2; shift 2 ;;
    --reference) need_value "$@"; reference=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "peers: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case $mode in
  echo) ;;
  cec)
    : "${connections_list:=50}" "${sizes_list:=64}" ;;
  udp)
    : "${connections_list:=1,100}" "${sizes_list:=64,1200}" ;;
  *) echo "peers: --mode: '$mode' is not echo, cec or udp" >&2; exit 2 ;;
esac
loadgen_mode=$mode
if [ "$quick" = 1 ]; then
  : "${connections_list:=100,10000}" "${sizes_list:=64}" "${warmup:=0.5}" "${duration:=1}"
else
  : "${connections_list:=100,1000,10000}" "${sizes_list:=64,4096}" "${warmup:=1}" "${duration:=5}"
fi
IFS=, read -r -a conn_counts <<<"$connections_list"
IFS=, read -r -a sizes <<<"$sizes_list"
for v in "${conn_counts[@]}" "${sizes[@]}" "$client_threads" "$server_threads" "$rounds"; do
  if ! [[ $v =~ ^[1-9][0-9]*$ ]]; then
    echo "peers: '$v' is not a positive whole number" >&2
    exit 2
  fi
done
for v in warmup duration; do
  if ! [[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "peers: --$v wants seconds, not '${!v}'" >&2
    exit 2
  fi
done

script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
here=$(dirname "$script")
builddir=$(cd "$builddir" 2>/dev/null && pwd) || {
  echo "peers: no build directory '$builddir'" >&2
  exit 2
}
server=$builddir/examples/echo_server
peers=$builddir/tests/bench/peers
loadgen=$builddir/tests/bench/loadgen
preload=$builddir/tests/bench/.libs/malloc_count.so
: "${out:=$builddir/tests/bench/peers-results}"
for prog in "$server" "$loadgen"; do
  if [ ! -x "$prog" ]; then
    echo "peers: $prog not found; build first (make)" >&2
    exit 1
  fi
done
if [ ! -f "$preload" ]; then
  echo "peers: note: $preload not built; no allocation counts" >&2
  preload=
fi
bench_name=peers
snapshot_script=$here/bench.sh
# shellcheck source=tests/bench/run.sh
. "$here/run.sh"
bench_setup

# ---- the servers ------------------------------------------------------------

# "name|what it is|how to run it": @N@ is --server-threads; "peer:PROG"
# runs tests/bench/peers/PROG, "taxi:BACKEND" runs echo_server once it has
# listed BACKEND (readiness or completion backend), "ex:PROG" runs
# examples/PROG (one written against the Proactor alone, without the
# stream layer echo_server is written against).
n=$server_threads
SERVERS=(
  "asio|Boost.Asio, io_context run by $n threads|peer:asio_echo --threads @N@"
  "libevent|libevent, bufferevents, 1 thread|peer:libevent_echo"
  "libuv|libuv, 1 thread|peer:libuv_echo"
  "epoll-floor|bare epoll loop, 1 thread (floor)|peer:epoll_floor"
  "uring-floor|bare io_uring loop, 1 thread (floor)|peer:uring_floor"
  "reactor|taxi Reactor, epoll, 1 thread|taxi:epoll --backend epoll --dispatcher reactor"
  "reactor-1t|taxi Reactor, epoll, 1 thread, streams without locks|taxi:epoll --backend epoll --dispatcher reactor --one-thread"
  "lf|taxi Leader/Followers, epoll, $n threads|taxi:epoll --backend epoll --dispatcher lf --threads @N@"
  "lf-eager|taxi Leader/Followers, epoll, $n threads, 20 us handoff|taxi:epoll --backend epoll --dispatcher lf --threads @N@ --handoff-us 20"
  "hsha|taxi half-sync/half-async, epoll, $n workers|taxi:epoll --backend epoll --dispatcher hsha --threads @N@"
  "uring|taxi Proactor, io_uring, 1 thread|taxi:uring --dispatcher proactor --backend uring --threads 1"
  "uring-1t|taxi Proactor, io_uring, 1 thread, streams without locks|taxi:uring --dispatcher proactor --backend uring --threads 1 --one-thread"
  "uring-${n}t|taxi Proactor, io_uring, $n threads|taxi:uring --dispatcher proactor --backend uring --threads @N@"
  "uring-rings-${n}t|taxi Proactor, io_uring, a ring per thread, $n threads|taxi:uring --dispatcher proactors --backend uring --threads @N@"
  "uring-pooled|taxi Proactor alone, io_uring, multishot pooled reads, 1 thread|ex:proactor_echo --backend uring --threads 1"
  "uring-pooled-${n}t|the same, a ring per thread, $n threads|ex:proactor_echo --backend uring --threads @N@"
  "aio|taxi Proactor, POSIX aio, 1 thread|taxi:aio --dispatcher proactor --backend aio --threads 1"
  "emulated|taxi Proactor, emulated on epoll, 1 thread|taxi:emulated --dispatcher proactor --backend emulated --threads 1"
)
REFERENCE=asio
# The datagram echo (--mode udp): "udp:ARGS" runs examples/udp_echo server
# ARGS.  The Proactor's rows go here once it has datagram endpoints.
UDP_SERVERS=(
  "udp-floor|bare recvmmsg/sendmmsg loop, epoll, 1 thread (floor)|peer:udp_floor"
  "libuv|libuv uv_udp_t, recvmmsg, try_send, 1 thread|peer:libuv_udp_echo"
  "reactor|taxi udp_echo, Reactor, epoll, 1 thread|udp:--dispatcher reactor --backend epoll --batch 64"
  "lf|taxi udp_echo, Leader/Followers, epoll, $n threads|udp:--dispatcher lf --backend epoll --threads @N@ --batch 64"
  "hsha|taxi udp_echo, half-sync/half-async, epoll, $n workers|udp:--dispatcher hsha --backend epoll --threads @N@ --batch 64"
  "uring|taxi udp_echo, Proactor, io_uring, 1 thread|udp:--dispatcher proactor --backend uring --batch 64"
  "uring-pooled|taxi udp_echo, Proactor, io_uring, 1 thread, one multishot receive into the pool (2 KiB buffers)|udp:--dispatcher proactor --backend uring --batch 64 --recv-size 2048"
  "uring-rings-${n}t|taxi udp_echo, a Proactor per thread, io_uring, $n threads|udp:--dispatcher proactors --backend uring --threads @N@ --batch 64"
)
if [ "$mode" = udp ]; then
  SERVERS=("${UDP_SERVERS[@]}")
  REFERENCE=udp-floor
fi
[ -n "$reference" ] && REFERENCE=$reference
# Which library each peer needs, for the message when it was not built.
declare -A NEEDS=(
  [asio_echo]="Boost.Asio (Debian: g++ libboost-dev)"
  [libevent_echo]="libevent (Debian: libevent-dev)"
  [libuv_echo]="libuv (Debian: libuv1-dev)"
  [epoll_floor]="epoll"
  [uring_floor]="liburing 2.3 or later (Debian: liburing-dev)"
  [udp_floor]="epoll"
  [libuv_udp_echo]="libuv (Debian: libuv1-dev)"
)

"$server" --list-backends >"$work/backends" 2>/dev/null
"$server" --list-proactor-backends >>"$work/backends" 2>/dev/null

names=() descs=() progs=() argss=() leads=()
for s in "${SERVERS[@]}"; do
  name=${s%%|*} rest=${s#*|}
  desc=${rest%%|*} how=${rest#*|}
  kind=${how%% *} args= lead="--port 0"
  [[ $how == *" "* ]] && args=${how#* }
  if [[ $kind == udp:* ]]; then
    # udp:ARGS: every word after "udp:" is udp_echo's.
    args="${kind#udp:}${args:+ $args}" kind=udp:
    lead="server --address 127.0.0.1:0"
  fi
  args=${args//@N@/$server_threads}
  if [ ${#only[@]} -gt 0 ]; then
    case " ${only[*]} " in *" $name "*) ;; *) continue ;; esac
  fi
  case $kind in
    peer:*)
      prog=$peers/${kind#peer:}
      if [ ! -x "$prog" ]; then
        echo "peers: skipping $name: ${kind#peer:} was not built (configure did not find ${NEEDS[${kind#peer:}]}; install it and run configure again)" >&2
        continue
      fi ;;
    ex:*)
      prog=$builddir/examples/${kind#ex:}
      if [ ! -x "$prog" ]; then
        echo "peers: skipping $name: examples/${kind#ex:} was not built" >&2
        continue
      fi ;;
    udp:)
      prog=$builddir/examples/udp_echo
      if [ ! -x "$prog" ]; then
        echo "peers: skipping $name: examples/udp_echo was not built" >&2
        continue
      fi ;;
    taxi:*)
      prog=$server
      if ! grep -qx "${kind#taxi:}" "$work/backends"; then
        echo "peers: skipping $name: echo_server does not list the ${kind#taxi:} backend" >&2
        continue
      fi ;;
  esac
  names+=("$name") descs+=("$desc") progs+=("$prog") argss+=("$args")
  leads+=("$lead")
done
if [ ${#names[@]} -eq 0 ]; then
  echo "peers: no server to run" >&2
  exit 2
fi
case " ${names[*]} " in
  *" $REFERENCE "*) ;;
  *) echo "peers: note: $REFERENCE does not run, so the tables show no ratios" >&2 ;;
esac

# ---- descriptors and ports --------------------------------------------------

# Raise the soft descriptor limit for this script's children (the servers
# and loadgen) as far as the largest connection count needs.
max_conns=0
for c in "${conn_counts[@]}"; do [ "$c" -gt "$max_conns" ] && max_conns=$c; done
want=$((max_conns + 256))
soft=$(ulimit -S -n) hard=$(ulimit -H -n)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$want" ]; then
  if [ "$hard" = unlimited ] || [ "$hard" -ge "$want" ]; then
    ulimit -S -n "$want"
  else
    ulimit -n "$want" 2>/dev/null || ulimit -S -n "$hard"
  fi
fi
fd_limit=$(ulimit -S -n)
ports=''
if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
  ports=$((hi - lo + 1))
fi
# Can a cell with C connections run here?  Sets $why if not.
cell_fits() {
  why=''
  if [ "$fd_limit" != unlimited ] && [ "$1" -gt $((fd_limit - 256)) ]; then
    why="needs $(($1 + 256)) descriptors, the limit is $fd_limit (raise it with ulimit -Hn as root)"
  elif [ -n "$ports" ] && [ "$1" -gt $((ports - 1000)) ]; then
    why="only $ports local ports (/proc/sys/net/ipv4/ip_local_port_range)"
  fi
  [ -z "$why" ]
}

# ---- the sweep --------------------------------------------------------------

mkdir -p "$out" || exit 1
csv=$out/results.csv
echo "size,connections,server,description,status,client_threads,server_threads,warmup_s,duration_s,connect_s,messages,msgs_per_s,p50_us,p99_us,p999_us,max_us,cpu_us_per_msg,utime_us_per_msg,stime_us_per_msg,ctx_per_msg,vcsw_per_msg,nvcsw_per_msg,allocs_per_msg,syscalls_per_msg,msgs_per_s_vs_$REFERENCE,p99_vs_$REFERENCE,cpu_vs_$REFERENCE,syscalls_vs_$REFERENCE,ctx_vs_$REFERENCE,allocs_vs_$REFERENCE,note,round" >"$csv" || exit 1

# The warm-up for C connections: a round trip takes longer with more of
# them, so the load needs longer to settle.
warmup_for() {
  awk -v w="$warmup" -v c="$1" 'BEGIN { print (c >= 5000 ? 2 * w : w) }'
}

total=0
for c in "${conn_counts[@]}"; do
  cell_fits "$c" && total=$((total + ${#sizes[@]} * ${#names[@]} * rounds))
done
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')
loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
perf_note=''
command -v perf >/dev/null 2>&1 || perf_note=" (perf not found: no sys/msg; Debian: linux-perf)"
{
  echo "taxi echo benchmark against peers: ${#names[@]} servers x ${#conn_counts[@]} connection counts x ${#sizes[@]} sizes = $total runs$perf_note"
  echo "  loadgen: $client_threads thread(s), closed-loop ping-pong$([ "$mode" = cec ] && echo ', a connection per round trip (cec): per message = per connection'; [ "$mode" = udp ] && echo ', UDP: a connection is a peer socket, a message a datagram'); ${warmup} s warm-up (doubled from 5000 connections) + ${duration} s measured per run"
  echo "  $ncpu CPUs shared by server and loadgen; load average at the start $loadavg"
  [ "$rounds" -gt 1 ] && echo "  $rounds rounds a cell, the servers' order turned by one each round: figures are medians over the rounds, ratios the median of each round's own (cpu: with their range)"
} | tee "$work/header" >&2

METRICS=(rate p99 cpu sys ctx allocs)
# round_ratios KEY REF ROUND - the ratio of each metric of KEY's run in
# ROUND to REF's in the same round (two decimals; "-" where either is
# unknown or did not run), separated by spaces, in one awk.
round_ratios() {
  local m args=()
  for m in "${METRICS[@]}"; do
    if [ "${R[$1|status|$3]:-}" = ok ] && [ "${R[$2|status|$3]:-}" = ok ]; then
      args+=("${R[$1|$m|$3]:--}" "${R[$2|$m|$3]:--}")
    else
      args+=(- -)
    fi
  done
  awk 'BEGIN {
    for (i = 1; i < ARGC; i += 2) {
      x = ARGV[i]; y = ARGV[i + 1]
      if (x == "-" || y == "-") r = "-"
      else if (y + 0 == 0) r = x + 0 == 0 ? "1.00" : "inf"
      else r = sprintf("%.2f", x / y)
      printf "%s%s", r, i + 2 < ARGC ? " " : "\n"
    }
  }' "${args[@]}"
}
# ratios KEY REF - for each metric, the median of the rounds' own ratios
# of KEY to REF ("-" where no round has both), separated by spaces; then
# the lowest and the highest of cpu's.  One round: that round's ratios.
ratios() {
  local r lists=() rel j
  for ((r = 1; r <= rounds; r++)); do
    read -r -a rel <<<"$(round_ratios "$1" "$2" "$r")"
    for j in "${!METRICS[@]}"; do lists[j]+="${rel[j]} "; done
  done
  # median (tests/lib.sh) of each list, the rounds where both ran.
  awk -v cpu=2 "$median_awk"'BEGIN {
    lo = hi = "-"
    for (i = 1; i < ARGC; i++) {
      k = split(ARGV[i], v, " ")
      list = ""; n = 0
      for (j = 1; j <= k; j++) {
        if (v[j] == "-" || v[j] == "inf") continue
        list = list " " v[j]; n++
        if (i - 1 == cpu && (n == 1 || v[j] + 0 < lo + 0)) lo = v[j]
        if (i - 1 == cpu && (n == 1 || v[j] + 0 > hi + 0)) hi = v[j]
      }
      med = median(list, 1)
      printf "%s ", med == "-" ? med : sprintf("%.2f", med)
    }
    printf "%s %s\n", lo, hi
  }' "${lists[@]}"
}
# median_of LIST - the median of the numbers in LIST (the mean of the
# middle two of an even count), "" if none.
median_of() {
  awk "$median_awk"'BEGIN { m = median(ARGV[1], 1); print m == "-" ? "" : m }' "$1"
}
# The minutes and seconds of a number of seconds.
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# R[size|conns|name|metric|round] for each run, R[size|conns|name|metric]
# over the rounds (the median of those that ran).
declare -A R
failures=0 done_runs=0 started=$SECONDS
for size in "${sizes[@]}"; do
  for c in "${conn_counts[@]}"; do
    if ! cell_fits "$c"; then
      echo "peers: skipping $c connections: $why" >&2
      continue
    fi
    w=$(warmup_for "$c")
    for ((round = 1; round <= rounds; round++)); do
      for ((j = 0; j < ${#names[@]}; j++)); do
        i=$(((j + round - 1) % ${#names[@]}))
        name=${names[i]}
        done_runs=$((done_runs + 1))
        printf '[%2d/%d] %5s B x %5s conns  %-12s ' "$done_runs" "$total" "$size" "$c" "$name" >&2
        read -r -a argv <<<"${argss[i]}"
        read -r -a lead <<<"${leads[i]}"
        run_server "$name $c x $size B" "$c" "$client_threads" "$size" "$w" \
          "$duration" "${progs[i]}" "${lead[@]}" "${argv[@]}"
        k="$size|$c|$name"
        R[$k|status|$round]=$r_status R[$k|rate|$round]=$r_rate
        R[$k|p99|$round]=$r_p99 R[$k|cpu|$round]=$r_cpu R[$k|sys|$round]=$r_sys
        R[$k|ctx|$round]=$r_ctx R[$k|allocs|$round]=$r_allocs
        R[$k|note|$round]=$r_note
        R[$k|csv|$round]="$size,$c,$name,\"${descs[i]//, /; }\",$r_status,$client_threads,$server_threads,$w,$r_seconds,$r_connect,$r_msgs,$r_rate,$r_p50,$r_p99,$r_p999,$r_max,$r_cpu,$r_utime,$r_stime,$r_ctx,$r_vcsw,$r_nvcsw,$r_allocs,$r_sys"
        elapsed=$((SECONDS - started))
        left=$(((total - done_runs) * elapsed / done_runs))
        case $r_status in
          ok)
            printf '%9.0f msgs/s  p99 %8.0f us  cpu %6s us/msg  (%s, about %s left)\n' \
              "$r_rate" "$r_p99" "${r_cpu:--}" "$(mmss "$elapsed")" "$(mmss "$left")" >&2 ;;
          *)
            [ "$r_status" = FAILED ] && failures=$((failures + 1))
            printf '%s: %s\n' "$r_status" "$r_note" >&2 ;;
        esac
      done
      # The round's rows in the order they ran, each with its ratios to
      # the reference's run of the same round.
      for ((j = 0; j < ${#names[@]}; j++)); do
        name=${names[(j + round - 1) % ${#names[@]}]}
        k="$size|$c|$name"
        read -r -a rel <<<"$(round_ratios "$k" "$size|$c|$REFERENCE" "$round")"
        note=${R[$k|note|$round]//\"/\"\"}
        echo "${R[$k|csv|$round]},$(
          IFS=,
          echo "${rel[*]}"
        ),\"$note\",$round" >>"$csv"
      done
    done
    # Over the rounds: the median of each figure of the runs that ran.
    for name in "${names[@]}"; do
      k="$size|$c|$name" ok=0
      for m in "${METRICS[@]}"; do
        list=''
        for ((round = 1; round <= rounds; round++)); do
          [ "${R[$k|status|$round]}" = ok ] || continue
          [ -n "${R[$k|$m|$round]}" ] && list+="${R[$k|$m|$round]} "
        done
        R[$k|$m]=$(median_of "$list")
      done
      for ((round = 1; round <= rounds; round++)); do
        [ "${R[$k|status|$round]}" = ok ] && ok=$((ok + 1))
      done
      R[$k|note]=${R[$k|note|$rounds]}
      if [ "$ok" -gt 0 ]; then
        R[$k|status]=ok
        [ "$ok" -lt "$rounds" ] && R[$k|note]="ran in $ok of $rounds rounds${R[$k|note]:+; ${R[$k|note]}}"
      else
        R[$k|status]=${R[$k|status|$rounds]}
      fi
    done
  done
done

# ---- the tables -------------------------------------------------------------

# A figure with a precision that suits its size, or "-".
fig() {
  awk -v x="$1" 'BEGIN {
    if (x == "") { print "-"; exit }
    if (x >= 1000) printf "%.0f\n", x; else if (x >= 100) printf "%.1f\n", x
    else if (x >= 1) printf "%.2f\n", x; else printf "%.3f\n", x }'
}
{
  cat "$work/header"
  echo
  echo "Per message; each figure is followed by its ratio to $REFERENCE's in the same cell."
  for i in "${!names[@]}"; do printf '  %-12s %s\n' "${names[i]}" "${descs[i]}"; done
  fmt='%-12s %9s %5s %8s %5s %7s %5s %6s %5s %6s %5s %6s %5s  %s\n'
  for size in "${sizes[@]}"; do
    for c in "${conn_counts[@]}"; do
      cell_fits "$c" || continue
      echo
      echo "$size-byte messages, $c connections:"
      printf "$fmt" server msgs/s x p99us x cpuus x sys x ctx x allocs x ''
      for name in "${names[@]}"; do
        k="$size|$c|$name" ref="$size|$c|$REFERENCE"
        if [ "${R[$k|status]}" != ok ]; then
          printf "$fmt" "$name" "${R[$k|status]}" '' '' '' '' '' '' '' '' '' '' '' "${R[$k|note]}"
          continue
        fi
        read -r -a rel <<<"$(ratios "$k" "$ref")"
        row=()
        for j in "${!METRICS[@]}"; do
          row+=("$(fig "${R[$k|${METRICS[j]}]}")" "${rel[j]}")
        done
        spread=''
        n_rel=${#METRICS[@]}
        [ "$rounds" -gt 1 ] && [ "${rel[n_rel]}" != - ] &&
          spread="cpu x ${rel[n_rel]}-${rel[n_rel + 1]}"
        printf "$fmt" "$name" "${row[@]}" "$spread${spread:+${R[$k|note]:+; }}${R[$k|note]}"
      done
    done
  done
} | tee "$out/table.txt"
echo
echo "raw results: $csv"

# ---- the charts -------------------------------------------------------------

# One data file per size and metric: a row per connection count, a column
# per server ("-" where it did not run), for gnuplot.
if command -v gnuplot >/dev/null 2>&1; then
  charts=()
  # A colour per server (twelve that tell apart); taxi's lines solid, the
  # other libraries' dashed, the floors dotted.
  colours=('#000000' '#e41a1c' '#377eb8' '#4daf4a' '#984ea3' '#ff7f00'
    '#a65628' '#f781bf' '#17becf' '#999999' '#bcbd22' '#1f3f7f')
  plot='' min_c=${conn_counts[0]} max_c=${conn_counts[0]}
  for c in "${conn_counts[@]}"; do
    [ "$c" -lt "$min_c" ] && min_c=$c
    [ "$c" -gt "$max_c" ] && max_c=$c
  done
  for i in "${!names[@]}"; do
    case ${names[i]} in
      *-floor) dt=3 ;;
      asio | libevent | libuv) dt=2 ;;
      *) dt=1 ;;
    esac
    plot+="${plot:+, }DAT using 1:$((i + 2)) with linespoints lw 2 dt $dt"
    plot+=" lc rgb '${colours[i % ${#colours[@]}]}' title columnheader($((i + 2)))"
  done
  for size in "${sizes[@]}"; do
    for m in rate cpu; do
      dat=$work/$m-$size.dat
      {
        printf 'connections'
        for name in "${names[@]}"; do printf ' %s' "$name"; done
        echo
        for c in "${conn_counts[@]}"; do
          printf '%s' "$c"
          for name in "${names[@]}"; do
            v=${R[$size|$c|$name|$m]:-}
            [ "${R[$size|$c|$name|status]:-}" = ok ] && [ -n "$v" ] || v=-
            printf ' %s' "$v"
          done
          echo
        done
      } >"$dat"
      case $m in
        rate) svg=$out/msgs-${size}B.svg ylabel='round trips per second' title="msgs/s, $size-byte messages" ;;
        cpu) svg=$out/cpu-${size}B.svg ylabel='server CPU microseconds per message' title="server CPU per message, $size-byte messages" ;;
      esac
      if gnuplot >"$work/gnuplot.err" 2>&1 <<EOF; then
set terminal svg size 900,560 dynamic enhanced font 'sans,12'
set output '$svg'
set title "$title (loadgen threads: $client_threads)"
set datafile missing '-'
set key outside right top
set logscale x
set xlabel 'connections'
set ylabel '$ylabel'
set yrange [0:*]
set grid
set xrange [$min_c * 0.7:$max_c * 1.4]
set xtics (${connections_list})
DAT = '$dat'
plot $plot
EOF
        charts+=("$svg")
      else
        echo "peers: gnuplot failed for $svg:" >&2
        show "$work/gnuplot.err"
      fi
    done
  done
  [ ${#charts[@]} -gt 0 ] && echo "charts: ${charts[*]}"
else
  echo "peers: gnuplot not found (Debian: gnuplot-nox): no charts" >&2
fi

if [ "$failures" -ne 0 ]; then
  echo "peers: $failures run(s) failed" >&2
  exit 1
fi
exit 0
