/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/dgram_proactive.c - datagram endpoints (taxi/dgram.h) over a
 * Proactor (TAXI_IO_PROACTOR, TAXI_IO_PROACTORS): the driver's part of
 * core/stream/dgram_impl.h for io_proactive.c's table.
 *
 * Receiving.  An endpoint keeps recv_batch receives in flight
 * (taxi_proactor_recvfrom), each into its own slot of the buffers
 * allocated with the endpoint; nothing is allocated per datagram.  The
 * proactor completes the receives of one handle in the order they were
 * started, and a slot is started again only once its datagram has been
 * delivered, in slot order: so the slots complete in turn, and delivering
 * from `rnext` on keeps the order the datagrams arrived in, whichever
 * threads the completions run in.  A completion records its slot and asks
 * dgram.c to deliver (ops->readable), which takes the slots through recv
 * below under the endpoint's cb_lock, and recv starts again the slots the
 * previous call handed out.
 *
 * Where the proactor's pool is io_uring's ring of provided buffers and a
 * buffer of it holds recv_size bytes and the kernel's header
 * (TAXI_PROACTOR_DGRAM_ROOM), the endpoint instead keeps one multishot
 * receive (taxi_proactor_recvfrom_pooled) in flight in slot 0: one
 * request for every datagram, each in a buffer the kernel picks; the
 * proactor delivers them one at a time, and each buffer goes back to the
 * pool once its datagram has been delivered.  An error ends the request,
 * and the next recv starts it again.  Longer datagrams are cut at
 * recv_size here, as the endpoint's own buffers would cut them.
 *
 * Sending.  dgram.c sends at once where the socket takes the datagram
 * (the socket is non-blocking) and queues it otherwise; want_write then
 * starts one taxi_proactor_sendto of the queue's head, whose completion
 * hands the queue back to dgram.c (ops->sent), which sends on.
 *
 * Closing.  The handle is detached from the proactor, which completes
 * every operation on it (TAXI_ECANCELED, or the result that won the
 * race); refs counts those operations and the handlers running, and the
 * last to go releases the endpoint (ops->released), which then closes
 * the socket.  So no receive can name the descriptor once it is closed,
 * and nothing runs after the close callback.
 *
 * Calls the proactor (and its group) only; reports to dgram.c through
 * d->ops.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/dgram_impl.h"

#include <string.h>

static void r_done(taxi_op_t *op, int status, size_t bytes, void *act);

/* One reference less (an operation completed, a handler returned): the
 * last after the close releases d.  Lock not held. */
static void unref(taxi_dgram_t *d) {
  taxi__mutex_lock(&d->lock);
  bool last = --d->d.p.refs == 0 && d->d.p.detached;
  taxi__mutex_unlock(&d->lock);
  if (last) d->ops->released(d);
}

/* Start the receive of slot i (pooled: the multishot one).  Lock held. */
static int arm_locked(taxi_dgram_t *d, unsigned i) {
  taxi__dgram_rslot_t *sl = &d->d.p.slots[i];
  int rc = d->d.p.pooled
               ? taxi_proactor_recvfrom_pooled(d->d.p.px, &sl->op, d->fd,
                                               TAXI_READ_MULTISHOT, r_done, sl)
               : taxi_proactor_recvfrom(d->d.p.px, &sl->op, d->fd, sl->buf,
                                        d->rsize, r_done, sl);
  if (rc < 0) return rc;
  sl->armed = true;
  d->d.p.refs++;
  return 0;
}

/* A pool's buffer back to it (lock held, or nothing of d runs). */
static void give_back_locked(taxi_dgram_t *d, void **buf) {
  if (*buf) (void)taxi_proactor_buffer_release(d->d.p.px, *buf);
  *buf = NULL;
}

/* A receive completed: keep its result in its slot, have it delivered.
 * A multishot one (op->more) stays in flight, and the proactor runs its
 * next delivery only once this returns. */
