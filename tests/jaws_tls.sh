#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# jaws_tls.sh - examples/jaws over HTTPS.  Certificates are made here with
# `openssl req` (never kept).  On every strategy that serves TLS (reactive,
# lf, hsha, proactive, adaptive, and the default: no --strategy), with a
# TLS listener beside the plain one (--tls-port 0), checked with curl
# --cacert and Python's ssl module:
#   - a small file (cached: written from memory) and a large one (5 MB;
#     1 MB with TAXI_TEST_SMALL; sent from memory, and from the file on
#     the runs given --memory-max 65536), every byte compared;
#   - three requests over one kept-alive TLS connection, ALPN http/1.1;
#   - a 404 and a range (206, its bytes);
#   - a plain-HTTP client on the TLS port is closed, and the server goes
#     on (a TLS request after it, the plain port still plain);
#   - clients that complete no handshake (one sends nothing, one half a
#     ClientHello) are closed by the header timeout, well before the idle
#     timeout;
#   - webstone --tls (its OpenSSL client) over the mix, every byte checked:
#     kept-alive connections, then a connection per request resuming its
#     session (the server must resume some);
#   - SIGHUP reloads the certificate: the next client is served the new
#     one (openssl s_client -showcerts), a connection made before goes on
#     with its own; a reload from a broken file keeps the one in use.
# Then --tls-only (on reactive and the default strategy): the one
# listener speaks TLS; and the command lines that must be refused: TLS
# options on a thread-per-X strategy, a certificate without its key, both
# or neither of --tls-port and --tls-only (exit 2), a missing certificate
# file (exit 1).
# JAWS_TLS_RUNS="reactive adaptive" picks runs.
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${builddir:=.}"
: "${srcdir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
server=$builddir/examples/jaws/jaws
webstone=$builddir/tests/bench/webstone/webstone
need_built jaws_tls.sh "$server"
need_tools jaws_tls.sh curl python3 openssl

make_work jaws_tls
out=$work/server.out
root=$work/root
mkdir -p "$root"
printf 'a small file over TLS\n' >"$root/small.txt"
big_size=5000000
[ "$small" = 1 ] && big_size=1000000
python3 -c '
import sys
size = int(sys.argv[2])
with open(sys.argv[1], "wb") as f:
    f.write(bytes((i * 13 + (i >> 12)) & 255 for i in range(size)))
' "$root/big.bin" "$big_size"

# cert NAME: a self-signed certificate for localhost and 127.0.0.1 in
# $work/NAME.pem and its key in $work/NAME.key, with NAME in its subject.
cert() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
    -keyout "$work/$1.key" -out "$work/$1.pem" \
    -subj "/CN=localhost/O=$1" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1
}
if ! cert first || ! cert second; then
  echo "jaws_tls.sh: SKIP: openssl cannot make a certificate here"
  exit 77
fi
# The trust store of the clients: both certificates (the reload serves
# the second).
cat "$work/first.pem" "$work/second.pem" >"$work/ca.pem"
# What the server reads: the files a reload rereads.
cp "$work/first.pem" "$work/server.pem"
cp "$work/first.key" "$work/server.key"
tls_args="--tls-cert $work/server.pem --tls-key $work/server.key"
docroot=''
if [ -x "$webstone" ] && "$webstone" --make-docroot "$work/webstone" >/dev/null 2>&1
then
  docroot=$work/webstone
  cp -R "$docroot/mix" "$root/mix" # a link out of the root is refused
fi

# The engine: a build without OpenSSL refuses every TLS context.
# shellcheck disable=SC2086 # $tls_args: words
"$server" --root "$root" --port 0 --tls-port 0 $tls_args \
  --strategy reactive >"$out" 2>&1 &
probe=$!
track "$probe"
wait_port "$probe" "$out"
if grep -q 'no TLS engine' "$out"; then
  wait "$probe" 2>/dev/null
  forget "$probe"
  echo "jaws_tls.sh: SKIP: taxi was built without a TLS engine"
  exit 77
fi
stop_pid "$probe"

# fingerprint FILE: the SHA-256 fingerprint of the PEM certificate FILE
# (the first one in it).
fingerprint() {
  openssl x509 -noout -fingerprint -sha256 -in "$1" 2>/dev/null
}

# served_cert PORT: the fingerprint of the certificate a new client on
# PORT is served (s_client's -showcerts output, the first one).
served_cert() {
  openssl s_client -connect "127.0.0.1:$1" -servername localhost \
    -showcerts </dev/null 2>/dev/null |
    sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p' |
    sed '/-----END CERTIFICATE-----/q' >"$work/served.pem"
  fingerprint "$work/served.pem"
}

