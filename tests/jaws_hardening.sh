#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# jaws_hardening.sh - examples/jaws against clients that mean it harm, or
# files that change under it:
#
# - the cache: a file rewritten in place with the same size and the same
#   modification second (its mtime put back, as cp -p or rsync -t do) is
#   served new once the revalidation interval (1 s) has passed;
# - the access log: request lines with DEL, a C1 byte, the UTF-8 of U+202E,
#   a control byte, a quote and a backslash are each one line whose
#   request field escapes them as \xHH and decodes back to what was sent
#   (a long one cut short, never in the middle of an escape);
# - dot names: /.git/config, /.env, /sub/.hidden, %2e-encoded and through
#   a link are 404 while /.well-known/ is served; all are served with
#   --dotfiles allow; a bad value is refused;
# - the thread-per-X strategies: with --send-timeout 1000 clients that
#   never read (a 4 KiB receive buffer, large responses pipelined) are
#   closed and their threads freed: a fresh client is served meanwhile,
#   even by a thread pool of two;
# - the deployable strategies (reactive, lf, hsha, proactive, adaptive,
#   and the default, adaptive with its accepts deferred until a
#   connection's first bytes): with 2, then 8, clients that never read,
#   and with 2000 idle
#   connections (500 with TAXI_TEST_SMALL), a fresh client is served at
#   once (within 5 s, scaled).
#
# JAWS_HARDENING="cache log" picks parts (cache, log, dotfiles, threads,
# deployable) for a closer look.
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
: "${srcdir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
server=$builddir/examples/jaws/jaws
need_built jaws_hardening.sh "$server"
need_tools jaws_hardening.sh curl python3
# The idle connections need descriptors on each side.
raise_nofile 8192
idle_conns=2000 pipelined=200
if [ "$small" = 1 ]; then idle_conns=500 pipelined=50; fi
if [ "$nofile" != unlimited ] && [ $((nofile - 100)) -lt "$idle_conns" ]; then
  idle_conns=$((nofile - 100))
  echo "note: descriptors limited to $nofile: $idle_conns idle connections"
fi
# How long a fresh client may take to be served: generous, for a busy
# machine; what it guards against takes 12 s (2000 idle connections) or
# 30 s and more (clients that never read).
bound=$((5 * scale))
# A thread strategy's sends end a second (--send-timeout 1000) after
# they last took bytes, and the kernel takes a client's bytes for a while
# after it stopped reading (its buffers grow, to 4 MB on Linux): its
# threads are free a few seconds later (30 s and more without the send
# timeout).
thread_bound=$((15 * scale))
# When the clients that never read look whether they were closed.
stall_hold=$((8 * scale))

parts=${JAWS_HARDENING:-cache log dotfiles threads deployable}
# part NAME: is NAME one of the parts to run?
part() {
  case " $parts " in *" $1 "*) return 0 ;; esac
  return 1
}

make_work jaws-hardening

# The document root, below a directory whose name starts with a dot: only
# names below the root count as dot names.
root=$work/.parent/root
mkdir -p "$root/sub" "$root/.git" "$root/.well-known/acme" "$root/dir"
printf '<html>home</html>\n' >"$root/index.html"
printf 'visible\n' >"$root/sub/ok.txt"
printf '[core]\n' >"$root/.git/config"
printf 'SECRET=1\n' >"$root/.env"
printf 'hidden\n' >"$root/sub/.hidden"
printf 'contact\n' >"$root/.well-known/security.txt"
printf 'token\n' >"$root/.well-known/acme/t1"
printf 'x\n' >"$root/.well-known/.x"
printf 'dir index\n' >"$root/dir/index.html"
ln -s .git "$root/gitlink"
python3 -c '
import sys
with open(sys.argv[1] + "/big.bin", "wb") as f:
    f.write(bytes((i * 7 + (i >> 10)) & 255 for i in range(200000)))
' "$root"

out=$work/server.out
log=$work/access.log

# The clients, in one file: subcommands below.
cat >"$work/client.py" <<'EOF'
import socket, sys, time

def request(path):
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n"

def fetch(port, path, timeout):
    # One GET on a new connection; the status, the body and the seconds.
    t0 = time.time()
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c.settimeout(max(0.1, timeout - (time.time() - t0)))
    c.sendall(b"GET " + path + b" HTTP/1.0\r\n\r\n")
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
        c.settimeout(max(0.1, timeout - (time.time() - t0)))
    c.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b" ")[1].decode() if head else "-", body, time.time() - t0

cmd, port = sys.argv[1], int(sys.argv[2])

