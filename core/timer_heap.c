/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/timer_heap.c - binary min-heap of timers.
 */
#include "config.h"

#include "core/timer_heap.h"
#include "core/alloc.h"
#include "taxi/error.h"

#include <stdbool.h>

static bool earlier(const taxi_timer_t *a, const taxi_timer_t *b) {
  if (a->internal_.deadline != b->internal_.deadline)
    return a->internal_.deadline < b->internal_.deadline;
  return a->internal_.seq < b->internal_.seq;
}

static void place(taxi__timer_heap_t *hp, size_t i, taxi_timer_t *t) {
  hp->items[i] = t;
  t->internal_.heap_index = i;
}

static void sift_up(taxi__timer_heap_t *hp, size_t i) {
  taxi_timer_t *t = hp->items[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!earlier(t, hp->items[parent])) break;
    place(hp, i, hp->items[parent]);
    i = parent;
  }
  place(hp, i, t);
}

static void sift_down(taxi__timer_heap_t *hp, size_t i) {
  taxi_timer_t *t = hp->items[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= hp->count) break;
    if (child + 1 < hp->count &&
        earlier(hp->items[child + 1], hp->items[child]))
      child++;
    if (!earlier(hp->items[child], t)) break;
    place(hp, i, hp->items[child]);
    i = child;
  }
  place(hp, i, t);
}

void taxi__timer_heap_init(taxi__timer_heap_t *hp) {
  hp->items = NULL;
  hp->count = hp->cap = 0;
}

void taxi__timer_heap_destroy(taxi__timer_heap_t *hp) {
  taxi__free(hp->items);
  taxi__timer_heap_init(hp);
}

int taxi__timer_heap_reserve(taxi__timer_heap_t *hp) {
  if (hp->count < hp->cap) return 0;
  size_t ncap = hp->cap ? hp->cap * 2 : 16;
  taxi_timer_t **items = taxi__reallocarray(hp->items, ncap, sizeof *items);
  if (!items) return TAXI_ENOMEM;
  hp->items = items;
  hp->cap = ncap;
  return 0;
}

void taxi__timer_heap_push(taxi__timer_heap_t *hp, taxi_timer_t *t) {
  size_t i = hp->count++;
  place(hp, i, t);
  sift_up(hp, i);
}

void taxi__timer_heap_remove(taxi__timer_heap_t *hp, taxi_timer_t *t) {
  size_t i = t->internal_.heap_index;
  t->internal_.heap_index = TAXI__NOT_IN_HEAP;
  taxi_timer_t *last = hp->items[--hp->count];
  if (i == hp->count) return;
  place(hp, i, last);
  /* The moved element may belong above or below its new position. */
  if (i > 0 && earlier(last, hp->items[(i - 1) / 2]))
    sift_up(hp, i);
  else
    sift_down(hp, i);
}

taxi_timer_t *taxi__timer_heap_top(const taxi__timer_heap_t *hp) {
  return hp->count ? hp->items[0] : NULL;
}
