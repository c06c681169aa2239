/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/notify_queue.c - growable ring buffer of notifications.
 */
#include "config.h"

#include "core/common/notify_queue.h"
#include "core/common/alloc.h"
#include "taxi/error.h"

void taxi__notify_queue_init(taxi__notify_queue_t *q) {
  q->ring = NULL;
  q->head = q->count = q->cap = q->taken = 0;
}

void taxi__notify_queue_destroy(taxi__notify_queue_t *q) {
  taxi__free(q->ring);
  taxi__notify_queue_init(q);
}

static int grow(taxi__notify_queue_t *q) {
  size_t ncap = q->cap ? q->cap * 2 : 64;
  taxi__notification_t *ring = taxi__calloc(ncap, sizeof *ring);
  if (!ring) return TAXI_ENOMEM;
  /* Unwrap the old ring so the queue starts at index 0. */
  for (size_t i = 0; i < q->count; i++)
    ring[i] = q->ring[(q->head + i) & (q->cap - 1)];
  taxi__free(q->ring);
  q->ring = ring;
  q->head = 0;
  q->cap = ncap;
  return 0;
}

int taxi__notify_queue_push(taxi__notify_queue_t *q, taxi__notification_t n) {
  /* Room stays reserved for popped entries that may be put back. */
  if (q->count + q->taken == q->cap) {
    int rc = grow(q);
    if (rc < 0) return rc;
  }
  q->ring[(q->head + q->count) & (q->cap - 1)] = n;
  q->count++;
  return 0;
}

void taxi__notify_queue_unpop(taxi__notify_queue_t *q, taxi__notification_t n) {
  q->head = (q->head + q->cap - 1) & (q->cap - 1);
  q->ring[q->head] = n;
  q->count++;
  q->taken--;
}

void taxi__notify_queue_done(taxi__notify_queue_t *q) { q->taken--; }

bool taxi__notify_queue_pop(taxi__notify_queue_t *q,
                            taxi__notification_t *out) {
  if (!q->count) return false;
  *out = q->ring[q->head];
  q->head = (q->head + 1) & (q->cap - 1);
  q->count--;
  q->taken++;
  return true;
}
