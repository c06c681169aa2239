/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream.c - a stream's state machine, written once for every
 * dispatcher: the driver (core/stream/io_reactive.c,
 * core/stream/io_proactive.c) reports events (through s->ops, installed
 * here) and performs transfers; this file decides what happens next and runs
 * the application's callbacks, one at a time (see "Serialisation" in
 * core/stream/io_impl.h).  It also makes, starts and closes a stream; the
 * application's reads and writes are core/stream/stream_read.c's and
 * core/stream/stream_write.c's, which ask for a round here.
 *
 * Calls io_lists.c (link, unlink), post.c (a round runs the stream's
 * posts), the driver through its table and a pipe through s->pipe_ops;
 * nothing else of the wing.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/batch_clock.h"
#include "core/common/ring_index.h"
#include "core/stream/io_impl.h"
#include "core/common/detail.h"

#include <inttypes.h>
#include <string.h>

/* Run `call` without the stream's lock: callbacks may call anything,
 * including this stream's functions from this thread. */
#define UNLOCKED(s, call)   \
  do {                      \
    taxi__stream_unlock(s); \
    call;                   \
    taxi__stream_lock(s);   \
  } while (0)

/* ---- life -----------------------------------------------------------------
 */

static size_t round_up(size_t n) { return (n + 15) & ~(size_t)15; }

/* What the drivers report, and how taxi_io_destroy closes a stream. */
static const taxi__stream_ops_t stream_ops = {
    .close = taxi__stream_close,
    .event = taxi__stream_event,
    .event_locked = taxi__stream_event_locked,
};

int taxi__stream_new(taxi_io_t *io, taxi_handle_t fd,
                     const taxi_stream_options_t *o, taxi_proactor_t *home,
                     bool stay, taxi_stream_t **out) {
  /* One block: the stream (as far as its driver's part of it), its read
   * buffer, write records and ring, in that order.  A message of a small
   * echo touches the stream, the start of the read buffer, the last
   * record (where an empty queue starts: see consume_locked) and the
   * start of the ring: two neighbourhoods of a few lines, where a whole
   * taxi_stream_t and records used in turn spread them over four or five
   * pages. */
  size_t head = round_up(io->drv->stream_size);
  size_t rbuf = round_up(o->read_buffer);
  size_t recs = round_up((size_t)o->max_writes * sizeof(taxi__wrec_t));
  size_t wbuf = (size_t)o->high_watermark;
  taxi_stream_t *s = taxi__io_stream_block(io, head + rbuf + recs + wbuf);
  if (!s) return TAXI_ENOMEM;
  memset(s, 0, head);
  s->block = head + rbuf + recs + wbuf;
  s->rbuf = (unsigned char *)s + head;
  s->rdata = s->rbuf;
  s->recs = (taxi__wrec_t *)(void *)(s->rbuf + rbuf);
  s->wbuf = s->rbuf + rbuf + recs;
  s->io = io;
  s->ops = &stream_ops;
  s->one_thread = io->one_thread;
  s->fd = fd;
  s->rcap = o->read_buffer;
  s->wcap = wbuf;
  s->low = (size_t)o->low_watermark;
  s->nrecs = o->max_writes;
  s->rhead = s->nrecs - 1; /* the home of an empty queue */
  s->oflags = o->flags;
  s->idle_to = o->idle_timeout;
  s->read_to = o->read_timeout;
  s->write_to = o->write_timeout;
  s->connect_to = o->connect_timeout;
  s->timeout_fn = o->on_timeout;
  s->flags = TAXI__S_BUSY;
  s->t_active = s->t_read = s->t_write = s->t_connect = taxi_now();
  int rc = o->tls ? taxi__tls_attach(s, o, "taxi_stream_open: options") : 0;
  if (rc == 0) {
    rc = taxi__mutex_init(&s->lock);
    if (rc < 0) taxi__tls_detach(s);
  }
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  rc = taxi__io_link_stream(io, s);
  if (rc == 0) {
    rc = io->drv->stream_open(s, home, stay);
    if (rc < 0) taxi__io_unlink_stream(io, s);
  }
  if (rc < 0) {
    taxi__tls_detach(s);
    taxi__mutex_destroy(&s->lock);
    taxi__free(s);
    return rc;
  }
  /* TCP options: a Unix-domain stream refuses them, which is fine.  A
   * dialing stream (no socket yet) gets them with its socket. */
  if ((o->flags & TAXI_STREAM_NODELAY) && fd != TAXI_INVALID_HANDLE)
    (void)taxi__sock_nodelay(fd, true);
  if ((o->flags & TAXI_STREAM_KEEPALIVE) && fd != TAXI_INVALID_HANDLE)
    (void)taxi__sock_keepalive(fd, true, o->keepalive_idle,
                               o->keepalive_interval, o->keepalive_count);
  if (!(s->oflags & TAXI__STREAM_QUIET)) TAXI__IO_COUNT(io, streams_opened, 1);
  *out = s;
  return 0;
}

