/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/dgram_proactive.c - datagram endpoints (taxi/dgram.h) over a
 * Proactor (TAXI_IO_PROACTOR, TAXI_IO_PROACTORS): the driver's part of
 * core/stream/dgram_impl.h for io_proactive.c's table.
 *
 * Receiving.  An endpoint keeps recv_batch receives in flight
 * (taxi_proactor_recvfrom), each into its own slot of the buffers
 * allocated with the endpoint; nothing is allocated per datagram.  The
 * proactor keeps one receive of a handle in the kernel at a time and
 * completes them in the order they were started (core/proactor), so
 * delivering in start order keeps the order the datagrams arrived in,
 * whichever threads the completions run in: `order` lists the slots in
 * flight or completed, oldest first, and delivery takes from its head
 * while the head has completed (a later one that completed first waits:
 * the head's completion is being recorded by another thread, which then
 * delivers both).  A completion records its slot and asks dgram.c to
 * deliver (ops->readable), which takes the slots through recv below under
 * the endpoint's cb_lock; recv starts again the slots the previous call
 * handed out, and any whose start the proactor refused (`idle`).  When
 * every start was refused nothing is in flight and no completion would
 * come to start them again: a timer (`gop`) does.
 *
 * Where the proactor's pool is io_uring's ring of provided buffers, the
 * endpoint instead keeps one multishot receive in flight in slot 0: one
 * request for every datagram, each in a buffer the kernel picks; the
 * proactor delivers them one at a time, and each buffer goes back once
 * its datagram has been delivered.  The buffers are the pool's when one
 * holds recv_size bytes and the kernel's header
 * (TAXI_PROACTOR_DGRAM_ROOM: taxi_proactor_recvfrom_pooled), else those
 * of the proactor's group sized for recv_size up to 64 KiB, shared by its
 * endpoints (core/proactor/proactor_groups.h); a larger recv_size keeps
 * the slots.  An error ends the request, and the next recv starts it
 * again.  Longer datagrams are cut at recv_size here, as the endpoint's
 * own buffers would cut them, whatever size the group's buffers are.
 *
 * One handler call a datagram would make each datagram a batch of its
 * own: dgram.c sends the replies of a batch after its last callback, so
 * one sendmmsg a datagram, and the dispatching thread back into the
 * kernel for each.  So the recv that hands out the delivered datagram
 * takes with it, up to recv_batch, those the proactor has reported
 * already (core/proactor/proactor_more.h): their callbacks run as one
 * batch and their replies leave together.  Nothing waits for traffic
 * that has not come: the batch is what the last wait brought in, and its
 * replies leave when its last callback returns, as on a reactor.  (Sending
 * through the ring instead would cost an operation record a datagram and
 * one sendmsg request each, and the proactor starts one send of a handle
 * at a time; holding replies past the handler for the end of the
 * proactor's batch would need a hook in every loop that dispatches it.)
 *
 * Sending.  dgram.c sends at once where the socket takes the datagram
 * (the socket is non-blocking) and queues it otherwise; want_write then
 * starts one taxi_proactor_sendto of the queue's head, whose completion
 * hands the queue back to dgram.c (ops->sent), which sends on.
 *
 * Closing.  The handle is detached from the proactor, which completes
 * every operation on it (TAXI_ECANCELED, or the result that won the
 * race), and the retry timer, if it runs, is cancelled; refs counts those
 * operations and the handlers running, and the last to go releases the
 * endpoint (ops->released), which then closes the socket.  So no receive can
 * name the descriptor once it is closed, and nothing runs after the close
 * callback.
 *
 * Calls the proactor (and its group) only; reports to dgram.c through
 * d->ops.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/proactor/proactor_groups.h"
#include "core/proactor/proactor_more.h"
#include "core/stream/dgram_impl.h"

#include <string.h>

/* How long an endpoint whose every receive the proactor refused waits
 * before it tries again: the refusal lasts while another receive holds
 * the socket, which a millisecond or two sees through. */
#define RETRY_NS ((taxi_time_t)2000000)

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
  int rc;
  if (!d->d.p.pooled)
    rc = taxi_proactor_recvfrom(d->d.p.px, &sl->op, d->fd, sl->buf, d->rsize,
                                r_done, sl);
  else if (d->d.p.group)
    rc = taxi__proactor_recvfrom_group(d->d.p.px, &sl->op, d->fd, d->d.p.group,
                                       r_done, sl);
  else
    rc = taxi_proactor_recvfrom_pooled(d->d.p.px, &sl->op, d->fd,
                                       TAXI_READ_MULTISHOT, r_done, sl);
  if (rc < 0) return rc;
  sl->armed = true;
  if (!d->d.p.pooled)
    d->d.p.order[(d->d.p.ohead + d->d.p.ocount++) % d->rbatch] = i;
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

/* The buffers the previous recv handed out go back (their datagrams have
 * been delivered).  Lock held, or nothing of d runs. */
static void give_back_handed_locked(taxi_dgram_t *d) {
  taxi__proactor_buffers_release(d->d.p.px, d->d.p.handed, d->d.p.nhanded);
  for (unsigned i = 0; i < d->d.p.nhanded; i++) d->d.p.handed[i] = NULL;
  d->d.p.nhanded = 0;
}

/* Hand out a datagram of the pool's buffer buf (len bytes as the backend
 * said, flags and sender as op has them now) in m.  Lock held. */
static void hand_out_locked(taxi_dgram_t *d, taxi__dgram_msg_t *m, void *buf,
                            size_t len, unsigned flags, const taxi_op_t *op) {
  d->d.p.handed[d->d.p.nhanded++] = buf;
  m->buf = buf;
  m->cap = d->rsize;
  m->len = len < d->rsize ? len : d->rsize;
  m->truncated = len > d->rsize || (flags & TAXI_MSG_TRUNCATED) != 0;
  taxi__sockaddr_set(&m->addr, op->peer, op->peer_len);
}

/* recv over the pool: the datagram the multishot receive delivered and
 * those reported behind it (at most max), or its end; the buffers handed
 * out last time go back first, and an ended receive starts again.  Lock
 * held. */
static int recv_pooled_locked(taxi_dgram_t *d, taxi__dgram_msg_t *m,
                              unsigned max) {
  taxi__dgram_rslot_t *sl = &d->d.p.slots[0];
  give_back_handed_locked(d);
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
  hand_out_locked(d, &m[0], sl->lent, sl->len, sl->msg_flags, &sl->op);
  sl->lent = NULL;
  /* sl->done: r_done of this delivery has run and its handler has not
   * returned (it returns only after its own readable, which waits for
   * the cb_lock held here), which is when the proactor lets the next ones
   * be taken.  The op's fields are the next datagram's once taken, the
   * previous one's copied out already. */
  unsigned n = 1;
  size_t len;
  while (n < max && !atomic_load(&d->closing) &&
         taxi__proactor_next_dgram(d->d.p.px, &sl->op, &len)) {
    hand_out_locked(d, &m[n], sl->op.data, len, sl->op.msg_flags, &sl->op);
    n++;
  }
  return (int)n;
}

/* Start again the slots that are neither in flight nor holding a
 * datagram: those the previous recv handed out, and those whose start the
 * proactor refused before (for a moment: another receive held the
 * socket); one refused again stays idle.  Lock held, never while a buffer
 * handed out is still the caller's. */
static void rearm_idle_locked(taxi_dgram_t *d) {
  if (atomic_load(&d->closing)) return;
  unsigned n = d->d.p.nidle, kept = 0;
  for (unsigned k = 0; k < n; k++) {
    unsigned i = d->d.p.idle[k];
    if (arm_locked(d, i) < 0) d->d.p.idle[kept++] = i;
  }
  d->d.p.nidle = kept;
}

/* The retry timer expired (or was cancelled by the close): the slots
 * whose start was refused are tried again (the recv of readable). */
static void g_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  (void)op;
  (void)status;
  (void)bytes;
  taxi_dgram_t *d = act;
  taxi__mutex_lock(&d->lock);
  d->d.p.retry_pending = false;
  bool closing = atomic_load(&d->closing);
  taxi__mutex_unlock(&d->lock);
  if (!closing) d->ops->readable(d);
  unref(d);
}

