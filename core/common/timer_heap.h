/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/timer_heap.h - a binary min-heap of timers, one for the reactor's
 * taxi_timer_t and the proactor's timer operations (taxi_op_t).  The
 * owner says which of two items is due first (by deadline, then by the
 * order scheduled, so equal deadlines fire in that order) and where an
 * item keeps its index, which makes cancel O(log n).  The array grows by
 * doubling and never shrinks: scheduling allocates only when the number
 * of armed timers reaches a new high.  Not thread-safe: the owner's lock
 * protects it.
 */
#ifndef TAXI_CORE_TIMER_HEAP_H
#define TAXI_CORE_TIMER_HEAP_H

#include "taxi/handler.h"

#include <stdbool.h>
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

/* What the heap needs to know of its items. */
typedef struct taxi__timer_heap_ops {
  /* Whether a is due before b. */
  bool (*before)(const void *a, const void *b);
  /* Where the item keeps its index in the heap. */
  size_t *(*index)(void *item);
} taxi__timer_heap_ops_t;

typedef struct taxi__timer_heap {
  void **items;
  size_t count, cap;
  const taxi__timer_heap_ops_t *ops;
} taxi__timer_heap_t;

/* The index of an item that is not in the heap. */
#define TAXI__NOT_IN_HEAP ((size_t)-1)

void taxi__timer_heap_init(taxi__timer_heap_t *hp,
                           const taxi__timer_heap_ops_t *ops);
void taxi__timer_heap_destroy(taxi__timer_heap_t *hp);
/* Make room for one more without allocating later; 0 or TAXI_ENOMEM. */
int taxi__timer_heap_reserve(taxi__timer_heap_t *hp);
/* Insert; the caller reserved room first. */
void taxi__timer_heap_push(taxi__timer_heap_t *hp, void *item);
/* Take out an item that is in the heap; its index becomes
 * TAXI__NOT_IN_HEAP. */
void taxi__timer_heap_remove(taxi__timer_heap_t *hp, void *item);
/* The earliest item, or NULL.  Inline: a reactor looks at it for every
 * event it takes. */
static inline void *taxi__timer_heap_top(const taxi__timer_heap_t *hp) {
  return hp->count ? hp->items[0] : NULL;
}

#endif /* TAXI_CORE_TIMER_HEAP_H */
