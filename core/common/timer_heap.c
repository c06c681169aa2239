/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/timer_heap.c - binary min-heap of timers (see timer_heap.h).
 */
#include "config.h"

#include "core/common/timer_heap.h"
#include "core/common/alloc.h"
#include "taxi/error.h"

static void place(taxi__timer_heap_t *hp, size_t i, void *item) {
  hp->items[i] = item;
  *hp->ops->index(item) = i;
}

static void sift_up(taxi__timer_heap_t *hp, size_t i) {
  void *item = hp->items[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!hp->ops->before(item, hp->items[parent])) break;
    place(hp, i, hp->items[parent]);
    i = parent;
  }
  place(hp, i, item);
}

static void sift_down(taxi__timer_heap_t *hp, size_t i) {
  void *item = hp->items[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= hp->count) break;
    if (child + 1 < hp->count &&
        hp->ops->before(hp->items[child + 1], hp->items[child]))
      child++;
    if (!hp->ops->before(hp->items[child], item)) break;
    place(hp, i, hp->items[child]);
    i = child;
  }
  place(hp, i, item);
}

void taxi__timer_heap_init(taxi__timer_heap_t *hp,
                           const taxi__timer_heap_ops_t *ops) {
  hp->items = NULL;
  hp->count = hp->cap = 0;
  hp->ops = ops;
}

void taxi__timer_heap_destroy(taxi__timer_heap_t *hp) {
  taxi__free(hp->items);
  taxi__timer_heap_init(hp, hp->ops);
}

int taxi__timer_heap_reserve(taxi__timer_heap_t *hp) {
  if (hp->count < hp->cap) return 0;
  size_t ncap = hp->cap ? hp->cap * 2 : 16;
  void **items = taxi__reallocarray(hp->items, ncap, sizeof *items);
  if (!items) return TAXI_ENOMEM;
  hp->items = items;
  hp->cap = ncap;
  return 0;
}

void taxi__timer_heap_push(taxi__timer_heap_t *hp, void *item) {
  size_t i = hp->count++;
  place(hp, i, item);
  sift_up(hp, i);
}

void taxi__timer_heap_remove(taxi__timer_heap_t *hp, void *item) {
  size_t *index = hp->ops->index(item);
  size_t i = *index;
  *index = TAXI__NOT_IN_HEAP;
  void *last = hp->items[--hp->count];
  if (i == hp->count) return;
  place(hp, i, last);
  /* The moved item may belong above or below its new position. */
  if (i > 0 && hp->ops->before(last, hp->items[(i - 1) / 2]))
    sift_up(hp, i);
  else
    sift_down(hp, i);
}