/* Nothing in flight, every start refused: try again shortly.  Lock held. */
static void retry_later_locked(taxi_dgram_t *d) {
  if (d->d.p.retry_pending) return;
  if (taxi_proactor_timer(d->d.p.px, d->d.p.gop, RETRY_NS, g_done, d) < 0)
    return; /* the proactor is going: nothing is received any more */
  d->d.p.retry_pending = true;
  d->d.p.refs++;
}

static int d_recv(taxi_dgram_t *d, taxi__dgram_msg_t *m, unsigned max) {
  int rc = TAXI_EAGAIN;
  unsigned n = 0;
  taxi__mutex_lock(&d->lock);
  if (d->d.p.pooled) {
    rc = recv_pooled_locked(d, m, max);
    taxi__mutex_unlock(&d->lock);
    return rc;
  }
  /* What the previous call handed out has been delivered. */
  rearm_idle_locked(d);
  while (n < max && d->d.p.ocount > 0) {
    unsigned i = d->d.p.order[d->d.p.ohead];
    taxi__dgram_rslot_t *sl = &d->d.p.slots[i];
    if (!sl->done) break; /* its completion delivers it and what follows */
    if (sl->status < 0 && n > 0) break; /* the error at the next call */
    sl->done = false;
    d->d.p.ohead = (d->d.p.ohead + 1) % d->rbatch;
    d->d.p.ocount--;
    d->d.p.idle[d->d.p.nidle++] = i;
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
  /* No buffer for the caller (only cancelled receives, which happen when
   * a receive was cancelled without a close, or an error): none is in
   * use, and no next call may come to start them again, so they start
   * now.  (Slots handed out, n > 0, start at the next call.) */
  if (n == 0) rearm_idle_locked(d);
  if (n == 0 && d->d.p.ocount == 0 && !atomic_load(&d->closing))
    retry_later_locked(d);
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
    give_back_handed_locked(d);
    if (d->d.p.slots) give_back_locked(d, &d->d.p.slots[0].lent);
  }
  taxi__free(d->d.p.slots);
  taxi__free(d->d.p.sop);
  taxi__free(d->d.p.gop);
  taxi__free(d->d.p.handed);
  taxi__free(d->d.p.order);
  d->d.p.slots = NULL;
  d->d.p.order = NULL;
  d->d.p.idle = NULL;
  d->d.p.sop = NULL;
  d->d.p.gop = NULL;
  d->d.p.handed = NULL;
}

