/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/sockerr.c - the errors of sockets (see ports/sock.h): how a
 * connect failed, and the error pending on a socket.  One file for every
 * system; only the names of the codes differ.
 */
#include "config.h"

#if defined(_WIN32)
#include "win32/win32_impl.h"
#else
#include <errno.h>
#include <sys/socket.h>
#endif

#include "sock.h"

#if defined(_WIN32)
#define OS_SOCKET(h) ((SOCKET)(h))
#define OS_SOCKET_ERROR() WSAGetLastError()
#define OS_ENOTSOCK WSAENOTSOCK
#define OS_ENETUNREACH WSAENETUNREACH
#define OS_EHOSTUNREACH WSAEHOSTUNREACH
#else
#define OS_SOCKET(h) (h)
#define OS_SOCKET_ERROR() errno
#define OS_ENOTSOCK ENOTSOCK
#define OS_ENETUNREACH ENETUNREACH
#define OS_EHOSTUNREACH EHOSTUNREACH
#endif

int taxi__sock_connect_error(int os_error) {
  /* No route to the peer: to the caller, the same as nobody listening. */
  if (os_error == OS_ENETUNREACH || os_error == OS_EHOSTUNREACH) {
    taxi__set_os_error(os_error);
    return TAXI_ECONNREFUSED;
  }
  return taxi__error_from_os(os_error);
}

/* SO_ERROR, which reading clears: 0 with *e set, or -1 (the OS error
 * left for the caller to read). */
static int so_error(taxi_handle_t s, int *e) {
  socklen_t len = sizeof *e;
  *e = 0;
  return getsockopt(OS_SOCKET(s), SOL_SOCKET, SO_ERROR, (void *)e, &len) == 0
             ? 0
             : -1;
}

int taxi__sock_connect_result(taxi_handle_t s) {
  int err;
  if (so_error(s, &err) != 0) return taxi__last_error();
  return err == 0 ? 0 : taxi__sock_connect_error(err);
}

int taxi__sock_pending_error(taxi_handle_t s, int *err) {
  int e;
  *err = 0;
  if (so_error(s, &e) != 0)
    return OS_SOCKET_ERROR() == OS_ENOTSOCK ? 0 : taxi__last_error();
  if (e != 0) *err = taxi__error_from_os(e);
  return 0;
}