if cmd == "fresh":
    # fresh PORT PATH FILE BOUND: served whole within BOUND seconds.
    path, want, limit = sys.argv[3].encode(), sys.argv[4], float(sys.argv[5])
    try:
        status, body, took = fetch(port, path, limit)
    except OSError as e:
        print("not served within %.0f s: %s" % (limit, e))
        sys.exit(1)
    if status != "200" or body != open(want, "rb").read():
        print("status %s, %d bytes" % (status, len(body)))
        sys.exit(1)
    print("served in %.2f s" % took)

elif cmd == "stall":
    # stall PORT N PATH COUNT READY HOLD CHECK: N clients with a 4 KiB
    # receive buffer pipeline COUNT GETs of PATH (big.bin: 200000 bytes)
    # and never read; READY is made once they have sent.  After HOLD
    # seconds, with CHECK 1, each reads: the server must have closed it
    # (end of stream or a reset) before sending all it asked for.
    n, path, count = int(sys.argv[3]), sys.argv[4].encode(), int(sys.argv[5])
    ready, hold, check = sys.argv[6], float(sys.argv[7]), sys.argv[8] == "1"
    conns = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(request(path) * count)
        conns.append(s)
    open(ready, "w").close()
    time.sleep(hold)
    if not check:
        sys.exit(0)
    bad = 0
    for s in conns:
        got, how = 0, "open"
        try:
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    how = "closed"
                    break
                got += len(chunk)
        except ConnectionResetError:
            how = "reset"
        except socket.timeout:
            how = "open"
        print("%s after %d bytes" % (how, got))
        if how == "open" or got >= count * 200000:  # (the body alone)
            bad += 1
    sys.exit(1 if bad else 0)

elif cmd == "idle":
    # idle PORT N READY HOLD: N connections that send nothing, held HOLD
    # seconds once READY is made.
    n, ready, hold = int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    conns = [socket.create_connection(("127.0.0.1", port), timeout=30)
             for _ in range(n)]
    open(ready, "w").close()
    time.sleep(hold)

elif cmd == "log":
    # log PORT: the hostile request lines, each on a connection of its own
    # (most are 400: the server closes), their lines printed as Python
    # literals for the check.
    lines = [b"GET /del\x7fname HTTP/1.1",
             b"GET /c1\x9bname HTTP/1.1",
             b"GET /rlo\xe2\x80\xaename.txt HTTP/1.1",
             b"GET /ctl\x01name HTTP/1.1",
             b'GET /quote"name HTTP/1.1',
             b"GET /back\\name HTTP/1.1",
             b"GET /" + b"\x9b" * 600 + b" HTTP/1.1"]
    for line in lines:
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
        try:
            while c.recv(65536):
                pass
        except ConnectionResetError:
            pass
        c.close()
    print(repr(lines))
EOF

# start NAME ARGS...: a server on a free port; sets pid, port and url.
start() {
  name=$1
  shift
  start_server "the $name server" "$out" "$server" --port 0 "$@" || return 1
  url=http://127.0.0.1:$port
}

# stop NAME: SIGINT; within 10 s, exit status 0 and the closing line.
stop() {
  if stop_server "the $1 server" "$out" "^jaws: stopped after [0-9]* requests"
  then
    ok "$1: stopped"
  else
    bad "$1: stop"
  fi
}

# body URL: what curl got (nothing on an error).
body() {
  curl -s -f -m 10 "$1"
}

# code URL [CURL ARGS]: the status curl got (000: none).
code() {
  u=$1
  shift
  curl -s -o /dev/null -m 10 -w '%{http_code}' "$@" "$u"
}

# fresh NAME [BOUND]: a new client must get index.html whole within
# BOUND s ($bound by default).
fresh() {
  if python3 "$work/client.py" fresh "$port" /index.html "$root/index.html" \
    "${2:-$bound}" >"$work/fresh.out" 2>&1; then
    ok "$1 ($(cat "$work/fresh.out"))"
  else
    cat "$work/fresh.out"
    bad "$1"
  fi
}

# ---- the cache's revalidation --------------------------------------------

# rewrite FILE TEXT HOW: FILE rewritten in place with the line TEXT (its
# size), then its mtime put back: HOW "exact" to the nanosecond, "second"
# to another instant of the same second.
rewrite() {
  python3 - "$1" "$2" "$3" <<'EOF'
import os, sys
path, text, how = sys.argv[1], sys.argv[2].encode() + b"\n", sys.argv[3]
st = os.stat(path)
assert st.st_size == len(text)
with open(path, "r+b") as f:
    f.write(text)
mtime = st.st_mtime_ns
if how == "second":
    second = mtime - mtime % 1000000000
    mtime = second + (mtime % 1000000000 + 500000000) % 1000000000
os.utime(path, ns=(st.st_atime_ns, mtime))
EOF
}

