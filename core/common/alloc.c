/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/alloc.c - the allocator hook.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "taxi/alloc.h"
#include "taxi/error.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Set before any other taxi call (documented), so plain reads are enough. */
static taxi_malloc_fn alloc_malloc = malloc;
static taxi_realloc_fn alloc_realloc = realloc;
static taxi_free_fn alloc_free = free;

/* Threads of taxi's that may outlive their object (a resolver thread in a
 * lookup no one can interrupt, after taxi_io_destroy): each still
 * allocates and frees.  Its end is a release, read with acquire below, so
 * that a new allocator is installed only after their last free. */
static atomic_int lingering;

void taxi__linger_begin(void) {
  atomic_fetch_add_explicit(&lingering, 1, memory_order_relaxed);
}

void taxi__linger_end(void) {
  atomic_fetch_sub_explicit(&lingering, 1, memory_order_release);
}

int taxi_set_allocator(taxi_malloc_fn m, taxi_realloc_fn r, taxi_free_fn f) {
  if (atomic_load_explicit(&lingering, memory_order_acquire) > 0)
    return TAXI_EBUSY;
  if (!m && !r && !f) {
    alloc_malloc = malloc;
    alloc_realloc = realloc;
    alloc_free = free;
    return 0;
  }
  if (!m || !r || !f) return TAXI_EINVAL;
  alloc_malloc = m;
  alloc_realloc = r;
  alloc_free = f;
  return 0;
}

void *taxi__malloc(size_t size) { return alloc_malloc(size ? size : 1); }

void *taxi__calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = taxi__malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void *taxi__realloc(void *p, size_t size) {
  return alloc_realloc(p, size ? size : 1);
}

void *taxi__reallocarray(void *p, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  return taxi__realloc(p, n * size);
}

void taxi__free(void *p) {
  if (p) alloc_free(p);
}
