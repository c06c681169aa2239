/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/backoff.h - what the dispatchers do with a failure that may pass:
 * a bounded, growing pause between attempts, and the point where a failure that
 * keeps coming back counts as persistent.
 *
 * A dispatching thread that meets a transient failure (the OS short of
 * memory or buffers for a wait, a re-arm, an accept) must neither spin
 * (retrying at once would fail again and burn a CPU) nor give up at the
 * first refusal (one ENOMEM must not kill a pool).  It waits 1 ms, then
 * twice as long each time the same step fails again, up to
 * TAXI__BACKOFF_MAX_NS; after TAXI__BACKOFF_LIMIT consecutive failures the
 * error is treated as persistent and stops the dispatcher.  Any success of
 * the step resets the count.
 */
#ifndef TAXI_CORE_BACKOFF_H
#define TAXI_CORE_BACKOFF_H

#include "taxi/error.h"
#include "taxi/platform.h"

#include <stdatomic.h>
#include <stdbool.h>

#define TAXI__BACKOFF_FIRST_NS ((taxi_time_t)1000000) /* 1 ms */
#define TAXI__BACKOFF_MAX_NS ((taxi_time_t)256000000) /* 256 ms */
/* About 2 s of pauses in all before a failure counts as persistent. */
#define TAXI__BACKOFF_LIMIT 16u

typedef struct taxi__backoff {
  unsigned failures; /* consecutive, since the last success */
} taxi__backoff_t;

/* Whether `code` may pass by itself if the step is tried again later. */
bool taxi__error_transient(int code);

/* Record a failure.  Returns the pause to take before the next attempt,
 * or -1 when the failures are now too many: the error is persistent. */
taxi_time_t taxi__backoff_failed(taxi__backoff_t *b);

/* Record a success: the next failure starts from the first pause again. */
static inline void taxi__backoff_reset(taxi__backoff_t *b) { b->failures = 0; }

/* Tell an error callback (if any) of a failure: code, the step that failed,
 * the handle concerned (or TAXI_INVALID_HANDLE), the consecutive failures
 * so far, and whether the dispatcher stopped because of it.  The OS error
 * is the calling thread's last (taxi_last_os_error()).  Call with no lock
 * held: the callback is the application's code. */
void taxi__report_error(taxi_error_fn fn, void *arg, int code,
                        const char *where, taxi_handle_t handle,
                        unsigned attempt, bool fatal);

/* A dispatcher's own wait failed with `code`: report it (fatal when it is
 * persistent or the failures are too many) and, if it may pass, pause -
 * no later than `deadline`, and in slices that end soon after *stopped is
 * set.  Returns 0 to wait again, or `code`: the dispatcher stops (the
 * count is reset for a later run).  Call with no lock held. */
int taxi__backoff_wait_failed(taxi__backoff_t *b, taxi_error_fn fn, void *arg,
                              int code, taxi_time_t deadline,
                              const atomic_bool *stopped);

#endif /* TAXI_CORE_BACKOFF_H */