void taxi__stream_discard(taxi_stream_t *s) {
  taxi__tls_detach(s);
  if (!(s->oflags & TAXI__STREAM_QUIET))
    TAXI__IO_COUNT(s->io, streams_closed, 1);
  taxi__io_retire_stream(s->io, s);
}

static void run_locked(taxi_stream_t *s);

/* Ask for a processing round: by the thread processing s if there is one,
 * else by a kick through the dispatcher.  Lock held. */
static void kick_locked(taxi_stream_t *s, bool force) {
  if (s->flags & TAXI__S_BUSY) {
    s->pending |= TAXI__P_WORK;
    return;
  }
  if (s->flags & TAXI__S_CLOSING) return;
  if ((s->flags & TAXI__S_KICKED) && !force) return;
  s->flags |= TAXI__S_KICKED;
  /* Growing the timer heap may fail (out of memory): then the next event
   * of the stream (I/O, its deadline) does the work instead. */
  if (s->io->drv->kick(s) < 0) s->flags &= ~TAXI__S_KICKED;
}

void taxi__stream_kick_locked(taxi_stream_t *s) { kick_locked(s, false); }

void taxi__stream_start(taxi_stream_t *s, bool here) {
  taxi__stream_lock(s);
  s->pending |= TAXI__P_WORK; /* a first round: interest, timeouts */
  if (here) {
    run_locked(s); /* unlocks */
    return;
  }
  s->flags &= ~TAXI__S_BUSY;
  kick_locked(s, false);
  taxi__stream_unlock(s);
}

void taxi__stream_event(taxi_stream_t *s, unsigned bits) {
  taxi__stream_lock(s);
  taxi__stream_event_locked(s, bits);
}

void taxi__stream_event_locked(taxi_stream_t *s, unsigned bits) {
  s->pending |= bits;
  if (s->flags & TAXI__S_BUSY) {
    /* The thread processing s will see the bits.  Meanwhile a
     * level-triggered handle would be reported again and again: have the
     * driver deactivate it until then. */
    if (bits & (TAXI__P_READABLE | TAXI__P_WRITABLE)) s->io->drv->defer(s);
    taxi__stream_unlock(s);
    return;
  }
  s->flags |= TAXI__S_BUSY;
  run_locked(s);
}

static void fail_locked(taxi_stream_t *s, int err) {
  if (!(s->flags & TAXI__S_CLOSE_REQ)) {
    s->reason = err;
    s->flags |= TAXI__S_CLOSE_REQ;
  }
}

/* ---- reading --------------------------------------------------------------
 */

static bool reading_locked(const taxi_stream_t *s) {
  if (s->flags & TAXI__S_READ_INTO) return true;
  return (s->flags & (TAXI__S_READING | TAXI__S_PAUSED | TAXI__S_EOF_TOLD)) ==
         TAXI__S_READING;
}

/* With TAXI_STREAM_PAUSE_READING: stop reading while a read's worth of
 * echo might not fit in the ring. */
static void maybe_pause_locked(taxi_stream_t *s) {
  if ((s->oflags & TAXI_STREAM_PAUSE_READING) && !(s->flags & TAXI__S_PAUSED) &&
      s->wcap - s->wused < s->rcap) {
    s->flags |= TAXI__S_PAUSED | TAXI__S_NEED_DRAIN;
    TAXI__S_COUNT(s, read_pauses, 1);
  }
}

static void deliver_eof_locked(taxi_stream_t *s) {
  if (s->flags & TAXI__S_READ_INTO) {
    taxi_stream_done_fn fn = s->ri_fn;
    void *arg = s->ri_arg;
    size_t done = s->ri_done;
    s->flags &= ~TAXI__S_READ_INTO;
    UNLOCKED(s, fn(s, TAXI_EEOF, done, arg));
    return;
  }
  taxi_stream_read_fn fn = s->read_fn;
  s->flags |= TAXI__S_EOF_TOLD;
  UNLOCKED(s, fn(s, TAXI_EEOF, NULL, 0));
}