# tls_port: the TLS port from the listening line of $out (", tls on
# HOST:PORT").
tls_port() {
  sed -n 's/.*, tls on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$out" | head -n 1
}

# start NAME ARGS...: jaws on free ports; sets pid, port (plain) and
# tport (TLS).
start() {
  name=$1
  shift
  start_server "the $name server" "$out" "$server" --port 0 "$@" || return 1
  tport=$(tls_port)
  [ -n "$tport" ] || tport=$port # --tls-only: the one listener
}

stop() {
  stop_server "the $1 server" "$out" "^jaws: stopped after [0-9]* requests"
}

# https PATH [CURL ARGS]: fetch https://localhost:$tport/PATH into
# $work/got, the status on stdout.
https() {
  p=$1
  shift
  rm -f "$work/got"
  curl -s -m 30 --cacert "$work/ca.pem" -o "$work/got" -w '%{http_code}' \
    "$@" "https://localhost:$tport/$p"
}

# The checks of the TLS listener at $tport (s: the run's name).
check_tls() {
  s=$1
  if [ "$(https small.txt)" = 200 ] && cmp -s "$work/got" "$root/small.txt"
  then
    ok "$s: a small file over TLS"
  else
    bad "$s: a small file over TLS"
  fi
  if [ "$(https big.bin)" = 200 ] && cmp -s "$work/got" "$root/big.bin"; then
    ok "$s: a large file over TLS, every byte"
  else
    bad "$s: a large file over TLS ($(wc -c <"$work/got" 2>/dev/null) bytes)"
  fi
  expect "$s: a 404 over TLS" 404 "$(https no/such/file)"
  dd if="$root/big.bin" of="$work/want" bs=1000 skip=777 count=3 2>/dev/null
  if [ "$(https big.bin -r 777000-779999)" = 206 ] &&
    cmp -s "$work/got" "$work/want"; then
    ok "$s: a range over TLS"
  else
    bad "$s: a range over TLS"
  fi
  if curl -s -v -m 30 --cacert "$work/ca.pem" -o "$work/k1" -o "$work/k2" \
    "https://localhost:$tport/small.txt" "https://localhost:$tport/big.bin" \
    2>&1 | grep -q 'Re-using existing connection' &&
    cmp -s "$work/k1" "$root/small.txt" && cmp -s "$work/k2" "$root/big.bin"
  then
    ok "$s: curl keeps the TLS connection alive"
  else
    bad "$s: curl keeps the TLS connection alive"
  fi
  # Python's ssl: three requests on one connection, verified against the
  # trust store, ALPN offered (h2 first: the server speaks http/1.1 only).
  if python3 - "$tport" "$work/ca.pem" "$root" <<'EOF'; then
import socket, ssl, sys
port, ca, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2", "http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                    server_hostname="localhost")
assert s.selected_alpn_protocol() == "http/1.1", s.selected_alpn_protocol()
f = s.makefile("rb")
for name in ("small.txt", "big.bin", "small.txt"):
    s.sendall(b"GET /" + name.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    status = f.readline()
    assert status.startswith(b"HTTP/1.1 200"), status
    length = None
    while True:
        line = f.readline().strip()
        if not line:
            break
        k, v = line.split(b":", 1)
        if k.lower() == b"content-length":
            length = int(v)
    body = f.read(length)
    assert body == open(root + "/" + name, "rb").read(), name
s.close()
EOF
    ok "$s: Python ssl: three requests on one connection, ALPN http/1.1"
  else
    bad "$s: Python ssl: keep-alive and ALPN"
  fi
  # Plain HTTP on the TLS port: closed, and the server goes on.
  c=$(curl -s -o /dev/null -m 10 -w '%{http_code}' \
    "http://127.0.0.1:$tport/small.txt")
  expect "$s: plain HTTP on the TLS port gets no answer" 000 "$c"
  if [ "$(https small.txt)" = 200 ]; then
    ok "$s: TLS served after the plain client"
  else
    bad "$s: TLS served after the plain client"
  fi
  if [ "$port" != "$tport" ]; then
    expect "$s: the plain port still speaks plain HTTP" 200 \
      "$(curl -s -o /dev/null -m 10 -w '%{http_code}' \
        "http://127.0.0.1:$port/small.txt")"
  fi
}

