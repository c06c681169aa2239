/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/error.c - errno to TAXI_E* mapping (the per-thread record
 * behind taxi_last_os_error() is ports/os_error.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POSIX errno values under -std=c11 */
#endif
#include "config.h"

#include "port.h"

#include <errno.h>

/* Written as one switch; the values that are aliases on some systems
 * (EWOULDBLOCK == EAGAIN and ENOTSUP == EOPNOTSUPP on Linux, distinct on
 * others) are added only where they differ, to keep the cases unique. */
int taxi__map_os_error(int e) {
  switch (e) {
    case EINVAL:
      return TAXI_EINVAL;
    case ENOMEM:
    case ENOBUFS:
      return TAXI_ENOMEM;
    case EBADF:
      return TAXI_EBADF;
    case EEXIST:
      return TAXI_EEXIST;
    case ENOENT:
      return TAXI_ENOENT;
    case EAGAIN:
#if defined(EWOULDBLOCK) && EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
      return TAXI_EAGAIN;
    case ETIMEDOUT:
      return TAXI_ETIMEDOUT;
    case ECANCELED:
      return TAXI_ECANCELED;
    case EPERM:
    case EACCES:
      return TAXI_EPERM;
    case ECONNRESET:
      return TAXI_ECONNRESET;
    case ECONNREFUSED:
      return TAXI_ECONNREFUSED;
    case EPIPE:
      return TAXI_EPIPE;
    case EADDRINUSE:
      return TAXI_EADDRINUSE;
    case EBUSY:
      return TAXI_EBUSY;
    case ENOSYS:
    case EOPNOTSUPP:
#if defined(ENOTSUP) && ENOTSUP != EOPNOTSUPP
    case ENOTSUP:
#endif
      return TAXI_ENOTSUP;
    case EMSGSIZE: /* a datagram too long for the socket or the path */
      return TAXI_EMSGSIZE;
    case EMFILE: /* out of descriptors: a limit, not a fault */
    case ENFILE:
      return TAXI_ETOOMANY;
    default: /* including 0: a failure the OS did not explain */
      return TAXI_ESYS;
  }
}