static void deliver_locked(taxi_stream_t *s, taxi_time_t now) {
  while (!(s->flags & TAXI__S_CLOSE_REQ)) {
    maybe_pause_locked(s);
    if (!reading_locked(s)) return;
    if (s->rlen == 0) {
      if (s->flags & TAXI__S_EOF) {
        deliver_eof_locked(s);
        continue;
      }
      int64_t n = s->tls ? taxi__tls_read(s) : s->io->drv->read(s);
      if (n == TAXI_EAGAIN) return;
      if (n < 0) {
        fail_locked(s, (int)n);
        return;
      }
      if (n == 0) {
        s->flags |= TAXI__S_EOF;
        continue;
      }
      s->rpos = 0;
      s->rlen = (size_t)n;
      s->t_read = s->t_active = now;
      TAXI__S_COUNT(s, bytes_in, (uint64_t)n);
    }
    if (s->flags & TAXI__S_READ_INTO) {
      size_t take = s->ri_len - s->ri_done;
      if (take > s->rlen) take = s->rlen;
      memcpy(s->ri_buf + s->ri_done, s->rdata + s->rpos, take);
      s->rpos += take;
      s->rlen -= take;
      s->ri_done += take;
      if ((s->ri_flags & TAXI_STREAM_READ_EXACT) && s->ri_done < s->ri_len)
        continue;
      taxi_stream_done_fn fn = s->ri_fn;
      void *arg = s->ri_arg;
      size_t done = s->ri_done;
      s->flags &= ~TAXI__S_READ_INTO;
      taxi__batch_delivered();
      UNLOCKED(s, fn(s, 0, done, arg));
      continue;
    }
    /* The bytes stay where they are (rbuf, or the driver's lent buffer),
     * untouched, until the callback returns: only the thread processing
     * s reads into either. */
    taxi_stream_read_fn fn = s->read_fn;
    const unsigned char *data = s->rdata + s->rpos;
    size_t len = s->rlen;
    s->rlen = 0;
    TAXI__S_COUNT(s, reads, 1);
    taxi__batch_delivered();
    s->flags |= TAXI__S_IN_READ;
    UNLOCKED(s, fn(s, 0, data, len));
    s->flags &= ~TAXI__S_IN_READ;
  }
}

/* Deliver what there is; then the driver keeps what is left (in rbuf)
 * and gives back a buffer it lent, so none is held between rounds. */
static void reads_locked(taxi_stream_t *s, taxi_time_t now) {
  deliver_locked(s, now);
  const taxi__io_driver_t *drv = s->io->drv;
  if (drv->read_settle)
    drv->read_settle(s, !(s->flags & TAXI__S_CLOSE_REQ) && reading_locked(s));
}

/* ---- writing --------------------------------------------------------------
 */

/* The buffers of the queue from its head, up to max, stopping before a
 * file.  Returns how many. */
static size_t gather_locked(const taxi_stream_t *s, taxi_buf_t *bufs,
                            size_t max) {
  size_t n = 0;
  for (unsigned i = 0; i < s->rcount && n < max; i++) {
    const taxi__wrec_t *r = &s->recs[taxi__wrap(s->rhead + i, s->nrecs)];
    size_t left = r->len - r->done;
    if (r->kind == TAXI__W_FILE) break;
    if (r->kind == TAXI__W_REF) {
      bufs[n].base = (void *)(uintptr_t)(r->ptr + r->done);
      bufs[n++].len = left;
      continue;
    }
    /* `%`: done may pass wcap (writes joined to a record being sent). */
    size_t at = (r->off + r->done) % s->wcap;
    size_t first = s->wcap - at < left ? s->wcap - at : left;
    bufs[n].base = s->wbuf + at;
    bufs[n++].len = first;
    if (first < left && n < max) {
      bufs[n].base = s->wbuf;
      bufs[n++].len = left - first;
    } else if (first < left) {
      break;
    }
  }
  return n;
}

/* What a finished write tells its callback. */
typedef struct done_call {
  taxi_stream_done_fn fn;
  void *arg;
  size_t len;
  int status;
} done_call_t;

/* n bytes of the queue are sent: advance, and collect the records done.
 * Returns how many calls were stored (at most cap; the queue is gathered
 * in at most 16 buffers, so at most 16 records end per step). */
