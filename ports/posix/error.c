/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/error.c - errno to TAXI_E* mapping and the per-thread record
 * behind taxi_last_os_error().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POSIX errno values under -std=c11 */
#endif
#include "config.h"

#include "port.h"

#include <errno.h>

/*
 * The recorded error is read and written from ordinary code only, but
 * taxi__wakeup_signal() may record one from a signal handler.  With the
 * default (general-dynamic) TLS model of a shared library the first access
 * in a thread may call into the dynamic loader, which can allocate: not
 * async-signal-safe.  initial-exec places the variable in the static TLS
 * block, so every access is a plain load or store.  The price is 4 bytes of
 * glibc's static TLS surplus when the library is dlopen()ed, which is what
 * the surplus exists for.  Mach-O has no such model; there only the
 * wake-up's error path (a closed channel, i.e. misuse) touches it.
 */
#if defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define TAXI__TLS_SIGNAL_SAFE __attribute__((tls_model("initial-exec")))
#else
#define TAXI__TLS_SIGNAL_SAFE
#endif

static _Thread_local int last_os_error TAXI__TLS_SIGNAL_SAFE;

/* Written as one switch; the values that are aliases on some systems
 * (EWOULDBLOCK == EAGAIN and ENOTSUP == EOPNOTSUPP on Linux, distinct on
 * others) are added only where they differ, to keep the cases unique. */
static int map_errno(int e) {
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
    case EMFILE: /* out of descriptors: a limit, not a fault */
    case ENFILE:
      return TAXI_ETOOMANY;
    default: /* including 0: a failure the OS did not explain */
      return TAXI_ESYS;
  }
}

int taxi__error_from_os(int os_error) {
  last_os_error = os_error;
  return map_errno(os_error);
}

int taxi__last_error(void) { return taxi__error_from_os(errno); }

void taxi__set_os_error(int os_error) { last_os_error = os_error; }

TAXI_EXTERN int taxi_last_os_error(void) { return last_os_error; }
