/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_backends.c - the ordered table of readiness backends,
 * best first, and run-time selection: an override by name or environment,
 * otherwise the first in the table whose instance can actually be opened.
 */
#include "config.h"

#include "core/reactor/reactor_backends.h"
#include "ports/port.h"

#include <string.h>

extern const taxi__readiness_ops_t taxi__backend_epoll;
extern const taxi__readiness_ops_t taxi__backend_kqueue;
extern const taxi__readiness_ops_t taxi__backend_poll;
extern const taxi__readiness_ops_t taxi__backend_select;
extern const taxi__readiness_ops_t taxi__backend_apr;
extern const taxi__readiness_ops_t taxi__backend_apr_epoll;
extern const taxi__readiness_ops_t taxi__backend_apr_kqueue;
extern const taxi__readiness_ops_t taxi__backend_apr_port;
extern const taxi__readiness_ops_t taxi__backend_apr_poll;
extern const taxi__readiness_ops_t taxi__backend_apr_select;
extern const taxi__readiness_ops_t taxi__backend_wsapoll;

/* Scalable kernel sets first, then the portable iterative ones, then APR's
 * pollset: a layer over the same mechanisms, never better than taxi's own
 * backend for one of them, so chosen only by name ("apr", "apr:poll", ...)
 * or where nothing native works.  Each APR method is its own entry, with
 * the capabilities of that method. */
static const taxi__readiness_ops_t *const table[] = {
#if TAXI_HAVE_EPOLL
    &taxi__backend_epoll,
#endif
#if TAXI_HAVE_KQUEUE
    &taxi__backend_kqueue,
#endif
#if TAXI_HAVE_POLL
    &taxi__backend_poll,
#endif
#if TAXI_HAVE_WSAPOLL
    &taxi__backend_wsapoll,
#endif
#if TAXI_HAVE_SELECT
    &taxi__backend_select,
#endif
#if TAXI_HAVE_APR
    &taxi__backend_apr,        &taxi__backend_apr_epoll,
    &taxi__backend_apr_kqueue, &taxi__backend_apr_port,
    &taxi__backend_apr_poll,   &taxi__backend_apr_select,
#endif
};

#define TABLE_SIZE (sizeof table / sizeof table[0])

/* Running out of memory says nothing about whether a backend works here,
 * so it is reported as such; any other failure means it does not. */
static int try_open(const taxi__readiness_ops_t *ops, void **state) {
  int rc = ops->open(state);
  if (rc == TAXI_ENOMEM) return rc;
  return rc < 0 ? TAXI_ENOBACKEND : 0;
}

/* A backend works if an instance of it can be opened now. */
static int works(const taxi__readiness_ops_t *ops) {
  void *state = NULL;
  if (try_open(ops, &state) < 0) return 0;
  ops->close(state);
  return 1;
}

int taxi__backend_open(const char *name, const taxi__readiness_ops_t **ops,
                       void **state) {
  if (!name) {
    /* An empty TAXI_BACKEND is the same as none. */
    name = taxi__secure_getenv("TAXI_BACKEND");
    if (name && !*name) name = NULL;
  }
  if (name) {
    for (size_t i = 0; i < TABLE_SIZE; i++) {
      if (strcmp(table[i]->name, name) == 0) {
        *ops = table[i];
        return try_open(table[i], state);
      }
    }
    return TAXI_ENOBACKEND;
  }
  for (size_t i = 0; i < TABLE_SIZE; i++) {
    int rc = try_open(table[i], state);
    if (rc == 0) *ops = table[i];
    if (rc != TAXI_ENOBACKEND) return rc;
  }
  return TAXI_ENOBACKEND;
}

size_t taxi_backend_count(void) { return TABLE_SIZE; }

int taxi_backend_info(taxi_backend_info_t *info, size_t index) {
  if (!info) return TAXI_EINVAL;
  if (index >= TABLE_SIZE) return TAXI_ENOENT;
  const taxi__readiness_ops_t *ops = table[index];
  info->name = ops->name;
  info->caps = ops->caps;
  info->max_handles = ops->max_handles;
  info->available = works(ops);
  return 0;
}

int taxi_backend_names(const char **names, size_t cap) {
  if (!names && cap > 0) return TAXI_EINVAL;
  size_t n = 0;
  for (size_t i = 0; i < TABLE_SIZE; i++) {
    if (!works(table[i])) continue;
    if (n < cap) names[n] = table[i]->name;
    n++;
  }
  return (int)n;
}
