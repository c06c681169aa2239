/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/os_error.c - the per-thread record behind taxi_last_os_error(),
 * and reading the thread's last OS error (errno, or GetLastError() on
 * Windows), one file for every system; each port maps its own codes
 * (taxi__map_os_error: ports/posix/error.c, ports/win32/error.c).
 */
#include "config.h"

#if defined(_WIN32)
#include "win32/win32_impl.h"
/* Winsock's WSAGetLastError() is GetLastError(): one for both families. */
#define OS_LAST_ERROR() ((int)GetLastError())
#else
#include <errno.h>
#define OS_LAST_ERROR() errno
#endif

#include "port.h"

/*
 * The recorded error is read and written from ordinary code only, but
 * taxi__wakeup_signal() may record one from a signal handler.  With the
 * default (general-dynamic) TLS model of a shared library the first access
 * in a thread may call into the dynamic loader, which can allocate: not
 * async-signal-safe.  initial-exec places the variable in the static TLS
 * block, so every access is a plain load or store.  The price is 4 bytes of
 * glibc's static TLS surplus when the library is dlopen()ed, which is what
 * the surplus exists for.  Mach-O has no such model; there only the
 * wake-up's error path (a closed channel, i.e. misuse) touches it.  (Not
 * ELF: Windows, where no signal handler records one.)
 */
#if defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define TAXI__TLS_SIGNAL_SAFE __attribute__((tls_model("initial-exec")))
#else
#define TAXI__TLS_SIGNAL_SAFE
#endif

static _Thread_local int last_os_error TAXI__TLS_SIGNAL_SAFE;

int taxi__error_from_os(int os_error) {
  last_os_error = os_error;
  return taxi__map_os_error(os_error);
}

int taxi__last_error(void) { return taxi__error_from_os(OS_LAST_ERROR()); }

void taxi__set_os_error(int os_error) { last_os_error = os_error; }

TAXI_EXTERN int taxi_last_os_error(void) { return last_os_error; }
