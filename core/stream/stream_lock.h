/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_lock.h - a stream's lock, and which threads may call
 * its functions: any, each call under the lock; or, for a stream of a
 * TAXI_IO_ONE_THREAD context, only the thread that owns the context, and
 * no lock.  Included by core/stream/io_impl.h, after the stream and the
 * context are defined; include that one.  Calls ports and
 * core/stream/stream_owner.c only.
 */
#ifndef TAXI_CORE_STREAM_LOCK_H
#define TAXI_CORE_STREAM_LOCK_H

#include "core/stream/io_impl.h"

/* A stream's lock, which a stream of a TAXI_IO_ONE_THREAD context does
 * without: its one thread is the only one that touches it (the calls of
 * other threads are refused first, below). */
static inline void taxi__stream_lock(taxi_stream_t *s) {
  if (!s->one_thread) taxi__mutex_lock(&s->lock);
}
static inline void taxi__stream_unlock(taxi_stream_t *s) {
  if (!s->one_thread) taxi__mutex_unlock(&s->lock);
}
/* Whether the calling thread may not touch io's streams: io is a
 * TAXI_IO_ONE_THREAD context, and this is not its thread. */
static inline bool taxi__io_foreign(const taxi_io_t *io) {
  return io->one_thread && !taxi__thread_equal(taxi__thread_self(), io->owner);
}
/* The same for s (of such a context). */
static inline bool taxi__stream_foreign(const taxi_stream_t *s) {
  return s->one_thread && taxi__io_foreign(s->io);
}
/* TAXI_EPERM, with the detail that `who` was called from a thread that
 * does not own its TAXI_IO_ONE_THREAD context (stream_owner.c). */
int taxi__stream_refuse_foreign(const char *who);
/* The lock of s for a call of the application's named `who`: 0, or
 * TAXI_EINVAL (NULL) / TAXI_EPERM (another thread's stream; then the
 * lock is not held).  Closed or not. */
static inline int taxi__stream_lock_api(taxi_stream_t *s, const char *who) {
  if (!s) return TAXI_EINVAL;
  if (taxi__stream_foreign(s)) return taxi__stream_refuse_foreign(who);
  taxi__stream_lock(s);
  return 0;
}

#endif /* TAXI_CORE_STREAM_LOCK_H */
