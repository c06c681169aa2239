/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/detail.c - the per-thread detail of the last refusal.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/detail.h"
#include "taxi/error.h"

/* Long enough for a function name, a field path and a rule with two
 * numbers; a longer text is cut, never overflowed. */
static _Thread_local char detail[256];

int taxi__refuse(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return code;
}

const char *taxi_error_detail(void) { return detail; }
