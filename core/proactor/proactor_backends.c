/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_backends.c - the ordered table of completion backends,
 * best first, and run-time selection: by name, by TAXI_PROACTOR, or the
 * first in the table that opens.
 *
 * Layer 1 (see core/proactor/proactor_impl.h): it calls the backends'
 * open and ports/ (the environment); the life cycle calls it.
 */
#include "config.h"

#include "core/proactor/proactor_backends.h"
#include "ports/port.h"

#include <string.h>

extern const taxi__completion_ops_t taxi__completion_uring;
extern const taxi__completion_ops_t taxi__completion_iocp;
extern const taxi__completion_ops_t taxi__completion_aio;
extern const taxi__completion_ops_t taxi__completion_emulated;

/* Kernel completion queues first; POSIX aio (threads in glibc) next; the
 * emulation over a reactor works everywhere, so it comes last. */
static const taxi__completion_ops_t *const table[] = {
#if TAXI_HAVE_URING
    &taxi__completion_uring,
#endif
#if TAXI_HAVE_IOCP
    &taxi__completion_iocp,
#endif
#if TAXI_HAVE_AIO
    &taxi__completion_aio,
#endif
    &taxi__completion_emulated,
};

#define TABLE_SIZE (sizeof table / sizeof table[0])

int taxi_proactor_backend_names(const char **out, size_t cap) {
  if (!out && cap) return TAXI_EINVAL;
  for (size_t i = 0; i < TABLE_SIZE && i < cap; i++) out[i] = table[i]->name;
  return (int)TABLE_SIZE;
}

/* "name" or "name:variant": does `want` name this backend?  *variant is
 * set to what follows the colon (NULL if nothing does). */
static bool matches(const taxi__completion_ops_t *ops, const char *want,
                    const char **variant) {
  size_t n = strlen(ops->name);
  if (strncmp(want, ops->name, n) != 0) return false;
  if (want[n] == '\0') {
    *variant = NULL;
    return true;
  }
  if (want[n] != ':') return false;
  *variant = want[n + 1] ? want + n + 1 : NULL;
  return true;
}

int taxi__proactor_backend_open(const char *name,
                                const taxi_proactor_options_t *opts,
                                taxi__completion_counters_t *counters,
                                const taxi__completion_ops_t **ops,
                                void **state) {
  if (!name) {
    /* An empty TAXI_PROACTOR is the same as none. */
    name = taxi__secure_getenv("TAXI_PROACTOR");
    if (name && !*name) name = NULL;
  }
  if (name) {
    for (size_t i = 0; i < TABLE_SIZE; i++) {
      const char *variant;
      if (!matches(table[i], name, &variant)) continue;
      int rc = table[i]->open(state, variant, opts, counters);
      if (rc == 0) *ops = table[i];
      return rc;
    }
    return TAXI_ENOBACKEND;
  }
  for (size_t i = 0; i < TABLE_SIZE; i++) {
    int rc = table[i]->open(state, NULL, opts, counters);
    if (rc == 0) {
      *ops = table[i];
      return 0;
    }
    /* Out of memory says nothing about the backend: report it.  Any other
     * refusal (ENOSYS or EPERM from io_uring, ...) means try the next. */
    if (rc == TAXI_ENOMEM) return rc;
  }
  return TAXI_ENOBACKEND;
}