static size_t consume_locked(taxi_stream_t *s, size_t n, done_call_t *calls,
                             size_t cap) {
  size_t k = 0;
  while (n > 0 && s->rcount > 0) {
    taxi__wrec_t *r = &s->recs[s->rhead];
    size_t take = r->len - r->done < n ? r->len - r->done : n;
    r->done += take;
    n -= take;
    if (r->kind == TAXI__W_COPY) {
      s->whead = taxi__wrap(s->whead + take, s->wcap);
      s->wused -= take;
    }
    if (r->done < r->len) break;
    if (r->kind == TAXI__W_FILE && r->len <= TAXI__CORK_MAX) s->wfiles--;
    if (r->fn && k < cap) calls[k++] = (done_call_t){r->fn, r->arg, r->len, 0};
    s->rhead = taxi__wrap(s->rhead + 1, s->nrecs);
    s->rcount--;
  }
  /* An empty queue starts again at its homes: the ring's first bytes and
   * the last record, which lie side by side.  Where each write took the
   * next record and the next bytes in turn, a stream touched a new cache
   * line of each per message, the records alone some 4.5 KiB a stream
   * over time: with a thousand streams, more than a core's L2 cache. */
  if (s->wused == 0) s->whead = 0;
  if (s->rcount == 0) s->rhead = s->nrecs - 1;
  return k;
}

/* n bytes of the queue went out: count them and tell the writes they
 * completed. */
static void sent_locked(taxi_stream_t *s, size_t n) {
  done_call_t calls[17];
  size_t k = consume_locked(s, n, calls, 17);
  TAXI__S_COUNT(s, bytes_out, (uint64_t)n);
  for (size_t i = 0; i < k; i++)
    UNLOCKED(s, calls[i].fn(s, 0, calls[i].len, calls[i].arg));
}

/* A file goes out corked where the driver's sends return at once: in
 * full segments, its head with its first bytes, instead of a part-filled
 * segment at the end of each send (TCP_NODELAY pushes every one), each of
 * which costs the receiver a wake-up - a sixth of a client's CPU per
 * 500 KB response over loopback.  Not a file over TAXI__CORK_MAX: one of
 * 5 MB cost the client a fifth more corked (measured over loopback: the
 * sends of a long transfer are full already, and a cork holds them in
 * bursts).  Corked while such a file record is queued, uncorked (which
 * sends what is held) once none is: two system calls per file, none per
 * event.  A socket that takes no cork (not TCP, or no such option here)
 * is not asked again; a failed uncork is tried again at the next write,
 * and the kernel sends what is held within 200 ms anyway. */
static void cork_locked(taxi_stream_t *s) {
  bool want = s->wfiles > 0, corked = (s->flags & TAXI__S_CORKED) != 0;
  if (!s->io->drv->corks_files || want == corked || (s->flags & TAXI__S_NOCORK))
    return;
  if (taxi__sock_cork(s->fd, want) == 0)
    s->flags ^= TAXI__S_CORKED;
  else if (want)
    s->flags |= TAXI__S_NOCORK;
}

/* Whether cork_locked has anything to decide: a file queued, or the
 * socket corked.  Tested inline, as nearly every write is of neither. */
static inline bool cork_question(const taxi_stream_t *s) {
  return s->wfiles > 0 || (s->flags & TAXI__S_CORKED);
}

