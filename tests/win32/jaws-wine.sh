#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# jaws-wine.sh - examples/jaws (the static-file web server) under wine, in
# a Windows build's make check: jaws.exe in the strategies reactive, lf,
# hsha, proactive (the IOCP Proactor), thread-per-connection,
# thread-per-request, thread-pool, adaptive and the default (adaptive
# over IOCP, no --strategy), each checked by clients that run on Linux
# (curl, python3): a tree of files byte for byte (small ones from
# memory, large ones sent from the file handle), HEAD, Last-Modified and
# 304, a range (206), 404, keep-alive reuse, one file sent to 8 clients
# at once (one cached handle, different offsets), the names Windows reads its
# own way (a device name, an alternate data stream, backslashes, symbolic
# links out of the root), then an orderly stop on SIGINT (a console Ctrl-C
# event under wine).
# With WEBSTONE naming a native build's tests/bench/webstone/webstone, a
# short webstone run too (the load generator is Linux-only).
# Ends with "N passed, N failed"; exits 77 when nothing could run.

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
run="sh $srcdir/tests/win32/wine-run.sh"
server=$(wine_exe "$builddir/examples/jaws" jaws)
if [ ! -f "$server" ]; then
  echo "jaws-wine.sh: SKIP: the web server is not built"
  exit 77
fi
need_tools jaws-wine.sh curl python3
wine_setup
make_work jaws-wine
log=$work/server.log

# The document root: small files (served from memory), large ones (sent
# from the file), a symbolic link out of the root, a secret outside it.
root=$work/root
mkdir -p "$root/sub" "$work/outside"
echo "secret" >"$work/outside/secret.txt"
printf '<html>home</html>\n' >"$root/index.html"
printf 'a text file\n' >"$root/sub/a.txt"
python3 -c '
import sys
for name, size in (("medium.bin", 100000), ("big.bin", 3000000)):
    with open(sys.argv[1] + "/" + name, "wb") as f:
        f.write(bytes((i * 7 + (i >> 10)) & 255 for i in range(size)))
' "$root"
ln -s "$work/outside/secret.txt" "$root/secret-link.txt"
ln -s "$work/outside" "$root/escape"
tree="index.html sub/a.txt medium.bin big.bin"

# start STRATEGY [ARGS...]: jaws.exe on a free port; sets pid, port, url.
# STRATEGY default: no --strategy.  (wine-run.sh execs wine: the process
# started is the server.)
start() {
  how=$1
  shift
  [ "$how" = default ] || set -- --strategy "$how" "$@"
  # shellcheck disable=SC2086 # $run: the words of a command
  start_server "jaws.exe ($how)" "$log" $run "$server" --port 0 \
    --host 127.0.0.1 --root "Z:$root" "$@" || return 1
  url=http://127.0.0.1:$port
}

# stop NAME: SIGINT; within 10 s, exit status 0 and the closing line.
stop() {
  if stop_server "jaws.exe ($1)" "$log" "^jaws: stopped after [0-9]* requests"
  then
    ok "$1: stopped"
  else
    bad "$1: the stop (status $status)"
  fi
}

# code PATH [CURL ARGS]: the status curl got for $url/PATH (000: none).
code() {
  p=$1
  shift
  curl -s -o /dev/null -m 20 -w '%{http_code}' --path-as-is "$@" "$url/$p"
}

