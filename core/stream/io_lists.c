/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_lists.c - the context's lists of streams, listeners,
 * timers and datagram endpoints: what taxi_io_destroy must close, and waits
 * for.  Each object links itself when made and unlinks itself when gone
 * (stream.c, listener.c, io_timer.c, dgram.c); taxi_io_destroy (io.c)
 * closes those left through the close hook of their ops record.  Calls nothing
 * of the wing.
 */
#include "config.h"

#include "core/stream/dgram_impl.h"

#define LINK(head, x)             \
  do {                            \
    (x)->prev = NULL;             \
    (x)->next = (head);           \
    if (head) (head)->prev = (x); \
    (head) = (x);                 \
  } while (0)
#define UNLINK(head, x)                         \
  do {                                          \
    if ((x)->prev)                              \
      (x)->prev->next = (x)->next;              \
    else                                        \
      (head) = (x)->next;                       \
    if ((x)->next) (x)->next->prev = (x)->prev; \
    (x)->prev = (x)->next = NULL;               \
  } while (0)

int taxi__io_link_stream(taxi_io_t *io, taxi_stream_t *s) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->streams, s);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_stream(taxi_io_t *io, taxi_stream_t *s) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->streams, s);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

int taxi__io_link_listener(taxi_io_t *io, taxi_listener_t *l) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->listeners, l);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_listener(taxi_io_t *io, taxi_listener_t *l) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->listeners, l);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

int taxi__io_link_timer(taxi_io_t *io, taxi_io_timer_t *t) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->timers, t);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_timer(taxi_io_t *io, taxi_io_timer_t *t) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->timers, t);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

int taxi__io_link_dgram(taxi_io_t *io, taxi_dgram_t *d) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->dgrams, d);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_dgram(taxi_io_t *io, taxi_dgram_t *d) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->dgrams, d);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}