# check_webstone: webstone --tls against $tport, the mix with every byte
# compared: kept-alive, then a connection per request with resumption.
check_webstone() {
  s=$1
  [ -n "$docroot" ] || return 0
  if "$webstone" --port "$tport" --docroot "$docroot" --clients 8 \
    --requests 400 --warmup 0 --tls --keep-alive --json \
    >"$work/ws.json" 2>"$work/ws.err"; then
    ok "$s: webstone --tls, kept-alive, every byte"
  else
    cat "$work/ws.err"
    bad "$s: webstone --tls, kept-alive"
  fi
  if "$webstone" --port "$tport" --docroot "$docroot" --clients 8 \
    --requests 200 --warmup 0 --tls-resume --json \
    >"$work/ws.json" 2>"$work/ws.err"; then
    ok "$s: webstone --tls-resume, a connection per request, every byte"
  else
    cat "$work/ws.err"
    bad "$s: webstone --tls-resume, a connection per request"
  fi
  resumed=$(sed -n 's/.*"resumed":\([0-9]*\).*/\1/p' "$work/ws.json")
  if [ "${resumed:-0}" -gt 0 ]; then
    ok "$s: sessions resumed ($resumed of 200)"
  else
    bad "$s: no session resumed"
  fi
}

# check_no_handshake: two clients that never complete a handshake are
# closed by the header timeout (1 s here), long before the idle timeout
# (60 s here), while a third gets its file.
check_no_handshake() {
  s=$1
  if python3 - "$tport" "$work/ca.pem" "$((30 * scale))" <<'EOF'; then
import socket, ssl, sys, time
port, ca, bound = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
silent = socket.create_connection(("127.0.0.1", port))
half = socket.create_connection(("127.0.0.1", port))
half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a hello cut short
# A client meanwhile is served.
ctx = ssl.create_default_context(cafile=ca)
t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                    server_hostname="localhost")
t.sendall(b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
got = b""
while True:
    b = t.recv(65536)
    if not b:
        break
    got += b
assert got.startswith(b"HTTP/1.1 200"), got[:40]
for c in (silent, half):
    c.settimeout(bound)
    try:
        data = c.recv(100)
    except ConnectionResetError:
        data = b""
    # Closed (nothing, or an alert before the close), never a timeout.
    while data:
        try:
            data = c.recv(100)
        except ConnectionResetError:
            data = b""
EOF
    ok "$s: clients with no handshake closed by the header timeout"
  else
    bad "$s: clients with no handshake closed by the header timeout"
  fi
}

# check_reload: SIGHUP makes the server read its files again: the next
# client gets the second certificate, a connection opened before goes on;
# a broken file keeps the certificate in use.
check_reload() {
  s=$1
  cp "$work/first.pem" "$work/server.pem"
  cp "$work/first.key" "$work/server.key"
  expect "$s: the first certificate served" "$(fingerprint "$work/first.pem")" \
    "$(served_cert "$tport")"
  # A kept-alive connection from before the reload, its second request
  # made once the reload is logged (the fifo tells it when).
  rm -f "$work/go"
  mkfifo "$work/go"
  python3 - "$tport" "$work/ca.pem" "$work/go" "$root" >"$work/old.out" 2>&1 <<'EOF' &
import socket, ssl, sys
port, ca, go, root = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                    server_hostname="localhost")
first = s.getpeercert(binary_form=True)
f = s.makefile("rb")
def get():
    s.sendall(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert f.readline().startswith(b"HTTP/1.1 200")
    n = 0
    while True:
        line = f.readline().strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    assert f.read(n) == open(root + "/small.txt", "rb").read()
get()
print("ready", flush=True)
open(go).read()
get()
assert s.getpeercert(binary_form=True) == first
print("old connection served", flush=True)
EOF
  old=$!
  track "$old"
  wait_for "$work/old.out" '^ready' "$((20 * scale))"
  cp "$work/second.pem" "$work/server.pem"
  cp "$work/second.key" "$work/server.key"
  kill -HUP "$pid"
  if wait_for "$out" 'TLS reloaded' "$((10 * scale))"; then
    ok "$s: SIGHUP: the reload logged"
  else
    bad "$s: SIGHUP: the reload logged"
  fi
  expect "$s: the new certificate served to the next client" \
    "$(fingerprint "$work/second.pem")" "$(served_cert "$tport")"
  echo go >"$work/go"
  wait_pid "$old" "$((20 * scale))"
  if grep -q 'old connection served' "$work/old.out"; then
    ok "$s: a connection from before the reload goes on"
  else
    cat "$work/old.out"
    bad "$s: a connection from before the reload goes on"
  fi
  rm -f "$work/go"
  # A broken certificate file: the reload fails, the second stays.
  echo "not a certificate" >"$work/server.pem"
  kill -HUP "$pid"
  if wait_for "$out" 'TLS reload failed' "$((10 * scale))"; then
    ok "$s: SIGHUP with a broken file: the failure logged"
  else
    bad "$s: SIGHUP with a broken file: the failure logged"
  fi
  expect "$s: the certificate in use stays" \
    "$(fingerprint "$work/second.pem")" "$(served_cert "$tport")"
  cp "$work/first.pem" "$work/server.pem"
  cp "$work/first.key" "$work/server.key"
}