static void writes_locked(taxi_stream_t *s, taxi_time_t now) {
  const taxi__io_driver_t *drv = s->io->drv;
  if (cork_question(s)) cork_locked(s);
  /* A TLS stream's handshake messages and alerts go out queue or not. */
  int64_t f = s->tls ? taxi__tls_flush(s) : 0;
  if (f < 0 && f != TAXI_EAGAIN) {
    fail_locked(s, (int)f);
    return;
  }
  while (s->rcount > 0 && !(s->flags & TAXI__S_CLOSE_REQ)) {
    taxi__wrec_t *r = &s->recs[s->rhead];
    int64_t n;
    if (r->kind == TAXI__W_FILE) {
      n = s->tls ? taxi__tls_sendfile(s, r->file, r->foff + (int64_t)r->done,
                                      r->len - r->done)
                 : drv->sendfile(s, r->file, r->foff + (int64_t)r->done,
                                 r->len - r->done);
      if (n == TAXI_EEOF) {
        /* The file shrank after it was queued: what is left of it is
         * not there to send, and the peer would wait for it. */
        s->flags |= TAXI__S_WFAIL;
        fail_locked(s, TAXI_EEOF);
        return;
      }
    } else {
      taxi_buf_t bufs[16];
      size_t nb = gather_locked(s, bufs, drv->max_bufs);
      n = s->tls ? taxi__tls_write(s, bufs, nb) : drv->write(s, bufs, nb);
    }
    if (n == TAXI_EAGAIN) break;
    if (n < 0) {
      s->flags |= TAXI__S_WFAIL;
      fail_locked(s, (int)n);
      return;
    }
    s->t_write = s->t_active = now;
    sent_locked(s, (size_t)n);
  }
  if (s->flags & TAXI__S_CLOSE_REQ) return;
  if (cork_question(s)) cork_locked(s);
  /* A TLS stream sends its close_notify first (TAXI_EAGAIN: not yet). */
  int tls_rc = 0;
  if (s->rcount == 0 &&
      (s->flags & (TAXI__S_SHUT_REQ | TAXI__S_SHUT_DONE)) == TAXI__S_SHUT_REQ &&
      !(s->flags & TAXI__S_CONNECTING) &&
      (!s->tls || (tls_rc = taxi__tls_shutdown(s)) == 0)) {
    s->flags |= TAXI__S_SHUT_DONE;
    /* taxi_stream_end of a socket nothing else shares, closed right after
     * this: the close sends the FIN after the queued bytes by itself. */
    bool close_shuts = (s->flags & TAXI__S_END_REQ) && s->own_fd &&
                       s->io->drv->closes_at_teardown;
    int rc = close_shuts ? 0 : taxi__sock_shutdown_write(s->fd);
    if (rc < 0) {
      fail_locked(s, rc);
      return;
    }
  } else if (tls_rc < 0 && tls_rc != TAXI_EAGAIN) {
    fail_locked(s, tls_rc);
    return;
  }
  if ((s->flags & (TAXI__S_END_REQ | TAXI__S_SHUT_DONE)) ==
      (TAXI__S_END_REQ | TAXI__S_SHUT_DONE)) {
    fail_locked(s, 0); /* taxi_stream_end: flushed and shut: close */
    return;
  }
  if (s->wused <= s->low) {
    if (s->flags & TAXI__S_PAUSED) {
      s->flags &= ~TAXI__S_PAUSED;
      s->t_read = now; /* the read timeout starts again */
    }
    /* After TAXI_ENOBUFS, room means a free record too. */
    if ((s->flags & TAXI__S_NEED_DRAIN) && s->rcount < s->nrecs) {
      s->flags &= ~TAXI__S_NEED_DRAIN;
      taxi_stream_drain_fn fn = s->drain_fn;
      if (fn) UNLOCKED(s, fn(s));
    }
    if ((s->flags & TAXI__S_PIPE_DRAIN) && s->rcount < s->nrecs)
      s->pipe_ops->drained_locked(s);
  }
}

/* ---- timeouts -------------------------------------------------------------
 */

static void earliest(taxi_time_t *next, int *which, int kind, taxi_time_t from,
                     taxi_time_t span) {
  if (span <= 0) return;
  taxi_time_t at = from + span; /* spans are <= 2^62: no overflow */
  if (at < *next) {
    *next = at;
    *which = kind;
  }
}

/* The earliest deadline of s (INT64_MAX: none), and which timeout it is
 * (0: the connect's). */
static taxi_time_t deadline_locked(const taxi_stream_t *s, int *which) {
  taxi_time_t next = INT64_MAX;
  if (s->flags & TAXI__S_CONNECTING) {
    /* The connect timeout covers a host name's resolution too. */
    earliest(&next, which, 0, s->t_connect, s->connect_to);
    return next;
  }
  earliest(&next, which, TAXI_STREAM_TIMEOUT_IDLE, s->t_active, s->idle_to);
  if (reading_locked(s))
    earliest(&next, which, TAXI_STREAM_TIMEOUT_READ, s->t_read, s->read_to);
  if (s->rcount > 0)
    earliest(&next, which, TAXI_STREAM_TIMEOUT_WRITE, s->t_write, s->write_to);
  return next;
}

/* Close s if a timeout passed (its on_timeout told first, see
 * taxi_stream_timeout_fn); else make sure its timer fires by the earliest
 * deadline.  Lazy: activity only moves the deadlines later, so the timer
 * is touched only when it fires or an earlier one is needed. */
