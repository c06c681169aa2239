/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_pooled.c - a proactive stream's reads through the
 * proactor's pool of buffers (taxi_proactor_read_pooled), where the
 * backend picks the buffer (io_uring's ring of provided buffers).
 *
 * Why: a single-shot read into the stream's own buffer costs a request
 * per read, and the kernel copies into memory only that read may use.
 * One multishot read per stream instead stays in flight across arrivals,
 * each in a buffer the kernel takes from the shared ring: no request per
 * message, and no buffer kept per idle stream.
 *
 * How the bytes go: an arrival waits in the stream's ring of arrivals
 * (rq) until a round of the state machine takes it (s_read: its buffer is
 * lent, s->rdata points at it); the read callback sees the pool's buffer
 * itself, and the buffer goes back when the round takes the next one or
 * settles.  Only bytes the stream must keep are copied into its own read
 * buffer: what a read_into or a pipe left unconsumed, and what arrives
 * while the stream does not read (paused for backpressure, stopped),
 * which also cancels the multishot read; reading again arms it anew, after
 * the kept bytes, so nothing is lost or reordered.  Arrivals kept while
 * not reading (r_kept bytes at the start of rbuf, when the state machine
 * holds none there) count as read only when a round takes them, as a
 * read's would: a paused stream holds its output buffer and one read
 * buffer, no more.  A stream whose rounds
 * fall behind (under a pool, a callback running in another thread) stops
 * its read too once TAXI__RQ_INLINE arrivals wait.  The proactor grows
 * its pool, or waits for a buffer, when the ring runs out (ENOBUFS): the
 * read goes on by itself.
 *
 * Called by io_proactive.c only (its rop record and table entries), with
 * the stream's lock held; calls the proactor and nothing of the wing.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/io_impl.h"

#include <string.h>

void taxi__pooled_open(taxi_stream_t *s) {
  s->d.p.rq = s->d.p.rq_inline;
  s->d.p.rq_cap = TAXI__RQ_INLINE;
  s->d.p.rq_head = s->d.p.rq_count = 0;
  s->d.p.r_lent = NULL;
  s->d.p.r_kept = 0;
  s->d.p.r_cancel = s->d.p.r_end = false;
}

/* Give a buffer back to the pool.  It was lent to this stream and given
 * back once, so the release cannot be refused. */
static void give_back(taxi_stream_t *s, unsigned char *data) {
  (void)taxi_proactor_buffer_release(s->d.p.px, data);
}

/* The ring of arrivals is full: double it (only a stream whose rounds fell
 * behind gets here; its multishot read is being cancelled). */
static int rq_grow(taxi_stream_t *s) {
  unsigned cap = s->d.p.rq_cap * 2;
  struct taxi__pooled_arrival *n = taxi__malloc(cap * sizeof *n);
  if (!n) return TAXI_ENOMEM;
  for (unsigned i = 0; i < s->d.p.rq_count; i++)
    n[i] = s->d.p.rq[(s->d.p.rq_head + i) % s->d.p.rq_cap];
  if (s->d.p.rq != s->d.p.rq_inline) taxi__free(s->d.p.rq);
  s->d.p.rq = n;
  s->d.p.rq_cap = cap;
  s->d.p.rq_head = 0;
  return 0;
}

static void rq_pop(taxi_stream_t *s) {
  s->d.p.rq_head = (s->d.p.rq_head + 1) % s->d.p.rq_cap;
  s->d.p.rq_count--;
}

/* Stop the multishot read (its last completion comes later). */
static void stop_reading(taxi_stream_t *s) {
  if (!s->d.p.r_busy || s->d.p.r_cancel) return;
  s->d.p.r_cancel = true;
  (void)taxi_proactor_cancel(s->d.p.px, &s->d.p.rop);
}

void taxi__pooled_done_locked(taxi_stream_t *s, taxi_op_t *op, int status,
                              size_t bytes) {
  if (op->data) {
    unsigned char *data = op->data;
    if ((s->flags & TAXI__S_CLOSING) && !(s->flags & TAXI__S_DETACH)) {
      give_back(s, data); /* closed: nobody is told of these bytes */
    } else if (s->d.p.rq_count == s->d.p.rq_cap && rq_grow(s) < 0) {
      give_back(s, data);
      if (!s->d.p.r_end) {
        s->d.p.r_end = true; /* the bytes are lost: the stream fails */
        s->d.p.r_status = TAXI_ENOMEM;
      }
      stop_reading(s);
    } else {
      unsigned at = (s->d.p.rq_head + s->d.p.rq_count) % s->d.p.rq_cap;
      s->d.p.rq[at].data = data;
      s->d.p.rq[at].len = bytes;
      s->d.p.rq_count++;
      if (s->d.p.rq_count >= TAXI__RQ_INLINE) stop_reading(s);
    }
  }
  if (op->more) return; /* the read goes on */
  s->d.p.inflight--;
  s->d.p.r_busy = false;
  s->d.p.r_cancel = false;
  /* Cancelled (a pause, a stream fallen behind, the teardown) or given
   * up on by the proactor for now (TAXI_EAGAIN, see s_read in
   * io_proactive.c): the next read arms it again.  End of stream or an
   * error: told once the bytes before it are. */
  if (status < 0 && status != TAXI_ECANCELED && status != TAXI_EAGAIN &&
      !s->d.p.r_end) {
    s->d.p.r_end = true;
    s->d.p.r_status = status;
  }
}

int64_t taxi__pooled_read(taxi_stream_t *s, taxi_completion_fn fn) {
  if (s->d.p.r_lent) { /* the round is done with it (rlen is 0) */
    give_back(s, s->d.p.r_lent);
    s->d.p.r_lent = NULL;
  }
  s->rdata = s->rbuf;
  if (s->d.p.r_kept > 0) { /* older than any arrival waiting */
    size_t n = s->d.p.r_kept;
    s->d.p.r_kept = 0;
    return (int64_t)n;
  }
  if (s->d.p.rq_count > 0) {
    struct taxi__pooled_arrival a = s->d.p.rq[s->d.p.rq_head];
    rq_pop(s);
    s->d.p.r_lent = a.data;
    s->rdata = a.data;
    return (int64_t)a.len;
  }
  if (s->d.p.r_end) {
    s->d.p.r_end = false;
    int st = s->d.p.r_status;
    return st == TAXI_EEOF ? 0 : st;
  }
  if (s->d.p.r_busy) return TAXI_EAGAIN;
  int rc = taxi_proactor_read_pooled(s->d.p.px, &s->d.p.rop, s->fd,
                                     TAXI_READ_MULTISHOT, fn, s);
  if (rc < 0) return rc;
  s->d.p.r_busy = true;
  s->d.p.r_cancel = false;
  s->d.p.inflight++;
  return TAXI_EAGAIN;
}

/* Copy arrivals into rbuf (r_kept) while they fit, if the state machine
 * keeps nothing there; each one copied gives its buffer back. */
static void keep_arrivals(taxi_stream_t *s) {
  if (s->rlen > 0) return;
  while (s->d.p.rq_count > 0) {
    struct taxi__pooled_arrival a = s->d.p.rq[s->d.p.rq_head];
    if (s->d.p.r_kept + a.len > s->rcap) return;
    memcpy(s->rbuf + s->d.p.r_kept, a.data, a.len);
    s->d.p.r_kept += a.len;
    rq_pop(s);
    give_back(s, a.data);
  }
}

void taxi__pooled_settle(taxi_stream_t *s, bool reading) {
  if (s->d.p.r_lent) {
    /* Bytes left unconsumed: into rbuf (a pool buffer is no larger than
     * rbuf, see s_open in io_proactive.c). */
    if (s->rlen > 0) memmove(s->rbuf, s->rdata + s->rpos, s->rlen);
    s->rpos = 0;
    give_back(s, s->d.p.r_lent);
    s->d.p.r_lent = NULL;
    s->rdata = s->rbuf;
  }
  if (reading) return;
  stop_reading(s);
  keep_arrivals(s);
}

void taxi__pooled_unread(taxi_stream_t *s) {
  /* The bytes go to the detach callback as one: at rdata, lent or not,
   * when nothing else waits; else all in rbuf, or (more than it holds,
   * which a stream detached while its rounds fell behind may have) in
   * a block of their own, given back by taxi__pooled_forget. */
  if (s->d.p.r_kept > 0) { /* rlen is 0: they are the first */
    s->rdata = s->rbuf;
    s->rpos = 0;
    s->rlen = s->d.p.r_kept;
    TAXI__S_COUNT(s, bytes_in, (uint64_t)s->d.p.r_kept);
    s->d.p.r_kept = 0;
  }
  if (s->d.p.rq_count == 0) return;
  size_t total = s->rlen;
  for (unsigned i = 0; i < s->d.p.rq_count; i++)
    total += s->d.p.rq[(s->d.p.rq_head + i) % s->d.p.rq_cap].len;
  unsigned char *to = s->rbuf;
  if (total > s->rcap) {
    to = taxi__malloc(total);
    if (!to) return; /* the arrivals are not handed over */
  }
  memmove(to, s->rdata + s->rpos, s->rlen);
  if (s->d.p.r_lent) give_back(s, s->d.p.r_lent);
  s->d.p.r_lent = to == s->rbuf ? NULL : to;
  s->d.p.r_heap = to != s->rbuf;
  s->rdata = to;
  s->rpos = 0;
  while (s->d.p.rq_count > 0) {
    struct taxi__pooled_arrival a = s->d.p.rq[s->d.p.rq_head];
    memcpy(to + s->rlen, a.data, a.len);
    s->rlen += a.len;
    TAXI__S_COUNT(s, bytes_in, (uint64_t)a.len);
    rq_pop(s);
    give_back(s, a.data);
  }
}

void taxi__pooled_forget(taxi_stream_t *s) {
  if (s->d.p.r_lent && s->d.p.r_heap)
    taxi__free(s->d.p.r_lent);
  else if (s->d.p.r_lent)
    give_back(s, s->d.p.r_lent);
  s->d.p.r_lent = NULL;
  s->d.p.r_heap = false;
  s->d.p.r_kept = 0;
  s->rdata = s->rbuf;
  s->rlen = 0;
  while (s->d.p.rq_count > 0) {
    give_back(s, s->d.p.rq[s->d.p.rq_head].data);
    rq_pop(s);
  }
  if (s->d.p.rq != s->d.p.rq_inline) taxi__free(s->d.p.rq);
  s->d.p.rq = s->d.p.rq_inline;
  s->d.p.rq_cap = TAXI__RQ_INLINE;
}
