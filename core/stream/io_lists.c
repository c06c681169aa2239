/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_lists.c - the context's lists of streams, listeners,
 * timers and datagram endpoints: what taxi_io_destroy must close, and
 * waits for.  Each object links itself when made and unlinks itself when
 * gone (stream.c, listener.c, io_timer.c, dgram.c); taxi_io_destroy (io.c)
 * closes those left through the close hook of their ops record.  Calls
 * nothing of the wing.
 *
 * Beside them, the spare blocks of released streams: a server that takes
 * a connection per request would otherwise allocate and free a block of
 * tens of kilobytes per connection, and the allocator's cost (and its
 * lock, with several dispatching threads) shows against a kernel that
 * accepts in microseconds.  A released stream's block goes back here as
 * it leaves the list, under the same lock, so that taxi_io_destroy can
 * never free the context between the two.
 *
 * And the per-message counters of the streams gone (io->retired), which
 * taxi_io_stats adds to those of the streams listed.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/dgram_impl.h"

/* The spares kept, at most: enough for a burst of short connections to
 * find their blocks again, little enough not to hold much memory once a
 * burst is over (128 blocks of the default settings are about 6 MiB).
 * With a connection per request the streams alive at once are up to
 * twice the clients: the new connections come while the old ones' ends
 * are still being processed.  At 64, 50 such clients under L/F made a
 * stream allocation every 170-700 connections. */
#define SPARE_MAX 128
#define SPARE_BYTES ((size_t)8 << 20)

/* A spare block: its first bytes, while no stream uses it. */
struct taxi__stream_block {
  struct taxi__stream_block *next;
  size_t size;
};

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

/* Add s's per-message counters to t. */
static void add_counts(taxi_stream_counters_t *t, const taxi_stream_t *s) {
#define ADD(f) t->f += atomic_load_explicit(&s->cnt.f, memory_order_relaxed)
  ADD(bytes_in);
  ADD(bytes_out);
  ADD(reads);
  ADD(writes);
  ADD(writes_refused);
  ADD(writes_no_record);
  ADD(read_pauses);
  ADD(hook_overlaps);
#undef ADD
}

/* s leaves the list: its per-message counters join those of the streams
 * gone, in the same critical section, so that taxi__io_stream_totals
 * finds them in exactly one of the two places.  io->lock held. */
static void retire_counts_locked(taxi_io_t *io, const taxi_stream_t *s) {
  add_counts(&io->retired, s);
}

void taxi__io_stream_totals(taxi_io_t *io, taxi_io_stats_t *out) {
  taxi__mutex_lock(&io->lock);
  taxi_stream_counters_t t = io->retired;
  for (const taxi_stream_t *s = io->streams; s; s = s->next) add_counts(&t, s);
  taxi__mutex_unlock(&io->lock);
  out->bytes_in = t.bytes_in;
  out->bytes_out = t.bytes_out;
  out->reads = t.reads;
  out->writes = t.writes;
  out->writes_refused = t.writes_refused;
  out->read_pauses = t.read_pauses;
}

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
  retire_counts_locked(io, s);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

void *taxi__io_stream_block(taxi_io_t *io, size_t size) {
  struct taxi__stream_block *b = NULL;
  taxi__mutex_lock(&io->lock);
  /* Streams of one context mostly share their settings: the first spare
   * fits, or one near it. */
  for (struct taxi__stream_block **p = &io->spare; *p; p = &(*p)->next) {
    if ((*p)->size == size) {
      b = *p;
      *p = b->next;
      io->nspare--;
      io->spare_bytes -= size;
      break;
    }
  }
  taxi__mutex_unlock(&io->lock);
  if (b) {
    TAXI__IO_COUNT(io, streams_reused, 1);
    return b;
  }
  void *m = taxi__malloc(size);
  if (m) TAXI__IO_COUNT(io, streams_allocated, 1);
  return m;
}

void taxi__io_retire_stream(taxi_io_t *io, taxi_stream_t *s) {
  size_t size = s->block;
  taxi__mutex_lock(&io->lock);
  UNLINK(io->streams, s);
  retire_counts_locked(io, s);
  /* Off the list, under its lock: taxi_io_destroy, which reaches streams
   * through the list with this lock held, is done with s. */
  taxi__mutex_destroy(&s->lock);
  bool keep = io->nspare < SPARE_MAX && io->spare_bytes + size <= SPARE_BYTES;
  if (keep) {
    struct taxi__stream_block *b = (struct taxi__stream_block *)(void *)s;
    b->size = size;
    b->next = io->spare;
    io->spare = b;
    io->nspare++;
    io->spare_bytes += size;
  }
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
  if (!keep) taxi__free(s);
}

void taxi__io_spares_free(taxi_io_t *io) {
  struct taxi__stream_block *b = io->spare;
  io->spare = NULL;
  io->nspare = 0;
  io->spare_bytes = 0;
  while (b) {
    struct taxi__stream_block *next = b->next;
    taxi__free(b);
    b = next;
  }
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
