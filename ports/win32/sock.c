/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/sock.c - the stream layer's socket calls over Winsock (see
 * ports/sock.h).  The addresses are in ports/sockaddr.c, shared with
 * POSIX.
 */
#include "config.h"

#include "win32_impl.h"

#include <mstcpip.h> /* SIO_KEEPALIVE_VALS */

#include "ports/sock.h"

#include <stdio.h>
#include <string.h>

/* ---- sockets --------------------------------------------------------------
 */

static int new_socket(int family, taxi_handle_t *out) {
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  SOCKET s = WSASocketW(family, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
                        WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) return taxi__last_error();
  rc = taxi__set_nonblocking((taxi_handle_t)s);
  if (rc < 0) {
    closesocket(s);
    return rc;
  }
  *out = (taxi_handle_t)s;
  return 0;
}

int taxi__sock_open(const taxi_addr_t *a, taxi_handle_t *out) {
  int family = taxi__sockaddr_family(a);
  if (family < 0) return TAXI_ENOTSUP;
  return new_socket(family, out);
}

/* No option spreads connections over several listeners of one port. */
bool taxi__reuseport_balances(void) { return false; }

int taxi__sock_listen(const taxi_addr_t *a, int backlog, unsigned flags,
                      taxi_handle_t *out) {
  taxi_handle_t h;
  int family = taxi__sockaddr_family(a);
  if (family < 0) return TAXI_ENOTSUP;
  if (flags & TAXI_LISTEN_REUSEPORT) return TAXI_ENOTSUP;
  int rc = new_socket(family, &h);
  if (rc < 0) return rc;
  SOCKET s = (SOCKET)h;
  /* SO_EXCLUSIVEADDRUSE instead of SO_REUSEADDR: on Windows SO_REUSEADDR
   * lets another socket bind the same port while ours listens (and take
   * connections from it), which is not what the POSIX option means.  A
   * socket in TIME_WAIT does not block a new listener on Windows anyway. */
  BOOL one = TRUE;
  if (!(flags & TAXI_LISTEN_NO_REUSEADDR))
    (void)setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (char *)&one,
                     sizeof one);
  if (family == AF_INET6) {
    DWORD v6only = (flags & TAXI_LISTEN_V6ONLY) ? 1 : 0;
    (void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, (char *)&v6only,
                     sizeof v6only);
  }
  if (bind(s, (const struct sockaddr *)(const void *)a->sa.bytes,
           (int)a->len) != 0 ||
      listen(s, backlog > 0 ? backlog : SOMAXCONN) != 0) {
    rc = taxi__last_error();
    closesocket(s);
    return rc;
  }
  *out = h;
  return 0;
}

int taxi__sock_connect(taxi_handle_t s, const taxi_addr_t *a) {
  if (connect((SOCKET)s, (const struct sockaddr *)(const void *)a->sa.bytes,
              (int)a->len) == 0)
    return 0;
  int e = WSAGetLastError();
  if (e == WSAEWOULDBLOCK || e == WSAEINPROGRESS) return TAXI_EAGAIN;
  return taxi__sock_connect_error(e);
}

int taxi__sock_accept(taxi_handle_t listener, taxi_handle_t *out,
                      taxi_addr_t *peer) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  SOCKET s = accept((SOCKET)listener, (struct sockaddr *)&ss, &len);
  if (s == INVALID_SOCKET) {
    int e = WSAGetLastError();
    if (e == WSAEWOULDBLOCK || e == WSAECONNRESET || e == WSAEINTR)
      return TAXI_EAGAIN;
    if (e == WSAEMFILE) {
      taxi__set_os_error(e);
      return TAXI_ETOOMANY;
    }
    return taxi__error_from_os(e);
  }
  (void)taxi__set_cloexec((taxi_handle_t)s);
  int rc = taxi__set_nonblocking((taxi_handle_t)s);
  if (rc < 0) {
    closesocket(s);
    return rc;
  }
  taxi__sockaddr_set(peer, &ss, (unsigned)len);
  *out = (taxi_handle_t)s;
  return 0;
}

int taxi__sock_listening(taxi_handle_t s) {
  BOOL on = FALSE;
  int len = sizeof on;
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  if (s == TAXI_INVALID_HANDLE || !taxi__is_socket(s)) return TAXI_EBADF;
  if (getsockopt((SOCKET)s, SOL_SOCKET, SO_ACCEPTCONN, (char *)&on, &len) != 0)
    return taxi__last_error();
  return on ? 0 : TAXI_EINVAL;
}

/* ---- transfers ------------------------------------------------------------
 */

/* recv/send take an int: stay far below it. */
#define IO_MAX ((size_t)1 << 30)

int64_t taxi__sock_recv(taxi_handle_t s, void *buf, size_t len) {
  int n = recv((SOCKET)s, buf, (int)(len > IO_MAX ? IO_MAX : len), 0);
  if (n >= 0) return n;
  int e = WSAGetLastError();
  if (e == WSAEWOULDBLOCK) return TAXI_EAGAIN;
  return taxi__error_from_os(e);
}

