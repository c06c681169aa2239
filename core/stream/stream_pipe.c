/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_pipe.c - relaying what one stream reads into another
 * (taxi_stream_pipe), with backpressure and half-close, through the
 * machinery every stream has: no buffer of the pipe's own.
 *
 * The pipe is the source's read callback.  Each read is written to the
 * destination at once (a copy into its output buffer); then, if the
 * destination has less room than one read of the source, the pipe stops
 * reading the source and asks the destination for S_PIPE_DRAIN: its next
 * round that finds it down to its low watermark tells the pipe, which
 * reads again.  A read the destination refuses all the same (the
 * application's own writes took the room) is put back into the source's
 * read buffer, where it still is - the callback runs before anything else
 * may touch it - and comes again after the drain.  In transit, then: the
 * destination's buffer and one read buffer, whatever the peers do.
 *
 * Threads.  The source's callbacks and the destination's run in their own
 * contexts, possibly at once in two threads; the pipe's state (done,
 * paused) has a lock of its own, and each stream's link to the pipe is
 * under that stream's lock.  The pipe holds a reference to each stream;
 * it is freed with the last of its own references: one for its life, one
 * for each call in progress that found it through a stream.  Two stream
 * locks are only ever held together here, taken in address order.
 *
 * Above the state machine: calls a stream's public functions and
 * stream.c's, and is told of a drain or a close through the stream's
 * pipe_ops, which it sets with the pipe.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/stream/io_impl.h"

#include <inttypes.h>

struct taxi__pipe {
  taxi_stream_t *from, *to;
  taxi_stream_pipe_fn fn;
  void *arg;
  size_t need; /* the room one read of `from` may take: its read buffer */
  atomic_int refs;
  taxi__mutex_t lock; /* done, paused */
  bool done;          /* over: fn called or being called */
  bool paused;        /* from's reading stopped until `to` drains */
};

static taxi__pipe_t *hold(taxi__pipe_t *p) {
  atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
  return p;
}

static void put(taxi__pipe_t *p) {
  if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
  (void)taxi_stream_unref(p->from);
  (void)taxi_stream_unref(p->to);
  taxi__mutex_destroy(&p->lock);
  taxi__free(p);
}

/* The pipe reading s (src) or writing into it, held; NULL if none. */
static taxi__pipe_t *pipe_of(taxi_stream_t *s, bool src) {
  taxi__stream_lock(s);
  taxi__pipe_t *p = src ? s->pipe_src : s->pipe_dst;
  if (p) hold(p);
  taxi__stream_unlock(s);
  return p;
}

static void pipe_read(taxi_stream_t *from, int status, const void *data,
                      size_t len);

/* Let from's reading go on (into the pipe's callback) or stop.  Lock of
 * from held. */
static void reading_locked(taxi_stream_t *from, bool on) {
  if (on) {
    from->read_fn = pipe_read;
    from->flags = (from->flags | TAXI__S_READING) & ~TAXI__S_EOF_TOLD;
    from->t_read = taxi_now(); /* the read timeout starts again */
  } else {
    from->flags &= ~TAXI__S_READING;
    TAXI__S_COUNT(from, read_pauses, 1);
  }
  taxi__stream_request_locked(from);
}

/* Whether a copying write of `need` bytes would be taken by `to` now (or
 * `to` takes no writes any more: its close ends the pipe).  Lock held. */
static bool room_locked(const taxi_stream_t *to, size_t need) {
  if (to->flags & TAXI__S_CLOSED) return true;
  if (to->wcap - to->wused < need) return false;
  if (to->rcount < to->nrecs) return true;
  const taxi__wrec_t *tail =
      &to->recs[(to->rhead + to->rcount - 1) % to->nrecs];
  return tail->kind == TAXI__W_COPY && !tail->fn; /* joined, no record */
}

/* Ask `to` to tell the pipe when it has drained.  Lock of `to` held. */
static void want_drain_locked(taxi_stream_t *to, taxi__pipe_t *p) {
  if (to->pipe_dst != p || (to->flags & TAXI__S_CLOSED)) return;
  to->flags |= TAXI__S_PIPE_DRAIN;
  /* It may be down to its low watermark already, with nothing to come
   * that would start a round. */
  taxi__stream_request_locked(to);
}

/* Stop reading from until `to` drains (in from's read callback). */
static void pause_reading(taxi__pipe_t *p) {
  taxi__mutex_lock(&p->lock);
  bool go = !p->done;
  if (go) p->paused = true;
  taxi__mutex_unlock(&p->lock);
  if (!go) return;
  /* Stopped before the drain is asked for: the drain, in another thread,
   * reads again only after both. */
  taxi__stream_lock(p->from);
  if (!(p->from->flags & TAXI__S_CLOSED)) reading_locked(p->from, false);
  taxi__stream_unlock(p->from);
  taxi__stream_lock(p->to);
  want_drain_locked(p->to, p);
  taxi__stream_unlock(p->to);
}