static void r_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi__dgram_rslot_t *sl = act;
  taxi_dgram_t *d = sl->d;
  bool more = op->more != 0;
  taxi__mutex_lock(&d->lock);
  if (!more) sl->armed = false;
  bool closing = atomic_load(&d->closing);
  if (closing) {
    /* Nobody delivers it any more, nor the one before, if left. */
    void *data = status == 0 ? op->data : NULL;
    give_back_locked(d, &data);
    give_back_locked(d, &sl->lent);
    sl->done = false;
  } else {
    sl->done = true;
    sl->status = status;
    sl->len = bytes;
    sl->msg_flags = op->msg_flags;
    sl->lent = status == 0 ? op->data : NULL;
  }
  taxi__mutex_unlock(&d->lock);
  /* This completion's reference (or, multishot, the one of the receive
   * in flight) keeps d while it delivers. */
  if (!closing) d->ops->readable(d);
  if (!more) unref(d);
}

/* recv over the pool: the one datagram the multishot receive delivered,
 * or its end; the buffer handed out last time goes back first, and an
 * ended receive starts again.  Lock held. */
static int recv_pooled_locked(taxi_dgram_t *d, taxi__dgram_msg_t *m) {
  taxi__dgram_rslot_t *sl = &d->d.p.slots[0];
  give_back_locked(d, &d->d.p.handed);
  if (!sl->armed && !sl->done && !atomic_load(&d->closing))
    (void)arm_locked(d, 0);
  if (!sl->done) return TAXI_EAGAIN;
  sl->done = false;
  if (sl->status < 0) {
    /* The receive ended: another takes its place now (no buffer is
     * handed out with an error). */
    if (!sl->armed && !atomic_load(&d->closing)) (void)arm_locked(d, 0);
    return sl->status == TAXI_ECANCELED ? TAXI_EAGAIN : sl->status;
  }
  d->d.p.handed = sl->lent;
  sl->lent = NULL;
  m[0].buf = d->d.p.handed;
  m[0].cap = d->rsize;
  m[0].len = sl->len < d->rsize ? sl->len : d->rsize;
  m[0].truncated =
      sl->len > d->rsize || (sl->msg_flags & TAXI_MSG_TRUNCATED) != 0;
  taxi__sockaddr_set(&m[0].addr, sl->op.peer, sl->op.peer_len);
  return 1;
}

static int d_recv(taxi_dgram_t *d, taxi__dgram_msg_t *m, unsigned max) {
  int rc = TAXI_EAGAIN;
  unsigned n = 0;
  taxi__mutex_lock(&d->lock);
  if (d->d.p.pooled) {
    rc = recv_pooled_locked(d, m);
    taxi__mutex_unlock(&d->lock);
    return rc;
  }
  /* What the previous call handed out has been delivered: receive into
   * those slots again, in their order (which is the order they will
   * complete in).  A slot that cannot start stays idle, and the endpoint
   * receives with one slot less (the proactor is being destroyed). */
  if (!atomic_load(&d->closing))
    for (unsigned k = 0; k < d->d.p.given; k++)
      (void)arm_locked(d, (d->d.p.gfirst + k) % d->rbatch);
  d->d.p.given = 0;
  d->d.p.gfirst = d->d.p.rnext;
  while (n < max) {
    taxi__dgram_rslot_t *sl = &d->d.p.slots[d->d.p.rnext];
    if (!sl->done) break;
    if (sl->status < 0 && n > 0) break; /* the error at the next call */
    sl->done = false;
    d->d.p.rnext = (d->d.p.rnext + 1) % d->rbatch;
    d->d.p.given++;
    if (sl->status == TAXI_ECANCELED) continue; /* not the application's */
    if (sl->status < 0) {
      rc = sl->status;
      break;
    }
    m[n].buf = sl->buf;
    m[n].cap = d->rsize;
    m[n].len = sl->len;
    m[n].truncated = (sl->msg_flags & TAXI_MSG_TRUNCATED) != 0;
    taxi__sockaddr_set(&m[n].addr, sl->op.peer, sl->op.peer_len);
    n++;
  }
  /* Nothing for the caller (only cancelled receives, which happen when a
   * receive was cancelled without a close): no next call comes to start
   * them again, so they start now. */
  if (n == 0 && rc == TAXI_EAGAIN && !atomic_load(&d->closing)) {
    for (unsigned k = 0; k < d->d.p.given; k++)
      (void)arm_locked(d, (d->d.p.gfirst + k) % d->rbatch);
    d->d.p.given = 0;
    d->d.p.gfirst = d->d.p.rnext;
  }
  taxi__mutex_unlock(&d->lock);
  return n > 0 ? (int)n : rc;
}

