#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/win32/tls-wine.sh - TLS streams of a Windows build (the SChannel
# engine) under wine: tests/win32/tls_wine.exe in its modes (taxi against
# taxi on each Windows dispatcher; the failures), then against openssl on
# the Linux side: `openssl s_server -www` for taxi's client, `openssl
# s_client` for taxi's server (wine programs reach the host's 127.0.0.1).
#
# The certificates are made here with openssl, in the work directory
# (removed at the end); no key is kept.  RSA keys: wine's SChannel serves
# RSA keys only (docs/windows.md).  By hand:
#   builddir=. srcdir=.. sh ../tests/win32/tls-wine.sh

: "${srcdir:=$(dirname "$0")/../..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
run="sh $srcdir/tests/win32/wine-run.sh"
prog=$(wine_exe "$builddir/tests/win32" tls_wine)
if [ ! -f "$prog" ]; then
  echo "SKIP: $prog not built (a build without the SChannel engine)"
  exit 77
fi
command -v openssl >/dev/null 2>&1 || {
  echo "SKIP: no openssl command to make the certificates"
  exit 77
}
wine_setup
make_work tls-wine
engine=$($run "$prog" 2>/dev/null | sed -n 's/^TLS engine: //p')
case "$engine" in
  none | "")
    echo "SKIP: built without a TLS engine"
    exit 77
    ;;
esac

# ---- the certificates ------------------------------------------------------
certs() (
  cd "$work" || exit 1
  key="-newkey rsa:2048 -nodes"
  openssl req -x509 $key -keyout ca.key -out ca.pem -days 2 \
    -subj /CN=taxi-test-ca &&
    openssl req -x509 $key -keyout ca2.key -out ca2.pem -days 2 \
      -subj /CN=taxi-test-ca2 &&
    for leaf in srv expired srv2; do
      days=2 ca=ca
      [ $leaf = expired ] && days=-1
      [ $leaf = srv2 ] && ca=ca2
      printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >$leaf.cnf &&
        openssl req -new $key -keyout $leaf.key -out $leaf.csr \
          -subj /CN=localhost &&
        openssl x509 -req -in $leaf.csr -CA $ca.pem -CAkey $ca.key \
          -CAcreateserial -out $leaf.pem -days $days -extfile $leaf.cnf ||
        exit 1
    done &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout ecsrv.key -out ecsrv.csr -subj /CN=localhost &&
    openssl x509 -req -in ecsrv.csr -CA ca.pem -CAkey ca.key \
      -CAcreateserial -out ecsrv.pem -days 2 -extfile srv.cnf
) >"$work/certs.log" 2>&1
if ! certs; then
  cat "$work/certs.log"
  bad "the certificates could not be made"
  finish
fi
# Wine maps the host's / to drive Z:.
windir="Z:$work"

# ---- taxi against taxi, and the failures ------------------------------------
# Status 77: a part this SChannel cannot do (its message says which).
for mode in pairs fail; do
  $run "$prog" $mode "$windir" >"$work/$mode.log" 2>&1
  rc=$?
  if [ $rc -eq 77 ] && ! grep -q '^ok:' "$work/$mode.log"; then
    echo "SKIP: $mode: $(grep -c '^SKIP:' "$work/$mode.log") parts skipped"
  elif [ $rc -eq 0 ] || [ $rc -eq 77 ]; then
    ok "$mode: $(grep -c '^ok:' "$work/$mode.log") checks, $(grep -c '^SKIP:' "$work/$mode.log") skipped"
  else
    bad "$mode (exit $rc)"
  fi
  sed 's/^/    /' "$work/$mode.log"
done

# ---- taxi's client against openssl s_server ----------------------------------
# s_server on a port the kernel picked a moment before (free then).
# (Without python3, a random one of 20000-59999: the tries below.)
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    awk 'BEGIN { srand(); print 20000 + int(rand() * 40000) }'
}

# against CERT OPTIONS NAME WANT [DISPATCHER:BACKEND]: taxi's client (trusting ca.pem, asking
# for NAME) to `openssl s_server OPTIONS` serving CERT; WANT as in
# tls_wine.c's client().
against() {
  # The port may be taken between the pick and s_server's bind: a few
  # tries.
  for _ in 1 2 3; do
    sport=$(free_port) || { bad "no free port"; return; }
    (cd "$work" && exec openssl s_server -accept "127.0.0.1:$sport" \
      -cert "$1.pem" -key "$1.key" $2 -naccept 1) >"$work/s_server.log" 2>&1 &
    spid=$!
    track "$spid"
    wait_until 20 grep -q -e ACCEPT -e 'unable to bind' "$work/s_server.log"
    grep -q ACCEPT "$work/s_server.log" && break
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    forget "$spid"
  done
  if ! grep -q ACCEPT "$work/s_server.log"; then
    cat "$work/s_server.log"
    bad "openssl s_server $2 did not start"
  elif $run "$prog" client "$sport" "$windir/ca.pem" "$3" "$4" ${5:-} \
    >"$work/client.log" 2>&1; then
    ok "client, $1 $2 as $3: $(sed -n 's/^ok: //p' "$work/client.log")"
  elif grep -q '^SKIP:' "$work/client.log"; then
    grep '^SKIP:' "$work/client.log"
  else
    cat "$work/client.log" "$work/s_server.log"
    bad "client against openssl s_server $2 ($1 as $3, want $4)"
  fi
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  forget "$spid"
}

against srv "-www -alpn http/1.1" localhost page
# An echo of sorts (each line back reversed, every byte checked) on each
# Windows dispatcher: the engine under each.
for pair in reactor:wsapoll reactor:select lf:wsapoll hsha:select \
  proactor:iocp proactor:emulated; do
  against srv -rev 127.0.0.1 rev $pair
done
against srv2 -www localhost "TAXI_EBADCERT:unable to get local issuer"
against srv -www other.example "TAXI_EBADCERT:hostname mismatch"
against expired -www localhost "TAXI_EBADCERT:expired"

# ---- taxi's server against openssl s_client ----------------------------------
if start_server "the TLS echo server" "$work/server.log" $run "$prog" server \
  "$windir"; then
  # s_client sends its line and keeps reading (-ign_eof); the server
  # echoes it and sends its close_notify, to which s_client answers with
  # its own, which the server must see as the end of the stream.
  msg="taxi over SChannel $$"
  printf '%s\n' "$msg" | openssl s_client -ign_eof -connect "127.0.0.1:$port" \
    -CAfile "$work/ca.pem" -verify_return_error -servername localhost \
    -verify_hostname localhost >"$work/s_client.log" 2>&1
  src=$?
  wait_pid "$pid" 60
  if grep -q '^SKIP:' "$work/server.log"; then
    grep '^SKIP:' "$work/server.log"
  elif [ $src -eq 0 ] && grep -q "^$msg\$" "$work/s_client.log" &&
    grep -q "Verify return code: 0" "$work/s_client.log" &&
    grep -q '^ok:' "$work/server.log"; then
    ok "server: $(grep '^ok:' "$work/server.log"); s_client: $(grep -m1 'Protocol *:' "$work/s_client.log" | tr -s ' ')"
  else
    cat "$work/s_client.log" "$work/server.log"
    bad "server against openssl s_client (exit $src)"
  fi
fi
finish
