/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/registry.h - the pools that exist now, so that a call given a
 * pool that was destroyed (or never created) is refused with TAXI_EINVAL
 * instead of touching freed memory; and the reactors, so that
 * taxi_handler_init can tell whether the reactor a handler names exists.
 *
 * A call pins the pool for its duration; destroy unregisters it first (no
 * new pins) and then waits until the pins are gone before freeing it.
 */
#ifndef TAXI_CORE_REGISTRY_H
#define TAXI_CORE_REGISTRY_H

#include <stdatomic.h>
#include <stdbool.h>

/* Embedded in each registered object. */
typedef struct taxi__registered {
  atomic_uint pins;
  unsigned kind; /* which kind of object: a pool of one type or another */
} taxi__registered_t;

/* 0 or TAXI_ENOMEM. */
int taxi__registry_add(taxi__registered_t *obj, unsigned kind);
/* Pin obj if it is registered with that kind; false if not. */
bool taxi__registry_pin(taxi__registered_t *obj, unsigned kind);
void taxi__registry_unpin(taxi__registered_t *obj);
/* Unregister; false if it was not registered.  Pins taken before stay
 * until unpinned: wait for atomic_load(&obj->pins) == 0 before freeing. */
bool taxi__registry_remove(taxi__registered_t *obj, unsigned kind);

#define TAXI__KIND_LF 1u
#define TAXI__KIND_HSHA 2u
#define TAXI__KIND_REACTOR 3u

#endif /* TAXI_CORE_REGISTRY_H */