static void s_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  (void)op;
  (void)bytes;
  taxi_dgram_t *d = act;
  taxi__mutex_lock(&d->lock);
  d->d.p.sending = false;
  bool closing = atomic_load(&d->closing);
  taxi__mutex_unlock(&d->lock);
  if (!closing) d->ops->sent(d, status);
  unref(d);
}

/* The queue's head goes out through the proactor; its completion sends
 * on (ops->sent).  Lock held. */
static int d_want_write(taxi_dgram_t *d, bool on) {
  if (!on || d->d.p.sending || d->qcount == 0) return 0;
  const taxi__dgram_slot_t *h = &d->slots[d->qhead];
  int rc = taxi_proactor_sendto(d->d.p.px, d->d.p.sop, d->fd, d->sbuf + h->off,
                                h->len, h->to.family ? h->to.sa.bytes : NULL,
                                h->to.family ? h->to.len : 0, s_done, d);
  if (rc < 0) return rc;
  d->d.p.sending = true;
  d->d.p.refs++;
  return 0;
}

static void d_fini(taxi_dgram_t *d) {
  if (d->d.p.pooled) {
    give_back_locked(d, &d->d.p.handed);
    if (d->d.p.slots) give_back_locked(d, &d->d.p.slots[0].lent);
  }
  taxi__free(d->d.p.slots);
  taxi__free(d->d.p.sop);
  d->d.p.slots = NULL;
  d->d.p.sop = NULL;
}

/* The proactor of the caller's group the spread picks (one ring per
 * thread), else the context's; attach, and start every receive. */
static int d_open(taxi_dgram_t *d) {
  taxi_io_t *io = d->io;
  d->d.p.px = io->group ? taxi_proactor_group_next(io->group) : io->proactor;
  d->d.p.slots = taxi__calloc(d->rbatch, sizeof *d->d.p.slots);
  d->d.p.sop = taxi__calloc(1, sizeof *d->d.p.sop);
  if (!d->d.p.slots || !d->d.p.sop) {
    d_fini(d);
    return TAXI_ENOMEM;
  }
  for (unsigned i = 0; i < d->rbatch; i++) {
    d->d.p.slots[i].d = d;
    d->d.p.slots[i].buf = d->rbuf + (size_t)i * d->rsize;
  }
  /* The pool when its buffers hold what the endpoint's would (the
   * context's own pool: io_uring's provided buffers only). */
  unsigned feat = 0;
  d->d.p.pooled = io->pool_size > TAXI_PROACTOR_DGRAM_ROOM &&
                  d->rsize <= io->pool_size - TAXI_PROACTOR_DGRAM_ROOM &&
                  taxi_proactor_features(d->d.p.px, &feat) == 0 &&
                  (feat & TAXI_PFEAT_PROVIDED_BUFFERS);
  int rc = taxi_proactor_attach(d->d.p.px, d->fd);
  if (rc < 0) {
    d_fini(d);
    return rc;
  }
  taxi__mutex_lock(&d->lock);
  rc = arm_locked(d, 0);
  /* The first failing is the endpoint's failure (nothing in flight yet);
   * a later one leaves that slot idle. */
  for (unsigned i = 1; rc == 0 && !d->d.p.pooled && i < d->rbatch; i++)
    if (arm_locked(d, i) < 0) break;
  taxi__mutex_unlock(&d->lock);
  if (rc < 0) {
    taxi_proactor_detach(d->d.p.px, d->fd);
    d_fini(d);
  }
  return rc;
}

/* Detach: every operation on the socket completes (cancelled), and the
 * last reference releases d. */
static void d_close(taxi_dgram_t *d) {
  taxi__mutex_lock(&d->lock);
  d->d.p.detached = true;
  /* What was received and will not be delivered goes back to the pool
   * (no delivery starts: closing is set).  The buffer handed out last
   * may still be read by a callback running now: it goes at the end. */
  if (d->d.p.pooled) {
    give_back_locked(d, &d->d.p.slots[0].lent);
    d->d.p.slots[0].done = false;
  }
  (void)taxi_proactor_detach(d->d.p.px, d->fd);
  bool last = d->d.p.refs == 0;
  taxi__mutex_unlock(&d->lock);
  if (last) d->ops->released(d);
}

const taxi__dgram_driver_t taxi__dgram_proactive = {.open = d_open,
                                                    .want_write = d_want_write,
                                                    .close = d_close,
                                                    .recv = d_recv,
                                                    .fini = d_fini};