runs=${JAWS_TLS_RUNS:-reactive lf hsha proactive adaptive default}
for run in $runs; do
  case $run in
    default) pick='' ;;
    *) pick="--strategy $run" ;;
  esac
  # Files up to 8 MiB are held in memory by default (--memory-max): these
  # runs send the large one from its handle, through the engine in pieces.
  case $run in
    reactive | proactive | adaptive) pick="$pick --memory-max 65536" ;;
  esac
  # shellcheck disable=SC2086 # $pick, $tls_args: words
  if ! start "$run" $pick --root "$root" --tls-port 0 $tls_args \
    --header-timeout 1000 --idle-timeout 60000; then
    bad "$run: start"
    continue
  fi
  expect "$run: a TLS listener beside the plain one" 1 \
    "$(grep -c 'listening on [^ ]*, tls on [^ ]*:[0-9]' "$out")"
  check_tls "$run"
  check_webstone "$run"
  check_no_handshake "$run"
  check_reload "$run"
  if stop "$run"; then ok "$run: stopped"; else bad "$run: stop"; fi
done

# --tls-only: the one listener on --port is TLS.
for run in reactive default; do
  case $run in
    default) pick='' ;;
    *) pick="--strategy $run" ;;
  esac
  # shellcheck disable=SC2086 # $pick, $tls_args: words
  if ! start "$run --tls-only" $pick --root "$root" --tls-only $tls_args; then
    bad "$run --tls-only: start"
    continue
  fi
  expect "$run --tls-only: one listener, TLS" 1 \
    "$(grep -c 'listening on [^ ]*:[0-9]* (tls)$' "$out")"
  if [ "$(https big.bin)" = 200 ] && cmp -s "$work/got" "$root/big.bin"; then
    ok "$run --tls-only: a large file over TLS"
  else
    bad "$run --tls-only: a large file over TLS"
  fi
  expect "$run --tls-only: plain HTTP gets no answer" 000 \
    "$(curl -s -o /dev/null -m 10 -w '%{http_code}' \
      "http://127.0.0.1:$tport/small.txt")"
  if stop "$run --tls-only"; then
    ok "$run --tls-only: stopped"
  else
    bad "$run --tls-only: stop"
  fi
done

# refused WHAT STATUS ARGS...: jaws with ARGS exits STATUS without
# listening.
refused() {
  what=$1 want=$2
  shift 2
  "$server" --root "$root" --port 0 "$@" >"$work/refused.out" 2>&1 &
  r=$!
  track "$r"
  wait_pid "$r" "$((10 * scale))"
  if [ "$status" = "$want" ] && ! grep -q 'listening on' "$work/refused.out"
  then
    ok "refused: $what (exit $want)"
  else
    cat "$work/refused.out"
    bad "refused: $what: exit $status, expected $want"
  fi
}
for st in thread-per-connection thread-per-request thread-pool; do
  # shellcheck disable=SC2086 # $tls_args: words
  refused "TLS on $st" 2 --strategy "$st" --tls-port 0 $tls_args
done
if grep -q 'thread-per-X strategies serve plain HTTP only' "$work/refused.out"
then
  ok "refused: the thread-per-X refusal says why"
else
  bad "refused: the thread-per-X refusal says why"
fi
refused "a certificate without its key" 2 --tls-port 0 \
  --tls-cert "$work/server.pem"
# shellcheck disable=SC2086 # $tls_args: words
refused "neither --tls-port nor --tls-only" 2 $tls_args
# shellcheck disable=SC2086 # $tls_args: words
refused "both --tls-port and --tls-only" 2 --tls-port 0 --tls-only $tls_args
refused "--tls-port without a certificate" 2 --tls-port 0
refused "a missing certificate file" 1 --tls-port 0 \
  --tls-cert "$work/none.pem" --tls-key "$work/server.key"

finish
