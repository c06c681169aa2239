/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/socket.c - Winsock start-up and handle helpers: validity,
 * non-blocking mode, inheritance, loopback socket pairs, close, file size.
 *
 * A taxi_handle_t here is a SOCKET or a HANDLE (a file).  Both are kernel
 * handles of the same process-wide table, so one value never names both;
 * functions that must tell them apart ask getsockopt(SO_TYPE), which only
 * a socket answers.
 */
#include "config.h"

#include "win32_impl.h"

#include <string.h>

static INIT_ONCE winsock_once = INIT_ONCE_STATIC_INIT;
static int winsock_error; /* WSAStartup's result, set once */

static BOOL CALLBACK start_winsock(PINIT_ONCE once, void *param, void **ctx) {
  WSADATA data;
  (void)once;
  (void)param;
  (void)ctx;
  winsock_error = WSAStartup(MAKEWORD(2, 2), &data);
  return TRUE;
}

int taxi__winsock_init(void) {
  InitOnceExecuteOnce(&winsock_once, start_winsock, NULL, NULL);
  return winsock_error ? taxi__error_from_os(winsock_error) : 0;
}

bool taxi__is_socket(taxi_handle_t h) {
  DWORD saved = GetLastError();
  int type = 0, len = sizeof type;
  bool yes;
  if (h == TAXI_INVALID_HANDLE || taxi__winsock_init() != 0) return false;
  yes = getsockopt((SOCKET)h, SOL_SOCKET, SO_TYPE, (char *)&type, &len) == 0;
  SetLastError(saved);
  return yes;
}

int taxi__handle_check(taxi_handle_t h) {
  DWORD flags;
  if (h != TAXI_INVALID_HANDLE && h != 0) {
    if (taxi__is_socket(h)) return 0;
    /* A file, pipe or other kernel handle. */
    if (GetHandleInformation((HANDLE)h, &flags)) return 0;
  }
  taxi__set_os_error(ERROR_INVALID_HANDLE);
  return TAXI_EBADF;
}

/* Windows gives a socket no identity apart from its handle's value, and
 * gives a closed handle's value to the next kernel object of any kind
 * (an event, a thread) as soon as to a socket: the id tells a socket (0)
 * from any other handle (1), so that a registered socket closed and its
 * value taken by something else is told apart. */
int taxi__handle_identity(taxi_handle_t h, uint64_t *id) {
  DWORD flags;
  if (h != TAXI_INVALID_HANDLE && h != 0) {
    if (taxi__is_socket(h)) {
      *id = 0;
      return 0;
    }
    if (GetHandleInformation((HANDLE)h, &flags)) {
      *id = 1;
      return 0;
    }
  }
  taxi__set_os_error(ERROR_INVALID_HANDLE);
  return TAXI_EBADF;
}

int taxi__set_nonblocking(taxi_handle_t h) {
  u_long on = 1;
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  /* Only sockets have a non-blocking mode; files are read at offsets
   * (ReadFile with an OVERLAPPED), which the callers do without asking. */
  if (!taxi__is_socket(h)) return taxi__handle_check(h);
  if (ioctlsocket((SOCKET)h, FIONBIO, &on) != 0) return taxi__last_error();
  return 0;
}

/* Windows has no exec(); the equivalent is that child processes do not
 * inherit the handle. */
int taxi__set_cloexec(taxi_handle_t h) {
  if (!SetHandleInformation((HANDLE)h, HANDLE_FLAG_INHERIT, 0))
    return taxi__last_error();
  return 0;
}

static SOCKET new_tcp_socket(int family) {
  /* Overlapped-capable (what socket() gives too), not inheritable. */
  SOCKET s = WSASocketW(family, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
                        WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET && WSAGetLastError() == WSAEINVAL) {
    /* Windows 7 before SP1 does not know WSA_FLAG_NO_HANDLE_INHERIT. */
    s = WSASocketW(family, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
                   WSA_FLAG_OVERLAPPED);
    if (s != INVALID_SOCKET) (void)taxi__set_cloexec((taxi_handle_t)s);
  }
  return s;
}

/*
 * A connected pair over 127.0.0.1: listen on an ephemeral port, connect,
 * accept.  Another local process could connect to that port in between;
 * the accepted peer is therefore checked to be our own connecting socket
 * (same address and port), and anything else is refused.
 */