static void deadlines_locked(taxi_stream_t *s, taxi_time_t now) {
  int which = 0;
  taxi_time_t next = deadline_locked(s, &which);
  if (next <= now && which && s->timeout_fn && !(s->flags & TAXI__S_END_REQ)) {
    taxi_stream_timeout_fn fn = s->timeout_fn;
    UNLOCKED(s, fn(s, which));
    if (s->flags & TAXI__S_CLOSE_REQ) return;
    now = taxi_now();
    /* Ended there: its flush gets the timeouts afresh. */
    if (s->flags & TAXI__S_END_REQ) s->t_active = s->t_read = s->t_write = now;
    next = deadline_locked(s, &which);
  }
  if (next <= now) {
    TAXI__IO_COUNT(s->io, timeouts, 1);
    if ((s->flags & TAXI__S_CONNECTING) && !(s->oflags & TAXI__STREAM_QUIET))
      TAXI__IO_COUNT(s->io, connect_errors, 1);
    fail_locked(s, TAXI_ETIMEDOUT);
    return;
  }
  /* A dial's next step (its next attempt) is due then: not a timeout. */
  if ((s->flags & TAXI__S_DIALING) && s->dial_at && s->dial_at < next)
    next = s->dial_at;
  if (next == INT64_MAX) return;
  if (s->armed == 0 || next < s->armed) {
    s->armed = next;
    s->io->drv->arm(s, next);
  }
}

/* ---- connecting -----------------------------------------------------------
 */

static void connect_locked(taxi_stream_t *s, taxi_time_t now) {
  int rc = (s->flags & TAXI__S_DIALING) ? s->dial_ops->round_locked(s, now)
                                        : s->io->drv->connect_result(s);
  if (rc == TAXI_EAGAIN || (s->flags & TAXI__S_CLOSE_REQ)) return;
  bool quiet = (s->oflags & TAXI__STREAM_QUIET) != 0;
  if (rc < 0) {
    if (!quiet) TAXI__IO_COUNT(s->io, connect_errors, 1);
    fail_locked(s, rc);
    return;
  }
  s->flags &= ~TAXI__S_CONNECTING;
  s->t_active = s->t_read = s->t_write = now;
  if (!quiet) TAXI__IO_COUNT(s->io, connects, 1);
  taxi_stream_connect_fn fn = s->connect_fn;
  void *arg = s->connect_arg;
  s->connect_fn = NULL;
  if (fn) UNLOCKED(s, fn(s, 0, arg));
}

/* ---- closing --------------------------------------------------------------
 */

/* The write callbacks owed at a close.  An output operation that completed
 * (a Proactor's, not yet taken by a round) counts, and its records are
 * told they were written; the rest TAXI_ECANCELED (the first the write's
 * error, if one failed).  While an operation is still in flight
 * (`released` false) nothing is told: it may yet complete, and it may
 * still read the queued bytes and the caller's buffers of write_ref, so
 * the records wait for the release (S_OWE_WRITES). */
static void owed_writes_locked(taxi_stream_t *s, bool released) {
  const taxi__io_driver_t *drv = s->io->drv;
  int64_t n = drv->written && s->rcount > 0 ? drv->written(s) : TAXI_EAGAIN;
  if (n > 0 && s->tls) n = TAXI_EAGAIN; /* ciphertext: no record is done */
  if (n == TAXI_EBUSY && !released) {
    s->flags |= TAXI__S_OWE_WRITES;
    return;
  }
  s->flags &= ~TAXI__S_OWE_WRITES;
  int reason = s->reason;
  bool failed = (s->flags & TAXI__S_WFAIL) != 0;
  if (n > 0) {
    sent_locked(s, (size_t)n);
  } else if (n < 0 && n != TAXI_EAGAIN && n != TAXI_EBUSY && !failed) {
    failed = true; /* the write in flight failed: its record is told why */
    reason = (int)n;
  }
  while (s->rcount > 0) {
    taxi__wrec_t r = s->recs[s->rhead];
    s->rhead = (s->rhead + 1) % s->nrecs;
    s->rcount--;
    if (r.kind == TAXI__W_FILE && r.len <= TAXI__CORK_MAX) s->wfiles--;
    int status = failed && reason ? reason : TAXI_ECANCELED;
    failed = false;
    if (r.fn) UNLOCKED(s, r.fn(s, status, r.done, r.arg));
  }
  /* The ring may still be read by an operation in flight: it stays until
   * the stream is released; nothing in it counts as queued any more. */
  s->wused = s->whead = 0;
  s->rhead = s->nrecs - 1;
}

/* Every callback the stream still owes before its close callback
 * (`released`: no operation of the driver's can be in flight). */
