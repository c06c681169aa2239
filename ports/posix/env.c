/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/env.c - getenv() that refuses to answer in privileged
 * (set-user-ID / set-group-ID) programs, whose environment belongs to a
 * less privileged user.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* secure_getenv() in glibc */
#endif
#include "config.h"

#include "port.h"

#include <stdlib.h>
#include <unistd.h>

const char *taxi__secure_getenv(const char *name) {
#if defined(HAVE_SECURE_GETENV)
  /* glibc: NULL whenever AT_SECURE is set, which also covers file
   * capabilities and security-module transitions. */
  return secure_getenv(name);
#elif defined(HAVE_ISSETUGID)
  /* BSDs and macOS: true if the process was started set-ID, even after it
   * dropped the privilege again. */
  return issetugid() ? NULL : getenv(name);
#else
  /* Last resort: catches set-ID programs that still differ in real and
   * effective IDs, not ones that gained privilege otherwise (capabilities)
   * or already switched back. */
  if (getuid() != geteuid() || getgid() != getegid()) return NULL;
  return getenv(name);
#endif
}