int64_t taxi__sock_sendv(taxi_handle_t s, const taxi_buf_t *bufs, size_t n) {
  WSABUF wb[16];
  DWORD sent = 0;
  if (n > 16) n = 16;
  for (size_t i = 0; i < n; i++) {
    wb[i].buf = bufs[i].base;
    wb[i].len = (ULONG)(bufs[i].len > IO_MAX ? IO_MAX : bufs[i].len);
  }
  if (WSASend((SOCKET)s, wb, (DWORD)n, &sent, 0, NULL, NULL) == 0)
    return (int64_t)sent;
  int e = WSAGetLastError();
  if (e == WSAEWOULDBLOCK || e == WSAENOBUFS) return TAXI_EAGAIN;
  return taxi__error_from_os(e);
}

int64_t taxi__sock_sendfile(taxi_handle_t s, taxi_handle_t file, int64_t offset,
                            size_t len) {
  /* TransmitFile blocks a non-blocking socket's caller: read a piece at
   * the offset (waiting if the file was opened overlapped) and send it. */
  char chunk[16384];
  OVERLAPPED ov;
  DWORD got = 0;
  if (len > sizeof chunk) len = sizeof chunk;
  memset(&ov, 0, sizeof ov);
  ov.Offset = (DWORD)((uint64_t)offset & 0xffffffffu);
  ov.OffsetHigh = (DWORD)((uint64_t)offset >> 32);
  /* An event of this read's own: waiting on the file handle would wake on
   * any overlapped operation of it, and other threads may be reading the
   * same handle.  Its low bit set keeps the completion off a completion
   * port the handle may be bound to. */
  HANDLE ev = CreateEventW(NULL, TRUE, FALSE, NULL);
  if (ev == NULL) return taxi__error_from_os((int)GetLastError());
  ov.hEvent = (HANDLE)((uintptr_t)ev | 1);
  int64_t rc = 0;
  if (!ReadFile((HANDLE)file, chunk, (DWORD)len, &got, &ov)) {
    DWORD e = GetLastError();
    if (e == ERROR_IO_PENDING) {
      (void)WaitForSingleObject(ev, INFINITE); /* the untagged handle */
      e = GetOverlappedResult((HANDLE)file, &ov, &got, FALSE) ? 0
                                                              : GetLastError();
    }
    if (e == ERROR_HANDLE_EOF)
      rc = TAXI_EEOF;
    else if (e != 0)
      rc = taxi__error_from_os((int)e);
  }
  CloseHandle(ev);
  if (rc < 0) return rc;
  if (got == 0) return TAXI_EEOF;
  taxi_buf_t b = {chunk, got};
  return taxi__sock_sendv(s, &b, 1);
}

int taxi__sock_shutdown_write(taxi_handle_t s) {
  if (shutdown((SOCKET)s, SD_SEND) == 0) return 0;
  int e = WSAGetLastError();
  return e == WSAENOTCONN ? 0 : taxi__error_from_os(e);
}

int taxi__sock_poke(taxi_handle_t s) {
  DWORD saved = GetLastError();
  char one = 1;
  int rc = 0;
  if (send((SOCKET)s, &one, 1, 0) == SOCKET_ERROR) {
    int e = WSAGetLastError();
    if (e != WSAEWOULDBLOCK) rc = e == WSAENOBUFS ? TAXI_ENOMEM : TAXI_ESYS;
  }
  SetLastError(saved);
  return rc;
}

void taxi__sock_drain(taxi_handle_t s) {
  char buf[64];
  while (recv((SOCKET)s, buf, sizeof buf, 0) > 0) {
  }
}

/* ---- options --------------------------------------------------------------
 */

int taxi__sock_nodelay(taxi_handle_t s, bool on) {
  BOOL v = on ? TRUE : FALSE;
  if (setsockopt((SOCKET)s, IPPROTO_TCP, TCP_NODELAY, (char *)&v, sizeof v))
    return taxi__last_error();
  return 0;
}

int taxi__sock_defer_accept(taxi_handle_t s, int seconds) {
  (void)s;
  (void)seconds;
  return TAXI_ENOTSUP; /* Winsock has no such option */
}

int taxi__sock_cork(taxi_handle_t s, bool on) {
  (void)s;
  (void)on;
  return TAXI_ENOTSUP; /* Winsock has no such option */
}

int taxi__sock_keepalive(taxi_handle_t s, bool on, unsigned idle_s,
                         unsigned interval_s, unsigned count) {
  BOOL v = on ? TRUE : FALSE;
  (void)count; /* Windows fixes the number of probes (10) */
  if (setsockopt((SOCKET)s, SOL_SOCKET, SO_KEEPALIVE, (char *)&v, sizeof v))
    return taxi__last_error();
  if (on && (idle_s || interval_s)) {
    struct tcp_keepalive ka;
    DWORD ret = 0;
    ka.onoff = 1;
    ka.keepalivetime = (idle_s ? idle_s : 7200) * 1000u;
    ka.keepaliveinterval = (interval_s ? interval_s : 1) * 1000u;
    if (WSAIoctl((SOCKET)s, SIO_KEEPALIVE_VALS, &ka, sizeof ka, NULL, 0, &ret,
                 NULL, NULL) != 0)
      return taxi__last_error();
  }
  return 0;
}
