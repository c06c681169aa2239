/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/win32_impl.h - private to the Windows port and the Windows
 * backends: Winsock start-up, the one place the OS headers are included
 * in the right order, and the socket test they all need.
 *
 * Include after config.h, and after defining FD_SETSIZE where a file uses
 * select (winsock2.h fixes it at its first inclusion).
 */
#ifndef TAXI_PORTS_WIN32_IMPL_H
#define TAXI_PORTS_WIN32_IMPL_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1 /* keep winsock.h (v1) out of windows.h */
#endif
/* winsock2.h must come before windows.h. */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>

#include <stdbool.h>

#include "ports/port.h"

/*
 * Start Winsock (version 2.2) once per process; every port function that
 * touches a socket calls this first, and so do the socket backends'
 * open().  It is never undone: WSACleanup() at unload would pull the rug
 * from under sockets the application still uses.  0 or a TAXI_E* code.
 */
int taxi__winsock_init(void);

/* Whether h is a socket (getsockopt(SO_TYPE) works on it).  Preserves the
 * thread's last error. */
bool taxi__is_socket(taxi_handle_t h);

#endif /* TAXI_PORTS_WIN32_IMPL_H */
