/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/time_math.h - deadline arithmetic that cannot overflow.
 *
 * Deadlines are points on taxi_now()'s clock; INT64_MAX stands for "never".
 * Adding a span to a point saturates at INT64_MAX instead of wrapping round
 * to the past, where a timer would fire at once and forever.
 */
#ifndef TAXI_CORE_TIME_MATH_H
#define TAXI_CORE_TIME_MATH_H

#include "taxi/platform.h"

#include <stdint.h>

/* t + span, or INT64_MAX if that would not fit (span >= 0). */
static inline taxi_time_t taxi__time_add(taxi_time_t t, taxi_time_t span) {
  return span > INT64_MAX - t ? INT64_MAX : t + span;
}

/* The deadline of a wait of timeout_ms milliseconds from now; -1 (or any
 * negative value): none, INT64_MAX. */
static inline taxi_time_t taxi__deadline_after_ms(taxi_time_t now,
                                                  int timeout_ms) {
  if (timeout_ms < 0) return INT64_MAX;
  return taxi__time_add(now, (taxi_time_t)timeout_ms * TAXI_NSEC_PER_MSEC);
}

#endif /* TAXI_CORE_TIME_MATH_H */
