/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/clock.c - taxi_now(), the monotonic clock.
 *
 * CLOCK_MONOTONIC is the clock the rest of the port measures time on:
 * condition variables are bound to it (thread.c) and epoll/poll/kqueue
 * timeouts elapse on it.  On Linux it stops while the system is suspended
 * (CLOCK_BOOTTIME would not, but condition variables cannot use that one);
 * on macOS it keeps counting through sleep.  Either way it never jumps with
 * the wall clock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* clock_gettime() under -std=c11 */
#endif
#include "config.h"

#include "port.h"

#include <stdlib.h>
#include <time.h>

TAXI_EXTERN taxi_time_t taxi_now(void) {
  struct timespec ts;
  /* Fails only for an unknown clock id; CLOCK_MONOTONIC is required by
   * every system this port builds on, and a clock that silently read 0
   * would stall every timer, so a failure is not survivable. */
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) abort();
  /* int64 nanoseconds last 292 years of uptime. */
  return (taxi_time_t)ts.tv_sec * TAXI_NSEC_PER_SEC + (taxi_time_t)ts.tv_nsec;
}

void taxi__sleep(taxi_time_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / TAXI_NSEC_PER_SEC),
                        (long)(ns % TAXI_NSEC_PER_SEC)};
  /* A signal cuts the sleep short: the callers only pause between retries
   * and look at their state again afterwards, so that is fine. */
  nanosleep(&ts, NULL);
}
