/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/detail.c - the per-thread detail of the last refusal.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/common/detail.h"
#include "taxi/error.h"

/* Long enough for a function name, a field path and a rule with two
 * numbers; a longer text is cut, never overflowed. */
static _Thread_local char detail[256];
static _Thread_local unsigned recorded;

int taxi__refuse(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  recorded++;
  return code;
}

unsigned taxi__refusals(void) { return recorded; }

int taxi__refuse_within(int rc, unsigned mark, const char *inner,
                        const char *outer) {
  if (rc >= 0 || recorded == mark) return rc;
  char was[sizeof detail];
  memcpy(was, detail, sizeof was);
  size_t n = strlen(inner);
  if (strncmp(was, inner, n) == 0)
    return taxi__refuse(rc, "%s%s", outer, was + n);
  /* The outer function's name alone: up to the first ':' or space.  A
   * detail that names it already was made the outer function's by an
   * earlier call of this one. */
  int name = (int)strcspn(outer, ": ");
  if (strncmp(was, outer, (size_t)name) == 0 && was[name] == ':') return rc;
  return taxi__refuse(rc, "%.*s: %s", name, outer, was);
}

const char *taxi_error_detail(void) { return detail; }