s=revalidate
if ! part cache; then
  :
elif start $s --root "$root"; then
  for how in exact second; do
    printf 'version A\n' >"$root/page-$how.txt"
    first=$(body "$url/page-$how.txt")
    rewrite "$root/page-$how.txt" 'version B' "$how"
    # The interval (1 s) and a margin.
    sleep 1.5
    expect "$s: rewritten in place, mtime kept ($how), served new after 1 s" \
      "version A/version B" "$first/$(body "$url/page-$how.txt")"
  done
  stop $s
else
  bad "$s: start"
fi

# ---- the access log -------------------------------------------------------

s=access-log
rm -f "$log"
if ! part log; then
  :
elif start $s --root "$root" --access-log "$log"; then
  if python3 "$work/client.py" log "$port" >"$work/sent" 2>&1; then
    ok "$s: the hostile requests sent"
  else
    cat "$work/sent"
    bad "$s: the hostile requests"
  fi
  stop $s
  if python3 - "$log" "$work/sent" <<'EOF'; then
import ast, re, sys
data = open(sys.argv[1], "rb").read()
sent = ast.literal_eval(open(sys.argv[2]).read())
line_re = re.compile(rb'^(\S+) - - \[([^\]]+)\] "((?:[^"\\]|\\x[0-9A-F]{2})*)" (\d{3}) (\d+)$')
lines = data.split(b"\n")
assert lines[-1] == b"", "no newline at the end"
lines = lines[:-1]
assert len(lines) == len(sent), "%d lines for %d requests:\n%r" % (len(lines), len(sent), data)
for got, want in zip(lines, sent):
    assert all(0x20 <= b < 0x7f for b in got), "raw bytes in %r" % got
    m = line_re.match(got)
    assert m, "not a common log format line: %r" % got
    field = m.group(3)
    decoded = re.sub(rb"\\x([0-9A-F]{2})", lambda e: bytes([int(e.group(1), 16)]), field)
    if len(want) < 300:
        assert decoded == want, "%r decodes to %r, sent %r" % (field, decoded, want)
    else:  # cut short, at an escape's end
        assert len(decoded) >= 100 and want.startswith(decoded), (field, want)
for esc in (rb"\x7F", rb"\x9B", rb"\xE2\x80\xAE", rb"\x01", rb"\x22", rb"\x5C"):
    assert esc in data, "no %r in the log" % esc
print("ok")
EOF
    ok "$s: every byte below 0x20, from 0x7f, quotes and backslashes escaped as \\xHH, one line a request"
  else
    cat "$log"
    bad "$s: escaping"
  fi
else
  bad "$s: start"
fi

# ---- dot names ------------------------------------------------------------

check_dotfiles() {
  dot_paths="/.git/config /.env /sub/.hidden /%2egit/config /sub/%2Ehidden /sub/../.env /gitlink/config /.git/"
  s=dotfiles
  if start $s --root "$root"; then
    got=''
    for p in $dot_paths; do got="$got $(code "$url$p" --path-as-is)"; done
    expect "$s: dot names are 404 by default" \
      " 404 404 404 404 404 404 404 404" "$got"
    expect "$s: HEAD of a dot name is 404" 404 "$(code "$url/.env" -I)"
    expect "$s: /.well-known/ is served" "contact/token" \
      "$(body "$url/.well-known/security.txt")/$(body "$url/.well-known/acme/t1")"
    expect "$s: /.well-known redirected to its slash" 301 \
      "$(code "$url/.well-known")"
    expect "$s: a dot name below /.well-known is 404" 404 \
      "$(code "$url/.well-known/.x")"
    expect "$s: other names served, below a root in a dot directory" \
      "visible/dir index" "$(body "$url/sub/ok.txt")/$(body "$url/dir/")"
    stop $s
  else
    bad "$s: start"
  fi
  s=dotfiles-allow
  if start $s --root "$root" --dotfiles allow; then
    expect "$s: dot names served" "[core]/SECRET=1/hidden/[core]" \
      "$(body "$url/.git/config")/$(body "$url/.env")/$(body "$url/sub/.hidden")/$(body "$url/gitlink/config")"
    stop $s
  else
    bad "$s: start"
  fi
  status=0
  "$server" --root "$root" --port 0 --dotfiles maybe >"$work/bad.out" 2>&1 ||
    status=$?
  expect "--dotfiles maybe: status 2" 2 $status
}

