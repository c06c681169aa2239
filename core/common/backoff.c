/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/backoff.c - bounded exponential backoff (see
 * core/common/backoff.h).
 */
#include "config.h"

#include "core/common/backoff.h"
#include "core/common/time_math.h"
#include "ports/port.h"

bool taxi__error_transient(int code) {
  /* TAXI_ENOMEM covers ENOMEM and ENOBUFS; TAXI_ETOOMANY from an accept is
   * EMFILE/ENFILE: descriptors come back when connections close. */
  return code == TAXI_EAGAIN || code == TAXI_ENOMEM || code == TAXI_ETOOMANY;
}

taxi_time_t taxi__backoff_failed(taxi__backoff_t *b) {
  if (b->failures >= TAXI__BACKOFF_LIMIT) return -1;
  unsigned n = b->failures++;
  taxi_time_t pause = TAXI__BACKOFF_FIRST_NS;
  while (n-- > 0 && pause < TAXI__BACKOFF_MAX_NS) pause *= 2;
  return pause < TAXI__BACKOFF_MAX_NS ? pause : TAXI__BACKOFF_MAX_NS;
}

void taxi__report_error(taxi_error_fn fn, void *arg, int code,
                        const char *where, taxi_handle_t handle,
                        unsigned attempt, bool fatal) {
  if (!fn) return;
  taxi_error_report_t report = {code,    taxi_last_os_error(), where, handle,
                                attempt, fatal ? 1 : 0};
  fn(&report, arg);
}

int taxi__backoff_wait_failed(taxi__backoff_t *b, taxi_error_fn fn, void *arg,
                              int code, taxi_time_t deadline,
                              const atomic_bool *stopped) {
  taxi_time_t pause =
      taxi__error_transient(code) ? taxi__backoff_failed(b) : -1;
  unsigned attempt = b->failures + (pause < 0 ? 1 : 0);
  taxi__report_error(fn, arg, code, "wait", TAXI_INVALID_HANDLE, attempt,
                     pause < 0);
  if (pause < 0) {
    taxi__backoff_reset(b);
    return code;
  }
  taxi_time_t until = taxi__time_add(taxi_now(), pause);
  if (until > deadline) until = deadline;
  for (taxi_time_t t = taxi_now(); t < until && !atomic_load(stopped);
       t = taxi_now()) {
    taxi_time_t slice = until - t;
    taxi__sleep(slice < 10 * TAXI_NSEC_PER_MSEC ? slice
                                                : 10 * TAXI_NSEC_PER_MSEC);
  }
  return 0;
}