int taxi__socketpair(taxi_handle_t pair[2]) {
  SOCKET lst = INVALID_SOCKET, a = INVALID_SOCKET, b = INVALID_SOCKET;
  struct sockaddr_in addr, mine, peer;
  int len, rc = taxi__winsock_init();
  if (rc < 0) return rc;

  lst = new_tcp_socket(AF_INET);
  if (lst == INVALID_SOCKET) return taxi__last_error();
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  len = sizeof addr;
  if (bind(lst, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      getsockname(lst, (struct sockaddr *)&addr, &len) != 0 ||
      listen(lst, 1) != 0)
    goto fail;
  b = new_tcp_socket(AF_INET);
  if (b == INVALID_SOCKET) goto fail;
  if (connect(b, (struct sockaddr *)&addr, sizeof addr) != 0) goto fail;
  len = sizeof mine;
  if (getsockname(b, (struct sockaddr *)&mine, &len) != 0) goto fail;
  for (;;) {
    len = sizeof peer;
    a = accept(lst, (struct sockaddr *)&peer, &len);
    if (a == INVALID_SOCKET) goto fail;
    if (peer.sin_port == mine.sin_port &&
        peer.sin_addr.s_addr == mine.sin_addr.s_addr)
      break;
    closesocket(a); /* a stranger */
    a = INVALID_SOCKET;
  }
  (void)taxi__set_cloexec((taxi_handle_t)a);
  closesocket(lst);
  lst = INVALID_SOCKET;
  {
    /* Wake-ups and tests send single bytes: no Nagle delay for them. */
    BOOL one = TRUE;
    (void)setsockopt(a, IPPROTO_TCP, TCP_NODELAY, (char *)&one, sizeof one);
    (void)setsockopt(b, IPPROTO_TCP, TCP_NODELAY, (char *)&one, sizeof one);
  }
  if ((rc = taxi__set_nonblocking((taxi_handle_t)a)) < 0 ||
      (rc = taxi__set_nonblocking((taxi_handle_t)b)) < 0) {
    closesocket(a);
    closesocket(b);
    return rc;
  }
  pair[0] = (taxi_handle_t)a;
  pair[1] = (taxi_handle_t)b;
  return 0;

fail:
  rc = taxi__last_error();
  if (lst != INVALID_SOCKET) closesocket(lst);
  if (a != INVALID_SOCKET) closesocket(a);
  if (b != INVALID_SOCKET) closesocket(b);
  return rc;
}

void taxi__close(taxi_handle_t h) {
  /* Callers close on their error paths and then report the last error:
   * keep it. */
  DWORD saved = GetLastError();
  if (h == TAXI_INVALID_HANDLE) return;
  if (taxi__is_socket(h))
    closesocket((SOCKET)h);
  else
    CloseHandle((HANDLE)h);
  SetLastError(saved);
}

int taxi__file_size(taxi_handle_t h, int64_t *size) {
  LARGE_INTEGER li;
  if (taxi__handle_check(h) < 0) return TAXI_EBADF;
  if (taxi__is_socket(h) || GetFileType((HANDLE)h) != FILE_TYPE_DISK)
    return TAXI_EINVAL;
  if (!GetFileSizeEx((HANDLE)h, &li)) return taxi__last_error();
  *size = (int64_t)li.QuadPart;
  return 0;
}

int64_t taxi__file_read_at(taxi_handle_t h, void *buf, size_t len,
                           int64_t off) {
  OVERLAPPED ov;
  DWORD got = 0;
  if (taxi__handle_check(h) < 0) return TAXI_EBADF;
  memset(&ov, 0, sizeof ov);
  ov.Offset = (DWORD)((uint64_t)off & 0xffffffffu);
  ov.OffsetHigh = (DWORD)((uint64_t)off >> 32);
  if (len > 0x40000000u) len = 0x40000000u;
  if (!ReadFile((HANDLE)h, buf, (DWORD)len, &got, &ov)) {
    if (GetLastError() == ERROR_HANDLE_EOF) return 0;
    return taxi__last_error();
  }
  return (int64_t)got;
}

unsigned taxi__cpu_count(void) {
  DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  return n > 0 ? (unsigned)n : 1u;
}