static void owed_locked(taxi_stream_t *s, bool released) {
  s->flags |= TAXI__S_CLOSING;
  int reason = s->reason;
  if (s->flags & TAXI__S_CONNECTING) {
    taxi_stream_connect_fn fn = s->connect_fn;
    void *arg = s->connect_arg;
    s->flags &= ~TAXI__S_CONNECTING;
    s->connect_fn = NULL;
    if (fn) UNLOCKED(s, fn(s, reason ? reason : TAXI_ECANCELED, arg));
  }
  if (s->flags & TAXI__S_READ_INTO) {
    taxi_stream_done_fn fn = s->ri_fn;
    void *arg = s->ri_arg;
    size_t done = s->ri_done;
    s->flags &= ~TAXI__S_READ_INTO;
    UNLOCKED(s, fn(s, TAXI_ECANCELED, done, arg));
  }
  owed_writes_locked(s, released);
  taxi__stream_posts_cancel_locked(s);
  if (s->pipe_src || s->pipe_dst) s->pipe_ops->closing_locked(s);
}

/* The owed callbacks, then the driver's teardown. */
static void teardown_locked(taxi_stream_t *s) {
  if (s->dial) s->dial_ops->abandon_locked(s);
  s->close_ends_socket = s->own_fd && !s->keep_handle;
  owed_locked(s, false);
  UNLOCKED(s, s->io->drv->teardown(s));
}

/* The dispatcher is done with s: the close callback, once. */
static void finish_locked(taxi_stream_t *s) {
  if (s->flags & TAXI__S_DEAD) return;
  if (s->dial) s->dial_ops->abandon_locked(s); /* released without teardown */
  if (s->flags & TAXI__S_OWE_WRITES) owed_writes_locked(s, true);
  s->flags |= TAXI__S_DEAD;
  taxi_stream_close_fn fn = s->close_fn;
  taxi_io_t *io = s->io;
  /* Counted first: whoever the close callback tells may read the counters
   * at once. */
  if (!(s->oflags & TAXI__STREAM_QUIET)) TAXI__IO_COUNT(io, streams_closed, 1);
  if (s->flags & TAXI__S_DETACH) {
    if (io->drv->unread) io->drv->unread(s);
    UNLOCKED(
        s, s->detach_fn(s, s->fd, s->rdata + s->rpos, s->rlen, s->detach_arg));
  } else if (fn) {
    UNLOCKED(s, fn(s, s->reason));
  }
  if (io->drv->read_forget) io->drv->read_forget(s);
  taxi__tls_detach(s);
  /* Without the stream's lock: taxi_io_destroy takes the context's lock,
   * then the streams'.  Unreferenced, s is released by this thread as
   * run_locked lets go of it, and leaves the list then, its block kept for
   * the next stream; a reference may outlive the context, so a stream
   * that has one leaves now, and its block is freed at the last unref. */
  if (s->refs) {
    s->flags |= TAXI__S_UNLINKED;
    UNLOCKED(s, taxi__io_unlink_stream(io, s));
  }
}

/* ---- the processing loop --------------------------------------------------
 */

static bool work_left(const taxi_stream_t *s) {
  if (s->flags & TAXI__S_DEAD) return false;
  if (s->pending) return true;
  if ((s->flags & (TAXI__S_RELEASED | TAXI__S_DEAD)) == TAXI__S_RELEASED)
    return true;
  return (s->flags & (TAXI__S_CLOSE_REQ | TAXI__S_CLOSING)) ==
         TAXI__S_CLOSE_REQ;
}

