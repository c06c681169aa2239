/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/registry.c - the set of live pools and reactors: a small array
 * under one process-wide lock, consulted when a pool call starts (and by
 * taxi_handler_init on a handler that names a reactor), never per event.
 */
#include "config.h"

#include "core/common/registry.h"
#include "core/common/alloc.h"
#include "ports/port.h"

static taxi__mutex_t lock = TAXI__MUTEX_INITIALIZER;
static taxi__registered_t **items;
static size_t count, cap;

static size_t find(const taxi__registered_t *obj, unsigned kind) {
  for (size_t i = 0; i < count; i++)
    if (items[i] == obj && obj->kind == kind) return i;
  return count;
}

int taxi__registry_add(taxi__registered_t *obj, unsigned kind) {
  int rc = 0;
  atomic_init(&obj->pins, 0);
  obj->kind = kind;
  taxi__mutex_lock(&lock);
  if (count == cap) {
    size_t ncap = cap ? cap * 2 : 16;
    taxi__registered_t **n = taxi__reallocarray(items, ncap, sizeof *n);
    if (!n) rc = TAXI_ENOMEM;
    if (n) {
      items = n;
      cap = ncap;
    }
  }
  if (rc == 0) items[count++] = obj;
  taxi__mutex_unlock(&lock);
  return rc;
}

bool taxi__registry_pin(taxi__registered_t *obj, unsigned kind) {
  if (!obj) return false;
  taxi__mutex_lock(&lock);
  bool found = find(obj, kind) < count;
  if (found) atomic_fetch_add(&obj->pins, 1);
  taxi__mutex_unlock(&lock);
  return found;
}

void taxi__registry_unpin(taxi__registered_t *obj) {
  atomic_fetch_sub(&obj->pins, 1);
}

bool taxi__registry_remove(taxi__registered_t *obj, unsigned kind) {
  taxi__mutex_lock(&lock);
  size_t i = find(obj, kind);
  bool found = i < count;
  if (found) items[i] = items[--count];
  if (count == 0) {
    /* Give the memory back when the last pool goes, so that a program
     * (or a test counting allocations) ends with nothing held. */
    taxi__free(items);
    items = NULL;
    cap = 0;
  }
  taxi__mutex_unlock(&lock);
  return found;
}
