/*
 * core/backoff.c - bounded exponential backoff (see core/backoff.h).
 */
#include "config.h"

#include "core/backoff.h"

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