static void round_locked(taxi_stream_t *s) {
  unsigned p = s->pending;
  s->pending = 0;
  if (p & TAXI__P_KICK) s->flags &= ~TAXI__S_KICKED;
  if (p & TAXI__P_RELEASED) s->flags |= TAXI__S_RELEASED;
  if (p & TAXI__P_DEADLINE) s->armed = 0;
  if (s->flags & TAXI__S_RELEASED) {
    /* Released without a teardown of ours (the reactor was destroyed
     * under it): the callbacks it owes come first all the same. */
    if (!(s->flags & (TAXI__S_CLOSING | TAXI__S_DEAD))) owed_locked(s, true);
    finish_locked(s);
    return;
  }
  if (s->flags & TAXI__S_CLOSING) return; /* waiting for the release */
  if (p & TAXI__P_READABLE) s->d.r.readable = true;
  if (p & TAXI__P_HUP) s->d.r.hup = true;
  if (p & TAXI__P_WRITABLE) {
    s->d.r.writable = true;
    s->d.r.wblocked = false;
  }
  taxi_time_t now = taxi__batch_now(); /* no clock read per message */
  if (!(s->flags & TAXI__S_CLOSE_REQ) && (s->flags & TAXI__S_CONNECTING))
    connect_locked(s, now);
  if (!(s->flags & (TAXI__S_CLOSE_REQ | TAXI__S_CONNECTING))) {
    if (s->tls) taxi__tls_round_locked(s); /* the handshake, until done */
    if (s->posts.head) taxi__stream_posts_locked(s);
    reads_locked(s, now);
    bool paused = (s->flags & TAXI__S_PAUSED) != 0;
    /* The writes queued so far (by the read callbacks just run, or by
     * other threads meanwhile) are this write step's to send: they need
     * no round of their own.  One queued from here on (a write or drain
     * callback of this step, another thread while the lock is let go)
     * sets the bit again, and gets its round.  Not for a TLS stream, whose
     * filter may have more to do in a round after a write (a handshake). */
    if (!s->tls) s->pending &= ~TAXI__P_WROTE;
    writes_locked(s, now);
    /* Writing may have ended a pause: read again (a proactive stream has
     * no read in flight to call it back). */
    if (!(s->flags & TAXI__S_CLOSE_REQ) && reading_locked(s) &&
        (paused || s->rlen > 0 || (s->flags & TAXI__S_EOF)))
      s->pending |= TAXI__P_WORK;
  }
  if (!(s->flags & TAXI__S_CLOSE_REQ)) deadlines_locked(s, now);
  if (s->flags & TAXI__S_CLOSE_REQ) {
    teardown_locked(s);
    return;
  }
  if (!(s->flags & TAXI__S_DIALING)) s->io->drv->update(s);
}

/* The thread that set S_BUSY processes s until nothing is pending, then
 * lets go: unlocks, and frees s if it is dead and unreferenced. */
static void run_locked(taxi_stream_t *s) {
  while (work_left(s)) round_locked(s);
  s->flags &= ~TAXI__S_BUSY;
  bool free_it = (s->flags & TAXI__S_DEAD) && s->refs == 0;
  bool linked = !(s->flags & TAXI__S_UNLINKED);
  taxi__stream_unlock(s);
  if (free_it && linked) {
    taxi__io_retire_stream(s->io, s);
  } else if (free_it) {
    taxi__mutex_destroy(&s->lock);
    taxi__free(s);
  }
}

/* ---- closing, as asked ---------------------------------------------------
 */

int taxi__stream_close(taxi_stream_t *s, int reason) {
  taxi__stream_lock(s);
  int rc = TAXI_EBADF;
  if (!(s->flags & TAXI__S_CLOSED)) {
    fail_locked(s, reason);
    /* Even if a kick is on its way: a pool that shut down drops the
     * events it had queued, a kick among them, and this one must come. */
    kick_locked(s, true);
    rc = 0;
  }
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_close(taxi_stream_t *s) {
  if (!s) return TAXI_EINVAL;
  if (taxi__stream_foreign(s))
    return taxi__stream_refuse_foreign("taxi_stream_close");
  return taxi__stream_close(s, 0);
}

int taxi_stream_detach(taxi_stream_t *s, taxi_stream_detach_fn fn, void *arg) {
  if (!fn) return TAXI_EINVAL;
  int rc = taxi__stream_lock_api(s, "taxi_stream_detach");
  if (rc < 0) return rc;
  if (s->flags & TAXI__S_CLOSED) {
    rc = TAXI_EBADF;
  } else if (s->tls) {
    rc = taxi__refuse(TAXI_ENOTSUP,
                      "taxi_stream_detach: s: a TLS stream (its session "
                      "cannot leave with the socket)");
  } else if (s->rcount > 0 || s->pipe_src || s->pipe_dst ||
             (s->flags &
              (TAXI__S_READ_INTO | TAXI__S_CONNECTING | TAXI__S_END_REQ))) {
    rc = taxi__refuse(TAXI_EBUSY, "taxi_stream_detach: s: %s",
                      s->rcount > 0 ? "writes are queued (detach once "
                                      "every one has been told)"
                      : (s->pipe_src || s->pipe_dst)
                          ? "piped (taxi_stream_pipe) to or from another "
                            "stream"
                      : (s->flags & TAXI__S_READ_INTO)
                          ? "a read_into is in progress"
                      : (s->flags & TAXI__S_CONNECTING)
                          ? "still connecting"
                          : "its write side is being shut down");
  } else {
    s->detach_fn = fn;
    s->detach_arg = arg;
    s->keep_handle = true;
    s->flags = (s->flags | TAXI__S_DETACH) & ~TAXI__S_READING;
    fail_locked(s, 0);
    kick_locked(s, true);
  }
  taxi__stream_unlock(s);
  return rc;
}