/* Take p off the stream's link (src: its reading side). */
static void unlink_from(taxi_stream_t *s, taxi__pipe_t *p, bool src) {
  taxi__stream_lock(s);
  if (src && s->pipe_src == p) s->pipe_src = NULL;
  if (!src && s->pipe_dst == p) {
    s->pipe_dst = NULL;
    s->flags &= ~TAXI__S_PIPE_DRAIN;
  }
  taxi__stream_unlock(s);
}

/* Mark the pipe over: whether this call did (it then concludes it). */
static bool claim(taxi__pipe_t *p) {
  taxi__mutex_lock(&p->lock);
  bool first = !p->done;
  p->done = true;
  taxi__mutex_unlock(&p->lock);
  return first;
}

/* The pipe this call claimed is over with `status`: unlink it, close the
 * streams asked for (with TAXI_ECANCELED: the pipe's doing), call fn, and
 * drop the pipe's own reference.  Whoever calls holds p. */
static void conclude(taxi__pipe_t *p, int status, bool close_from,
                     bool close_to) {
  unlink_from(p->from, p, true);
  unlink_from(p->to, p, false);
  if (close_from) (void)taxi__stream_close(p->from, TAXI_ECANCELED);
  if (close_to) (void)taxi__stream_close(p->to, TAXI_ECANCELED);
  if (p->fn) p->fn(p->from, p->to, status, p->arg);
  put(p);
}

static void finish(taxi__pipe_t *p, int status, bool close_from,
                   bool close_to) {
  if (claim(p)) conclude(p, status, close_from, close_to);
}

/* from's read callback while the pipe runs. */
static void pipe_read(taxi_stream_t *from, int status, const void *data,
                      size_t len) {
  taxi__pipe_t *p = pipe_of(from, true);
  if (!p) return; /* over (from is closing): nothing to relay to */
  if (status == TAXI_EEOF) {
    /* TAXI_EPIPE: the application shut `to` down itself, which is what
     * is asked; TAXI_EBADF: `to` is closing, and its close ends the pipe. */
    int rc = taxi_stream_shutdown(p->to);
    if (rc != TAXI_EBADF) finish(p, 0, false, false);
    put(p);
    return;
  }
  int rc = taxi_stream_write(p->to, data, len, NULL, NULL);
  if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) {
    /* The application's writes took the room: the bytes go back where
     * they are, untouched while this callback runs, for the next read. */
    taxi__stream_lock(from);
    if (from->rlen == 0 && from->rdata + from->rpos == data) from->rlen = len;
    taxi__stream_unlock(from);
    pause_reading(p);
  } else if (rc == 0) {
    taxi__stream_lock(p->to);
    bool room = room_locked(p->to, p->need);
    taxi__stream_unlock(p->to);
    if (!room) pause_reading(p);
  } else if (rc != TAXI_EBADF) {
    finish(p, rc, true, true); /* TAXI_EPIPE: `to` was shut down */
  }
  put(p);
}

/* s is down to its low watermark (s->pipe_ops, from the state machine). */
static void drained_locked(taxi_stream_t *s) {
  s->flags &= ~TAXI__S_PIPE_DRAIN;
  taxi__pipe_t *p = s->pipe_dst;
  if (!p) return;
  hold(p);
  taxi__stream_unlock(s);
  taxi__mutex_lock(&p->lock);
  bool resume = p->paused && !p->done;
  p->paused = false;
  taxi__mutex_unlock(&p->lock);
  if (resume) {
    taxi__stream_lock(p->from);
    if (!(p->from->flags & TAXI__S_CLOSED) && p->from->pipe_src == p)
      reading_locked(p->from, true);
    taxi__stream_unlock(p->from);
  }
  put(p);
  taxi__stream_lock(s);
}

/* s is closing (s->pipe_ops, from the state machine). */
static void closing_locked(taxi_stream_t *s) {
  /* Taken here: nothing of the pipes finds them through s any more. */
  taxi__pipe_t *src = s->pipe_src, *dst = s->pipe_dst;
  s->pipe_src = s->pipe_dst = NULL;
  s->flags &= ~TAXI__S_PIPE_DRAIN;
  /* Held for the call, while the links still kept them: finish() drops
   * the pipe's own reference if this ends it (else the call that did has
   * dropped it), from another thread maybe. */
  if (src) hold(src);
  if (dst) hold(dst);
  int status = s->reason ? s->reason : TAXI_ECANCELED;
  taxi__stream_unlock(s);
  /* Both claimed before either closes the other stream: that close would
   * otherwise end the second pipe with its own reason (TAXI_ECANCELED),
   * in another thread, before this one tells it the real one. */
  bool end_src = src && claim(src), end_dst = dst && claim(dst);
  if (end_src) conclude(src, status, false, true);
  if (end_dst) conclude(dst, status, true, false);
  if (src) put(src);
  if (dst) put(dst);
  taxi__stream_lock(s);
}

