/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/error.c - Win32 and Winsock error codes to TAXI_E* (the
 * per-thread record behind taxi_last_os_error() is ports/os_error.c).
 *
 * Winsock's WSAGetLastError() is the thread's GetLastError() value, so one
 * table maps both families; the WSAE* codes (10000 and up) and the
 * ERROR_* codes do not overlap (the WSA_* overlapped-I/O codes are the
 * ERROR_* ones under another name, so they appear once).
 */
#include "config.h"

#include "win32_impl.h"

int taxi__map_os_error(int os_error) {
  DWORD e = (DWORD)os_error;
  switch (e) {
    case ERROR_INVALID_PARAMETER:
    case WSAEINVAL:
    case WSAEFAULT:
    case WSAEAFNOSUPPORT:
    case WSAEPROTONOSUPPORT:
      return TAXI_EINVAL;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
    case ERROR_NO_SYSTEM_RESOURCES:
    case WSAENOBUFS:
      return TAXI_ENOMEM;
    case ERROR_INVALID_HANDLE:
    case WSAENOTSOCK:
    case WSAEBADF:
      return TAXI_EBADF;
    case ERROR_ALREADY_EXISTS:
    case ERROR_FILE_EXISTS:
    case WSAEISCONN:
      return TAXI_EEXIST;
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_NOT_FOUND:
      return TAXI_ENOENT;
    case WSAEWOULDBLOCK:
    case WSAEINPROGRESS:
    case WSAEALREADY:
    case ERROR_IO_PENDING:
    case WSA_IO_INCOMPLETE:
      return TAXI_EAGAIN;
    case ERROR_TIMEOUT:
    case WAIT_TIMEOUT:
    case WSAETIMEDOUT:
      return TAXI_ETIMEDOUT;
    case ERROR_OPERATION_ABORTED:
    case WSAEINTR: /* a blocking call cancelled by WSACancelBlockingCall */
    case WSAECANCELLED:
      return TAXI_ECANCELED;
    case ERROR_ACCESS_DENIED:
    case WSAEACCES:
      return TAXI_EPERM;
    case WSAECONNRESET:
    case WSAECONNABORTED:
    case WSAENETRESET:
    case ERROR_NETNAME_DELETED: /* a reset seen by an overlapped socket */
    case ERROR_CONNECTION_ABORTED:
      return TAXI_ECONNRESET;
    case WSAECONNREFUSED:
    case ERROR_CONNECTION_REFUSED:
      return TAXI_ECONNREFUSED;
    case WSAESHUTDOWN:
    case ERROR_BROKEN_PIPE:
    case ERROR_NO_DATA:
      return TAXI_EPIPE;
    case WSAEADDRINUSE:
      return TAXI_EADDRINUSE;
    case WSAEMSGSIZE: /* a datagram too long (a receive's is truncation) */
      return TAXI_EMSGSIZE;
    case ERROR_BUSY:
    case ERROR_SHARING_VIOLATION:
      return TAXI_EBUSY;
    case ERROR_NOT_SUPPORTED:
    case ERROR_CALL_NOT_IMPLEMENTED:
    case WSAEOPNOTSUPP:
      return TAXI_ENOTSUP;
    case ERROR_TOO_MANY_OPEN_FILES:
    case WSAEMFILE:
      return TAXI_ETOOMANY;
    case ERROR_HANDLE_EOF:
      return TAXI_EEOF;
    default: /* including 0: a failure the OS did not explain */
      return TAXI_ESYS;
  }
}
