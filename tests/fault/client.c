/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/client.c - how a test program reaches the fault-injection
 * module: found with dlsym at run time, so the program links and runs
 * without it (the fault tests then skip, saying why).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_DEFAULT */
#endif
#include "config.h"

#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* On Windows these are in iat_win32.c, which patches libtaxi's imports. */
#ifndef _WIN32

#if defined(__linux__) && defined(__GLIBC__)
#include <dlfcn.h>
#include <unistd.h>
#define FAULT_POSSIBLE 1
#endif

static const char *reason = "fault injection needs Linux with glibc";

#ifdef FAULT_POSSIBLE
static void *lookup(const char *name) { return dlsym(RTLD_DEFAULT, name); }
#else
static void *lookup(const char *name) {
  (void)name;
  return NULL;
}
#endif

bool fault_available(void) { return lookup("taxi_fault_arm") != NULL; }

int fault_arm(const char *spec) {
  int (*arm)(const char *) = (int (*)(const char *))lookup("taxi_fault_arm");
  return arm ? arm(spec) : -ENOSYS;
}

static unsigned long count(const char *fn, const char *name) {
  unsigned long (*get)(const char *) =
      (unsigned long (*)(const char *))lookup(fn);
  return get ? get(name) : 0;
}

unsigned long fault_calls(const char *name) {
  return count("taxi_fault_calls", name);
}

unsigned long fault_injected(const char *name) {
  return count("taxi_fault_injected", name);
}

const char *fault_unavailable_reason(void) { return reason; }

void fault_reexec_preloaded(int argc, char **argv) {
  (void)argc;
  (void)argv; /* used only where the module can be loaded */
  if (fault_available()) return;
#if defined(FAULT_POSSIBLE) && defined(TAXI_FAULT_MODULE)
  const char *module = TAXI_FAULT_MODULE;
  if (getenv("TAXI_FAULT_REEXEC")) {
    reason = "the fault-injection module did not load";
    return;
  }
  if (access(module, R_OK) != 0) {
    reason = "the fault-injection module is not built";
    return;
  }
  const char *old = getenv("LD_PRELOAD");
  size_t len = strlen(module) + (old ? strlen(old) + 1 : 0) + 1;
  char *preload = malloc(len);
  if (!preload) return;
  snprintf(preload, len, "%s%s%s", module, old ? ":" : "", old ? old : "");
  setenv("LD_PRELOAD", preload, 1);
  free(preload);
  setenv("TAXI_FAULT_REEXEC", "1", 1);
  /* A sanitizer runtime that is not first in the list of libraries refuses
   * to start unless told that the order is intended. */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts[1024];
  snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
           asan && *asan ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
  execv("/proc/self/exe", argv);
  reason = "re-running the program with the fault-injection module failed";
#else
  reason = "fault injection needs Linux with glibc";
#endif
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi_tests_fault_client_absent;
#endif /* !_WIN32 */