# ---- the thread-per-X strategies: the send timeout ------------------------

# Two clients that never read (each holds a thread: the pool's two) and a
# fresh client beside them, served once the send timeout (1 s) freed a
# thread; then the stalled ones must find themselves closed, short of
# what they asked for (they read after $stall_hold s).
check_threads() {
  for strategy in thread-per-connection thread-per-request thread-pool; do
    s=$strategy
    if ! start $s --strategy "$strategy" --root "$root" --threads 2 \
      --send-timeout 1000; then
      bad "$s: start"
      continue
    fi
    rm -f "$work/ready"
    python3 "$work/client.py" stall "$port" 2 /big.bin "$pipelined" \
      "$work/ready" "$stall_hold" 1 >"$work/stall.out" 2>&1 &
    stall=$!
    track "$stall"
    if wait_until 30 test -f "$work/ready"; then
      sleep 0.3 # the server's threads find the sockets full
      fresh "$s: a fresh client served beside 2 clients that never read" \
        "$thread_bound"
    else
      bad "$s: the stalled clients did not connect"
    fi
    if wait_pid "$stall" $((stall_hold + 30)) && [ "$status" = 0 ]; then
      ok "$s: clients that never read closed after the send timeout ($(tr '\n' ' ' <"$work/stall.out"))"
    else
      cat "$work/stall.out"
      bad "$s: clients that never read not closed"
    fi
    stop $s
  done
  for bad_value in 0 x 3600001; do
    status=0
    "$server" --root "$root" --port 0 --send-timeout "$bad_value" \
      >"$work/bad.out" 2>&1 || status=$?
    expect "--send-timeout $bad_value: status 2" 2 $status
  done
}

# ---- the deployable strategies: nothing waits on a client -----------------

check_deployable() {
  # adaptive with --defer-accept 0, so that the idle connections reach
  # its pool and must move; default (no --strategy: adaptive, the kernel
  # holding a connection until its first bytes or about a second) too.
  for strategy in reactive lf hsha proactive adaptive default; do
    s=$strategy
    case $strategy in
      default) pick='' ;;
      adaptive) pick="--strategy adaptive --defer-accept 0" ;;
      *) pick="--strategy $strategy" ;;
    esac
    # shellcheck disable=SC2086 # $pick: words
    if ! start $s $pick --root "$root"; then
      bad "$s: start"
      continue
    fi
    for n in 2 8; do
      rm -f "$work/ready"
      python3 "$work/client.py" stall "$port" "$n" /big.bin "$pipelined" \
        "$work/ready" 600 0 >"$work/stall.out" 2>&1 &
      stall=$!
      track "$stall"
      if wait_until 30 test -f "$work/ready"; then
        sleep 0.3
        fresh "$s: a fresh client served beside $n clients that never read"
        fresh "$s: another fresh client served beside $n clients that never read"
      else
        cat "$work/stall.out"
        bad "$s: $n stalled clients did not connect"
      fi
      kill "$stall" 2>/dev/null
      wait_pid "$stall" 10
    done
    rm -f "$work/ready"
    python3 "$work/client.py" idle "$port" "$idle_conns" "$work/ready" 600 \
      >"$work/idle.out" 2>&1 &
    idle=$!
    track "$idle"
    if wait_until $((60 * scale)) test -f "$work/ready"; then
      fresh "$s: a fresh client served beside $idle_conns idle connections"
    else
      cat "$work/idle.out"
      bad "$s: $idle_conns idle connections not made"
    fi
    kill "$idle" 2>/dev/null
    wait_pid "$idle" 10
    stop $s
    [ "$strategy" = adaptive ] && check_adaptive_moves
  done
}

# The adaptive server's closing line: clients that never read moved to the
# Proactor with their socket full, each idle connection once it had
# waited, none holding a pool thread.  Not all ten non-readers need have
# filled their socket: one whose requests the server had not reached when
# the check ended (a loaded machine) is closed before; that no thread was
# held is what the fresh clients showed.
check_adaptive_moves() {
  line=$(grep '^jaws: stopped after' "$out")
  full=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) with the socket full.*/\1/p')
  waiting=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) while waiting.*/\1/p')
  if [ "${full:-0}" -ge 1 ] && [ "${waiting:-0}" -ge "$idle_conns" ]; then
    ok "adaptive: moved to the proactor: $full with the socket full, $waiting while waiting"
  else
    echo "$line"
    bad "adaptive: moves to the proactor (some with the socket full, $idle_conns while waiting)"
  fi
}

part dotfiles && check_dotfiles
part threads && check_threads
part deployable && check_deployable
finish
