/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/notify_queue.h - the FIFO of notifications posted to a reactor: a
 * ring buffer of {fn, arg} that doubles when full and is reused afterwards,
 * so steady posting allocates nothing.  Not thread-safe: the reactor's lock
 * protects it.
 */
#ifndef TAXI_CORE_NOTIFY_QUEUE_H
#define TAXI_CORE_NOTIFY_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct taxi__notification {
  void (*fn)(void *arg);
  void *arg;
} taxi__notification_t;

typedef struct taxi__notify_queue {
  taxi__notification_t *ring;
  size_t head, count, cap; /* cap is a power of two or 0 */
  size_t taken; /* popped and not yet run: their room is kept for unpop */
} taxi__notify_queue_t;

void taxi__notify_queue_init(taxi__notify_queue_t *q);
void taxi__notify_queue_destroy(taxi__notify_queue_t *q);
/* 0 or TAXI_ENOMEM. */
int taxi__notify_queue_push(taxi__notify_queue_t *q, taxi__notification_t n);
/* Put n back at the head (it was popped and not run): cannot fail, the
 * popped entry's room is still there. */
void taxi__notify_queue_unpop(taxi__notify_queue_t *q, taxi__notification_t n);
/* A popped notification ran: its room is free again. */
void taxi__notify_queue_done(taxi__notify_queue_t *q);
/* false when empty. */
bool taxi__notify_queue_pop(taxi__notify_queue_t *q, taxi__notification_t *out);

#endif /* TAXI_CORE_NOTIFY_QUEUE_H */
