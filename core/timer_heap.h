/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/timer_heap.h - a binary min-heap of timer records ordered by
 * (deadline, sequence), so equal deadlines fire in the order scheduled.
 * Each record remembers its index, making cancel O(log n).  The array grows
 * by doubling and never shrinks: scheduling allocates only when the number
 * of armed timers reaches a new high.  Not thread-safe: the reactor's lock
 * protects it.
 */
#ifndef TAXI_CORE_TIMER_HEAP_H
#define TAXI_CORE_TIMER_HEAP_H

#include "taxi/handler.h"

#include <stddef.h>
#include <stdint.h>

/* Milliseconds a backend's wait may take to reach `deadline`, rounded up
 * so that a timer is never found not yet due after the wait; -1 for no
 * deadline (INT64_MAX).  Shared by the reactor and the proactor. */
static inline int taxi__deadline_ms(taxi_time_t now, taxi_time_t deadline) {
  if (deadline == INT64_MAX) return -1;
  if (deadline <= now) return 0;
  taxi_time_t ms =
      (deadline - now + TAXI_NSEC_PER_MSEC - 1) / TAXI_NSEC_PER_MSEC;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

typedef struct taxi__timer_heap {
  taxi_timer_t **items;
  size_t count, cap;
} taxi__timer_heap_t;

/* heap_index of a timer that is not in the heap. */
#define TAXI__NOT_IN_HEAP ((size_t)-1)

void taxi__timer_heap_init(taxi__timer_heap_t *hp);
void taxi__timer_heap_destroy(taxi__timer_heap_t *hp);
/* Make room for one more without allocating later; 0 or TAXI_ENOMEM. */
int taxi__timer_heap_reserve(taxi__timer_heap_t *hp);
/* Insert; the caller reserved room first. */
void taxi__timer_heap_push(taxi__timer_heap_t *hp, taxi_timer_t *t);
void taxi__timer_heap_remove(taxi__timer_heap_t *hp, taxi_timer_t *t);
/* The earliest timer, or NULL. */
taxi_timer_t *taxi__timer_heap_top(const taxi__timer_heap_t *hp);

#endif /* TAXI_CORE_TIMER_HEAP_H */
