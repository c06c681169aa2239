# SPDX-License-Identifier: Apache-2.0
"""fake_server.py - a web server that misbehaves in one chosen way, so that
tests/bench_webstone.sh can check that webstone counts each failure as its
kind.

    python3 fake_server.py MODE FILE

Listens on a free loopback port, prints it, and answers every request with
FILE's bytes, wrongly: MODE status (404), short (the body cut after 100
bytes), length (a Content-Length one byte short), drop (closes without
answering) or silent (never answers).
"""
import socket
import sys
import threading

MODE = sys.argv[1]
with open(sys.argv[2], "rb") as f:
    BODY = f.read()
HEAD = "HTTP/1.1 %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"


def serve(conn):
    request = b""
    while b"\r\n\r\n" not in request:
        got = conn.recv(4096)
        if not got:
            break
        request += got
    if MODE == "status":
        conn.sendall((HEAD % ("404 Not Found", 0)).encode())
    elif MODE == "short":
        conn.sendall((HEAD % ("200 OK", len(BODY))).encode() + BODY[:100])
    elif MODE == "length":
        conn.sendall((HEAD % ("200 OK", len(BODY) - 1)).encode() + BODY[:-1])
    elif MODE == "silent":
        threading.Event().wait(30)
    conn.close()


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


main()