/* What the state machine of a piped stream tells its pipes. */
static const taxi__pipe_ops_t pipe_ops = {
    .drained_locked = drained_locked,
    .closing_locked = closing_locked,
};

/* Lock both streams, in address order. */
static void lock_two(taxi_stream_t *a, taxi_stream_t *b) {
  if ((uintptr_t)a > (uintptr_t)b) {
    taxi_stream_t *t = a;
    a = b;
    b = t;
  }
  taxi__stream_lock(a);
  taxi__stream_lock(b);
}

static void unlock_two(taxi_stream_t *a, taxi_stream_t *b) {
  taxi__stream_unlock(a);
  taxi__stream_unlock(b);
}

/* Why the pipe cannot start (both locks held): 0, or the refusal. */
static int refusal_locked(const taxi_stream_t *from, const taxi_stream_t *to) {
  if ((from->flags & TAXI__S_CLOSED) || (to->flags & TAXI__S_CLOSED))
    return taxi__refuse(TAXI_EBADF, "taxi_stream_pipe: %s: closing or closed",
                        (from->flags & TAXI__S_CLOSED) ? "from" : "to");
  if (to->flags & TAXI__S_SHUT_REQ)
    return taxi__refuse(TAXI_EPIPE, "taxi_stream_pipe: to: shut down");
  if (from->pipe_src)
    return taxi__refuse(TAXI_EBUSY, "taxi_stream_pipe: from: read by a pipe");
  if (to->pipe_dst)
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_stream_pipe: to: written by a pipe already");
  if (from->flags & TAXI__S_READ_INTO)
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_stream_pipe: from: a read_into is pending");
  return 0;
}

int taxi_stream_pipe(taxi_stream_t *from, taxi_stream_t *to,
                     taxi_stream_pipe_fn fn, void *arg) {
  if (!from || !to)
    return taxi__refuse(TAXI_EINVAL, "taxi_stream_pipe: %s: NULL",
                        !from ? "from" : "to");
  if (from == to)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_stream_pipe: to: the same stream as from");
  if (taxi__stream_foreign(from) || taxi__stream_foreign(to))
    return taxi__stream_refuse_foreign("taxi_stream_pipe");
  /* Each side's callbacks touch the other stream: a stream that takes no
   * lock may only meet one of its own thread. */
  if ((from->one_thread || to->one_thread) && from->io != to->io)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_stream_pipe: %s: of a TAXI_IO_ONE_THREAD "
                        "context, and the other stream is of another "
                        "context",
                        from->one_thread ? "from" : "to");
  /* Sizes are set when a stream is made and never change. */
  if (to->wcap - to->low < from->rcap)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_stream_pipe: to: its high watermark less its "
                        "low watermark (%" PRIu64
                        ") is below from's "
                        "read_buffer (%" PRIu64
                        "): a read could never be "
                        "relayed",
                        (uint64_t)(to->wcap - to->low), (uint64_t)from->rcap);
  taxi__pipe_t *p = taxi__calloc(1, sizeof *p);
  if (!p) return TAXI_ENOMEM;
  int rc = taxi__mutex_init(&p->lock);
  if (rc < 0) {
    taxi__free(p);
    return rc;
  }
  p->from = from;
  p->to = to;
  p->fn = fn;
  p->arg = arg;
  p->need = from->rcap;
  atomic_init(&p->refs, 1);
  lock_two(from, to);
  rc = refusal_locked(from, to);
  if (rc == 0) {
    from->refs++; /* taxi_stream_ref's, dropped by put() */
    to->refs++;
    from->pipe_src = p;
    to->pipe_dst = p;
    from->pipe_ops = to->pipe_ops = &pipe_ops;
    if (room_locked(to, p->need)) {
      reading_locked(from, true);
    } else {
      /* Full already: read once it has drained (the application's own
       * reading, if any, stops: the pipe's from now on). */
      from->read_fn = pipe_read;
      reading_locked(from, false);
      p->paused = true;
      want_drain_locked(to, p);
    }
  }
  unlock_two(from, to);
  if (rc < 0) {
    taxi__mutex_destroy(&p->lock);
    taxi__free(p);
  }
  return rc;
}
