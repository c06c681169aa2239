/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/spares.h - a bounded free list of records of one size, under
 * a lock of its own, for what is made and dropped once per connection
 * (a backend's per-handle record): kept records are reused, so a steady
 * stream of short connections allocates nothing.
 */
#ifndef TAXI_CORE_SPARES_H
#define TAXI_CORE_SPARES_H

#include <stddef.h>

#include "port.h"

typedef struct taxi__spares {
  taxi__mutex_t lock;
  void *head; /* each kept record's first bytes link to the next */
  unsigned count, max;
  size_t size;
} taxi__spares_t;

/* Keep up to max records of `size` bytes (at least a pointer's): 0, or the
 * error of making the lock. */
int taxi__spares_init(taxi__spares_t *sp, size_t size, unsigned max);
/* A zeroed record: a kept one, or a new one (NULL: out of memory). */
void *taxi__spares_get(taxi__spares_t *sp);
/* Keep p (from taxi__spares_get) for reuse, or free it when max are kept.
 * Takes sp's lock only: callable with any other lock held. */
void taxi__spares_put(taxi__spares_t *sp, void *p);
/* Free the kept records and the lock (nothing else uses sp any more). */
void taxi__spares_fini(taxi__spares_t *sp);

#endif /* TAXI_CORE_SPARES_H */