check_http() {
  s=$1
  good=1
  for f in $tree; do
    rm -f "$work/got"
    if ! curl -s -f -m 60 -o "$work/got" "$url/$f" ||
      ! cmp -s "$work/got" "$root/$f"; then
      good=0
      echo "$s: $f differs"
    fi
  done
  expect "$s: tree fetched byte for byte" 1 $good
  curl -s -m 20 -o "$work/got" "$url/"
  if cmp -s "$work/got" "$root/index.html"; then
    ok "$s: the root's index.html"
  else
    bad "$s: the root's index.html"
  fi
  expect "$s: 404" 404 "$(code missing.txt)"
  curl -s -I -m 20 "$url/big.bin" | tr -d '\r' >"$work/head"
  if grep -q '^HTTP/1.1 200' "$work/head" &&
    grep -qi '^Content-Length: 3000000$' "$work/head" &&
    grep -qi '^Last-Modified: ' "$work/head"; then
    ok "$s: HEAD"
  else
    cat "$work/head"
    bad "$s: HEAD"
  fi
  # Last-Modified is the file's time (FILETIME to the epoch), and a
  # request with it as If-Modified-Since is answered 304.
  lm=$(sed -n 's/^Last-Modified: //Ip' "$work/head")
  want=$(python3 -c '
import email.utils, os, sys
print(email.utils.formatdate(os.stat(sys.argv[1]).st_mtime, usegmt=True))
' "$root/big.bin")
  expect "$s: Last-Modified" "$want" "$lm"
  expect "$s: 304" 304 "$(code big.bin -H "If-Modified-Since: $lm")"
  # A range of the large file (sent from the handle at an offset) and of a
  # small one (from memory).
  good=1
  for f in big.bin:1000000-1999999 medium.bin:99000-99999; do
    name=${f%%:*} range=${f#*:}
    first=${range%-*} last=${range#*-}
    got=$(curl -s -m 60 -o "$work/got" -w '%{http_code}' \
      -r "$range" "$url/$name")
    if [ "$got" != 206 ] || ! python3 -c '
import sys
want = open(sys.argv[1], "rb").read()[int(sys.argv[2]):int(sys.argv[3]) + 1]
sys.exit(0 if open(sys.argv[4], "rb").read() == want else 1)
' "$root/$name" "$first" "$last" "$work/got"; then
      good=0
      echo "$s: $name range $range: status $got or bytes differ"
    fi
  done
  expect "$s: 206 with the range's bytes" 1 $good
  # Keep-alive: three requests, one of them a large file, on one
  # connection, each answer read whole by its Content-Length.
  if python3 - "$port" "$root" >"$work/keep.out" 2>&1 <<'EOF'; then
import socket, sys
port, root = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=30)
f = s.makefile("rb")
for name in ("index.html", "big.bin", "sub/a.txt"):
    s.sendall(("GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % name).encode())
    status = f.readline()
    assert status.startswith(b"HTTP/1.1 200"), status
    length = None
    while True:
        line = f.readline().strip()
        if not line:
            break
        k, _, v = line.partition(b":")
        if k.lower() == b"content-length":
            length = int(v)
    body = f.read(length)
    assert body == open(root + "/" + name, "rb").read(), name
EOF
    ok "$s: keep-alive reuse"
  else
    cat "$work/keep.out"
    bad "$s: keep-alive reuse"
  fi
  # One cached handle, many sends at once: whole files and ranges at
  # different offsets, none may take another's file position.
  if python3 - "$port" "$root/big.bin" >"$work/many.out" 2>&1 <<'EOF'; then
import socket, sys, threading
port, want = int(sys.argv[1]), open(sys.argv[2], "rb").read()
bad = []
def client(k):
    for j in range(3):
        first = (k * 100003 + j * 7919) % 2000000
        last = first + 900000 if (k + j) % 2 else len(want) - 1
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=%d-%d\r\n"
                  b"Connection: close\r\n\r\n" % (first, last))
        data = b""
        while True:
            d = s.recv(1 << 16)
            if not d:
                break
            data += d
        s.close()
        if data.partition(b"\r\n\r\n")[2] != want[first:last + 1]:
            bad.append((k, j))
threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.exit(1 if bad else 0)
EOF
    ok "$s: 8 clients sending one file at once, byte for byte"
  else
    cat "$work/many.out"
    bad "$s: 8 clients sending one file at once"
  fi
  # Names Windows reads its own way: none may reach a file it should not.
  expect "$s: a symbolic link out of the root" 403 \
    "$(code secret-link.txt)"
  expect "$s: a directory link out of the root" 403 \
    "$(code escape/secret.txt)"
  expect "$s: backslashes climbing out (refused by the parser)" 400 \
    "$(code '..%5c..%5coutside%5csecret.txt')"
  expect "$s: a device name" 404 "$(code CON)"
  # shellcheck disable=SC2016 # "$DATA" is the stream's name, not a variable
  expect "$s: an alternate data stream" 404 "$(code 'index.html::$DATA')"
}

# check_webstone NAME STRATEGY ARGS...: the server again on webstone's own
# document root, loaded by the native webstone with every byte verified.
check_webstone() {
  name=$1
  shift
  docroot=$work/webstone
  [ -d "$docroot" ] ||
    "$WEBSTONE" --make-docroot "$docroot" >/dev/null 2>&1 || return 0
  stop "$name"
  served=$root
  root=$docroot
  start "$@" || {
    root=$served
    bad "$name: restart for webstone"
    return 0
  }
  root=$served
  if "$WEBSTONE" --port "$port" --docroot "$docroot" --clients 8 --mix \
    --warmup 0 --duration 2 --time-limit 120 >"$work/ws.out" 2>&1; then
    ok "$name: webstone --mix, every byte verified"
  else
    cat "$work/ws.out"
    bad "$name: webstone"
  fi
}

for s in reactive lf hsha proactive thread-per-connection \
  thread-per-request thread-pool adaptive default; do
  set -- "$s"
  case $s in
    lf | hsha | thread-pool) set -- "$@" --threads 3 ;;
    proactive) set -- "$@" --backend iocp ;;
    # The threshold policy with low marks, so that the eight clients at
    # once make it move connections to the IOCP side (one way: IOCP
    # keeps them).
    adaptive)
      set -- "$@" --threads 2 --adapt-policy threshold \
        --adapt-connections 2:1 --adapt-large 100000
      ;;
  esac
  if ! start "$@"; then
    bad "$s: the server did not start"
    continue
  fi
  if [ "$s" = default ]; then
    # The default: adaptive, its Proactor on IOCP (no io_uring here).
    expect "default: adaptive over IOCP" 1 \
      "$(grep -c '^jaws: strategy=adaptive backend=blocking+iocp ' "$log")"
  fi
  check_http "$s"
  if [ -n "${WEBSTONE:-}" ] && [ -x "$WEBSTONE" ]; then
    check_webstone "$s" "$@"
  fi
  stop "$s"
done
finish