/* The proactor of the caller's group the spread picks (one ring per
 * thread), else the context's; attach, and start every receive. */
static int d_open(taxi_dgram_t *d) {
  taxi_io_t *io = d->io;
  d->d.p.px = io->group ? taxi_proactor_group_next(io->group) : io->proactor;
  d->d.p.slots = taxi__calloc(d->rbatch, sizeof *d->d.p.slots);
  d->d.p.sop = taxi__calloc(1, sizeof *d->d.p.sop);
  d->d.p.gop = taxi__calloc(1, sizeof *d->d.p.gop);
  d->d.p.handed = taxi__calloc(d->rbatch, sizeof *d->d.p.handed);
  /* order and idle: rbatch entries each, one block. */
  d->d.p.order = taxi__calloc(2 * (size_t)d->rbatch, sizeof *d->d.p.order);
  if (!d->d.p.slots || !d->d.p.sop || !d->d.p.gop || !d->d.p.handed ||
      !d->d.p.order) {
    d_fini(d);
    return TAXI_ENOMEM;
  }
  d->d.p.idle = d->d.p.order + d->rbatch;
  for (unsigned i = 0; i < d->rbatch; i++) {
    d->d.p.slots[i].d = d;
    d->d.p.slots[i].buf = d->rbuf + (size_t)i * d->rsize;
  }
  /* The pool when its buffers hold what the endpoint's would (the
   * context's own pool: io_uring's provided buffers only); else the
   * proactor's group for recv_size, where it has one (made now if this
   * is its first endpoint); else the endpoint's own buffers. */
  unsigned feat = 0;
  d->d.p.group = 0;
  d->d.p.pooled = io->pool_size > TAXI_PROACTOR_DGRAM_ROOM &&
                  d->rsize <= io->pool_size - TAXI_PROACTOR_DGRAM_ROOM &&
                  taxi_proactor_features(d->d.p.px, &feat) == 0 &&
                  (feat & TAXI_PFEAT_PROVIDED_BUFFERS);
  if (!d->d.p.pooled && d->rsize <= TAXI__DGROUP_MAX_RECV &&
      taxi__proactor_dgram_group(d->d.p.px, d->rsize, &d->d.p.group) == 0)
    d->d.p.pooled = true;
  int rc = taxi_proactor_attach(d->d.p.px, d->fd);
  if (rc < 0) {
    d_fini(d);
    return rc;
  }
  taxi__mutex_lock(&d->lock);
  rc = arm_locked(d, 0);
  /* The first failing is the endpoint's failure (nothing in flight yet);
   * a later one leaves that slot idle, to be started at the next recv. */
  for (unsigned i = 1; rc == 0 && !d->d.p.pooled && i < d->rbatch; i++)
    if (arm_locked(d, i) < 0) d->d.p.idle[d->d.p.nidle++] = i;
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
  /* The timer is no operation on the socket: cancelled here, its handler
   * drops its reference (TAXI_ENOENT: it is running, and does so too). */
  if (d->d.p.retry_pending) (void)taxi_proactor_cancel(d->d.p.px, d->d.p.gop);
  bool last = d->d.p.refs == 0;
  taxi__mutex_unlock(&d->lock);
  if (last) d->ops->released(d);
}

const taxi__dgram_driver_t taxi__dgram_proactive = {.open = d_open,
                                                    .want_write = d_want_write,
                                                    .close = d_close,
                                                    .recv = d_recv,
                                                    .fini = d_fini};
