/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_proactive.c - the stream layer's driver over a proactor,
 * dispatched by one thread or a Leader/Followers pool: a stream's
 * transfers are asynchronous operations whose completions become stream
 * events.
 *
 * Each stream owns four operation records, so nothing is allocated per
 * operation: `rop` reads into the stream's buffer (or, where the backend
 * picks buffers from the proactor's pool, is one multishot pooled read:
 * core/stream/io_pooled.c), `wop` writes the head
 * of its queue (or connects, or transmits a file), `kop` is a post that
 * gets work done in a dispatching thread, `top` a timer for the
 * timeouts.  At most one of each is in flight.  The stream is released
 * once it is torn down and none is in flight any more: until then a
 * completion may still name it.
 *
 * Calls the proactor (and a group of them), and of the wing only
 * io_pooled.c by name; what completes goes up
 * through the ops records of the context, stream, listener or timer
 * (core/stream/io_impl.h).
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/dgram_impl.h"
#include "core/stream/io_impl.h"

#include <string.h>

/* ---- the context ----------------------------------------------------------
 */

static void wake_read(taxi_io_t *io);

static void wake_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_io_t *io = act;
  (void)op;
  (void)bytes;
  atomic_store(&io->wake_reading, false);
  if (status == TAXI_ECANCELED) return; /* the context is going */
  io->ops->woken(io);
  wake_read(io);
}

static void wake_read(taxi_io_t *io) {
  if (taxi_proactor_read(io->proactor, &io->wake_op, io->wake[0], io->wake_buf,
                         sizeof io->wake_buf, 0, wake_done, io) == 0)
    atomic_store(&io->wake_reading, true);
}

static int ctx_open(taxi_io_t *io) {
  taxi_op_init(&io->wake_op);
  int rc = taxi_proactor_attach(io->proactor, io->wake[0]);
  if (rc < 0) return rc;
  rc = taxi_proactor_read(io->proactor, &io->wake_op, io->wake[0], io->wake_buf,
                          sizeof io->wake_buf, 0, wake_done, io);
  if (rc < 0) {
    taxi_proactor_detach(io->proactor, io->wake[0]);
    return rc;
  }
  atomic_store(&io->wake_reading, true);
  return 0;
}

static int ctx_dispatch(taxi_io_t *io, int timeout_ms) {
  return taxi_proactor_handle_events(io->proactor, timeout_ms);
}

static void ctx_close(taxi_io_t *io) {
  /* The signals the context added: the proactor may be the
   * application's and outlive it. */
  for (int signo = 1; signo < TAXI__IO_SIGNALS; signo++)
    if (io->sig_added[signo])
      (void)taxi_proactor_remove_signal(io->proactor, signo);
  memset(io->sig_added, 0, sizeof io->sig_added);
  /* The read completes with TAXI_ECANCELED; wait for it, so the record is
   * idle before the context's memory goes.  A group's proactor is its
   * thread's alone: the group's destroy completes it there, before the
   * context's memory goes too. */
  taxi_proactor_close(io->proactor, io->wake[0]);
  if (io->group) return;
  taxi_time_t give_up = taxi_now() + 5 * TAXI_NSEC_PER_SEC;
  while (atomic_load(&io->wake_reading) && taxi_now() < give_up) {
    taxi_proactor_restart(io->proactor);
    int rc = taxi_proactor_handle_events(io->proactor, 10);
    if (rc < 0 && rc != TAXI_ESTOPPED) break;
  }
}

/* Signals: the proactor's own (taxi_proactor_add_signal), told in a
 * dispatching thread. */
static void sig_caught(taxi_proactor_t *p, int signo, void *arg) {
  (void)p;
  taxi_io_t *io = arg;
  io->ops->signal(io, signo);
}

static int ctx_add_signal(taxi_io_t *io, int signo) {
  int rc = taxi_proactor_add_signal(io->proactor, signo, sig_caught, io);
  if (rc == 0) io->sig_added[signo] = true;
  return rc;
}

static int ctx_remove_signal(taxi_io_t *io, int signo) {
  int rc = taxi_proactor_remove_signal(io->proactor, signo);
  if (rc == 0) io->sig_added[signo] = false;
  return rc;
}

/* ---- streams --------------------------------------------------------------
 */

/* Every operation of a stream completes here. */
static void s_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_stream_t *s = act;
  unsigned bits = TAXI__P_WORK;
  taxi__stream_lock(s);
  if (op == &s->d.p.rop && s->d.p.pooled) {
    taxi__pooled_done_locked(s, op, status, bytes);
  } else if (op == &s->d.p.rop) {
    s->d.p.inflight--;
    s->d.p.r_busy = false;
    s->d.p.r_done = true;
    s->d.p.r_status = status;
    s->d.p.r_bytes = bytes;
  } else if (op == &s->d.p.wop) {
    s->d.p.inflight--;
    s->d.p.w_busy = false;
    s->d.p.w_done = true;
    s->d.p.w_status = status;
    s->d.p.w_bytes = bytes;
  } else if (op == &s->d.p.kop) {
    s->d.p.inflight--;
    s->d.p.k_busy = false;
    bits = TAXI__P_KICK;
  } else {
    s->d.p.inflight--;
    s->d.p.t_busy = false;
    bits = TAXI__P_DEADLINE;
  }
  if ((s->flags & TAXI__S_CLOSING) && s->d.p.inflight == 0)
    bits |= TAXI__P_RELEASED;
  /* In the same hold of the lock: once it is let go, the completion that
   * released s may free it. */
  s->ops->event_locked(s, bits);
}

/* With a group, the stream goes to the proactor the group's spread picks;
 * an accepted handle (attached to the proactor that accepted it: the
 * first, or for a sharded listener its member's) moves there, unless it
 * is to stay (sharded: the kernel spread the connections already).  A
 * handle the backend cannot move (IOCP binds it to its port for good)
 * stays where it is. */
static int s_open(taxi_stream_t *s, taxi_proactor_t *attached, bool stay) {
  taxi_op_init(&s->d.p.rop);
  taxi_op_init(&s->d.p.wop);
  taxi_op_init(&s->d.p.kop);
  taxi_op_init(&s->d.p.top);
  taxi_proactor_t *home = attached ? attached : s->io->proactor;
  taxi_proactor_t *px =
      s->io->group && !stay ? taxi_proactor_group_next(s->io->group) : home;
  if (attached && px != home && taxi_proactor_move(home, s->fd, px) < 0)
    px = home;
  s->d.p.px = px;
  /* Pooled reads where the backend picks the buffers (elsewhere a read
   * into the stream's buffer costs the same and copies nothing), for a
   * stream whose buffer holds a pool buffer's bytes (which the reads then
   * never exceed, and which it may have to keep). */
  unsigned feat = 0;
  s->d.p.pooled = s->io->pool_size && s->rcap >= s->io->pool_size &&
                  taxi_proactor_features(px, &feat) == 0 &&
                  (feat & TAXI_PFEAT_PROVIDED_BUFFERS);
  if (s->d.p.pooled) taxi__pooled_open(s);
  /* A dialing stream has no handle yet: s_adopt attaches it. */
  if (s->fd == TAXI_INVALID_HANDLE) return 0;
  int rc = attached ? 0 : taxi_proactor_attach(px, s->fd);
  s->d.p.attached = rc == 0;
  return rc;
}

/* A dialing stream got its connected handle (detached from the attempt
 * that made it): the proactor chosen at its open takes it. */
static int s_adopt(taxi_stream_t *s) {
  int rc = taxi_proactor_attach(s->d.p.px, s->fd);
  s->d.p.attached = rc == 0;
  return rc;
}

/*
 * A transfer may complete with TAXI_EAGAIN: the OS refused its requests
 * for too long (the proactor's submit_pauses, the aio backend's refused
 * requests), and the proactor gave up.  Not a failure of the stream, and
 * not to be passed on: TAXI_EAGAIN from the driver tells the state machine
 * that an operation is in flight and its completion will call back, so a
 * stream told so with none in flight would wait for good.  The bytes moved
 * before it count, and the operation is started again (the refusals, if
 * they go on, are paused for again).
 */
static int64_t s_read(taxi_stream_t *s) {
  if (s->d.p.pooled) return taxi__pooled_read(s, s_done);
  if (s->d.p.r_done) {
    s->d.p.r_done = false;
    int st = s->d.p.r_status;
    if (st == 0 || (st == TAXI_EAGAIN && s->d.p.r_bytes > 0))
      return (int64_t)s->d.p.r_bytes;
    if (st != TAXI_EAGAIN) return st == TAXI_EEOF ? 0 : st;
  }
  if (s->d.p.r_busy) return TAXI_EAGAIN;
  int rc = taxi_proactor_read(s->d.p.px, &s->d.p.rop, s->fd, s->rbuf, s->rcap,
                              0, s_done, s);
  if (rc < 0) return rc;
  s->d.p.r_busy = true;
  s->d.p.inflight++;
  return TAXI_EAGAIN;
}

/* The result of the output operation, once the same head is offered
 * again; else start one.  TAXI_EAGAIN (see s_read): the bytes it sent, or
 * TAXI_EAGAIN with none, for the caller to start it again. */
static int64_t w_result(taxi_stream_t *s) {
  s->d.p.w_done = false;
  int st = s->d.p.w_status;
  if (st == 0 || (st == TAXI_EAGAIN && s->d.p.w_bytes > 0))
    return (int64_t)s->d.p.w_bytes;
  return st;
}

/* Closing: a write cancelled (or failed) part way has sent its first
 * w_bytes all the same, and they count. */
static int64_t s_written(taxi_stream_t *s) {
  if (s->d.p.w_done && s->d.p.w_status < 0 && s->d.p.w_bytes > 0) {
    s->d.p.w_done = false;
    return (int64_t)s->d.p.w_bytes;
  }
  if (s->d.p.w_done) return w_result(s);
  return s->d.p.w_busy ? TAXI_EBUSY : TAXI_EAGAIN;
}

static int64_t s_write(taxi_stream_t *s, const taxi_buf_t *bufs, size_t n) {
  if (s->d.p.w_done) {
    int64_t r = w_result(s);
    if (r != TAXI_EAGAIN) return r;
  }
  if (s->d.p.w_busy) return TAXI_EAGAIN;
  if (n > TAXI_OP_MAX_BUFS) n = TAXI_OP_MAX_BUFS;
  int rc =
      taxi_proactor_write(s->d.p.px, &s->d.p.wop, s->fd, bufs, n, s_done, s);
  if (rc < 0) return rc;
  s->d.p.w_busy = true;
  s->d.p.inflight++;
  return TAXI_EAGAIN;
}

static int64_t s_sendfile(taxi_stream_t *s, taxi_handle_t file, int64_t off,
                          size_t len) {
  if (s->d.p.w_done) {
    int64_t r = w_result(s);
    if (r != TAXI_EAGAIN) return r;
  }
  if (s->d.p.w_busy) return TAXI_EAGAIN;
  int rc = taxi_proactor_transmit_file(s->d.p.px, &s->d.p.wop, s->fd, file, off,
                                       len, NULL, NULL, s_done, s);
  if (rc < 0) return rc;
  s->d.p.w_busy = true;
  s->d.p.inflight++;
  return TAXI_EAGAIN;
}

static int s_connect_start(taxi_stream_t *s, const taxi_addr_t *a) {
  int rc = taxi_proactor_connect(s->d.p.px, &s->d.p.wop, s->fd, a->sa.bytes,
                                 a->len, s_done, s);
  if (rc < 0) return rc;
  s->d.p.w_busy = true;
  s->d.p.inflight++;
  return TAXI_EAGAIN;
}

static int s_connect_result(taxi_stream_t *s) {
  if (s->conn_err) return s->conn_err;
  if (!s->d.p.w_done) return TAXI_EAGAIN;
  s->d.p.w_done = false;
  return s->d.p.w_status;
}

/* Operations are started by the state machine itself. */
static void s_update(taxi_stream_t *s) { (void)s; }
static void s_defer(taxi_stream_t *s) { (void)s; }

static int s_kick(taxi_stream_t *s) {
  if (s->d.p.k_busy) return 0;
  int rc = taxi_proactor_post(s->d.p.px, &s->d.p.kop, s_done, s);
  if (rc == 0) {
    s->d.p.k_busy = true;
    s->d.p.inflight++;
  }
  return rc;
}

static void s_arm(taxi_stream_t *s, taxi_time_t deadline) {
  if (s->d.p.t_busy) {
    /* A record in flight cannot be moved: cancel it; its completion
     * (P_DEADLINE) arms it again for the earlier deadline. */
    if (s->d.p.t_deadline > deadline)
      taxi_proactor_cancel(s->d.p.px, &s->d.p.top);
    return;
  }
  taxi_time_t delay = deadline - taxi_now();
  if (delay < 0) delay = 0;
  if (taxi_proactor_timer(s->d.p.px, &s->d.p.top, delay, s_done, s) == 0) {
    s->d.p.t_busy = true;
    s->d.p.t_deadline = deadline;
    s->d.p.inflight++;
  } else {
    s->armed = 0;
  }
}

static void s_teardown(taxi_stream_t *s) {
  taxi_proactor_t *p = s->d.p.px;
  taxi__stream_lock(s);
  /* Completes what is pending on the handle with TAXI_ECANCELED, then
   * closes it once no operation can name it any more. */
  if (s->d.p.attached && s->keep_handle)
    taxi_proactor_detach(p, s->fd); /* the caller's once released */
  else if (s->d.p.attached)
    taxi_proactor_close(p, s->fd);
  else if (!s->keep_handle)
    taxi__close(s->fd);
  if (s->d.p.t_busy) taxi_proactor_cancel(p, &s->d.p.top);
  if (s->d.p.inflight == 0) s->pending |= TAXI__P_RELEASED;
  taxi__stream_unlock(s);
}

/* Released for a detach: a read that completed with bytes while the
 * stream was being torn down brought them into rbuf (at its start: a read
 * is only started on an empty buffer). */
static void s_unread(taxi_stream_t *s) {
  if (s->d.p.pooled) {
    taxi__pooled_unread(s);
    return;
  }
  if (!s->d.p.r_done || s->d.p.r_status != 0 || s->rlen != 0) return;
  s->d.p.r_done = false;
  s->rpos = 0;
  s->rlen = s->d.p.r_bytes;
  TAXI__S_COUNT(s, bytes_in, (uint64_t)s->rlen);
}

static void s_read_settle(taxi_stream_t *s, bool reading) {
  if (s->d.p.pooled) taxi__pooled_settle(s, reading);
}

static void s_read_forget(taxi_stream_t *s) {
  if (s->d.p.pooled) taxi__pooled_forget(s);
}

/* ---- listeners ------------------------------------------------------------
 */

/*
 * The listener's two records, `aop` (a multishot accept) and `bop` (the
 * pause after a failed accept, or a hand-over of kept connections), are
 * counted in inflight.  Each completion updates the count and decides, in
 * one hold of the lock, whether it is the last one of a closed listener:
 * only that one touches the listener afterwards (to release it).
 *
 * Paused, the listener cancels its accept; but a cancel takes effect
 * later than the call (at the ring owner's next wait with one-thread
 * rings), and io_uring's multishot accept may have taken several
 * connections from the queue already.  Those arrive while paused and are
 * kept, open, in order, and handed to the callback once resumed (by a
 * zero-delay bop in a dispatching thread), before any new accept.
 */

/* Connections kept while paused, at most: io_uring's multishot accept
 * takes no more than 64 ahead of their handlers (taxi/proactor.h);
 * the other backends one at a time. */
#define KEPT_MAX 64

static void l_accepted(taxi_op_t *op, int status, size_t bytes, void *act);
static void l_backoff_done(taxi_op_t *op, int status, size_t bytes, void *act);

/* Whether l is closed and nothing of it in flight: then the caller, and
 * no one else, releases it.  Lock held. */
static bool l_last_locked(taxi_listener_t *l) {
  if (!l->closing || l->d.p.inflight > 0 || l->released) return false;
  l->released = true;
  return true;
}

static void l_release(taxi_listener_t *l) {
  taxi__free(l->d.p.kept);
  l->ops->released(l);
}

/* Whether a connection just accepted waits in `kept`: paused, or older
 * ones are waiting or being handed over (order).  Lock held. */
static bool l_keeps_locked(const taxi_listener_t *l) {
  return l->held || l->d.p.nkept > 0 || l->d.p.handing;
}

/* Accept again, unless closed, held by the application, pausing after a
 * failure, or with kept connections to hand over first.  0, or the
 * error of starting the accept. */
static int l_accept_locked(taxi_listener_t *l) {
  if (l->closing || l->d.p.accepting || l->d.p.backing_off || l_keeps_locked(l))
    return 0;
  int rc = taxi_proactor_accept(l->d.p.px, &l->d.p.aop, l->fd,
                                TAXI_ACCEPT_MULTISHOT, l_accepted, l);
  if (rc == 0) {
    l->d.p.inflight++;
    l->d.p.accepting = true;
  }
  return rc;
}

/* Hand the kept connections to the callback, oldest first, one at a
 * time (the lock is let go around each), until none is left or the
 * listener is paused or closed again.  Lock held. */
static void l_hand_kept_locked(taxi_listener_t *l) {
  l->d.p.handing = true;
  while (l->d.p.nkept > 0 && !l->held && !l->closing) {
    struct taxi__kept_conn k = l->d.p.kept[0];
    l->d.p.nkept--;
    memmove(l->d.p.kept, l->d.p.kept + 1, l->d.p.nkept * sizeof k);
    taxi__mutex_unlock(&l->lock);
    l->ops->accepted(l, k.fd, &k.peer, l->d.p.px);
    taxi__mutex_lock(&l->lock);
  }
  l->d.p.handing = false;
}

/* Start bop at no delay, to hand kept connections over in a dispatching
 * thread.  Lock held. */
static int l_hand_later_locked(taxi_listener_t *l) {
  int rc = taxi_proactor_timer(l->d.p.px, &l->d.p.bop, 0, l_backoff_done, l);
  if (rc == 0) {
    l->d.p.inflight++;
    l->d.p.backing_off = true;
  }
  return rc;
}

static void l_backoff_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_listener_t *l = act;
  (void)op;
  (void)status;
  (void)bytes;
  taxi__mutex_lock(&l->lock);
  l->d.p.backing_off = false;
  if (!l->d.p.handing) l_hand_kept_locked(l);
  /* An accept fails to start only when the proactor is being destroyed
   * (or out of memory): then accepting ends with it. */
  (void)l_accept_locked(l);
  /* Counted until the kept connections have been handed over: an accept
   * callback that closes the listener must not release it under the
   * hand-over (which takes the lock again after each callback). */
  l->d.p.inflight--;
  bool last = l_last_locked(l);
  taxi__mutex_unlock(&l->lock);
  if (last) l_release(l);
}

static void l_accepted(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_listener_t *l = act;
  (void)bytes;
  bool more = op->more;
  if (status == 0) {
    taxi_addr_t peer;
    bool kept = false, dropped = false;
    taxi__sockaddr_set(&peer, op->peer, op->peer_len);
    l->ops->recovered(l);
    taxi__mutex_lock(&l->lock);
    if (!l->closing && l_keeps_locked(l)) {
      if (l->d.p.kept && l->d.p.nkept < KEPT_MAX) {
        l->d.p.kept[l->d.p.nkept].fd = op->accepted;
        l->d.p.kept[l->d.p.nkept].peer = peer;
        l->d.p.nkept++;
        kept = true;
      } else {
        dropped = true; /* cannot happen within KEPT_MAX: defensive */
      }
    }
    taxi__mutex_unlock(&l->lock);
    if (dropped) {
      taxi_proactor_close(l->d.p.px, op->accepted);
      TAXI__IO_COUNT(l->io, accept_errors, 1);
    } else if (!kept) {
      l->ops->accepted(l, op->accepted, &peer, l->d.p.px);
    }
  }
  if (more) return; /* the multishot accept goes on: l stays */
  bool failed = status < 0 && status != TAXI_ECANCELED;
  taxi_time_t pause = failed ? l->ops->failed(l, status) : 0;
  taxi__mutex_lock(&l->lock);
  l->d.p.inflight--;
  l->d.p.accepting = false;
  if (!failed) {
    /* The accept ended after a connection, or was cancelled by a pause
     * that may have been lifted since: go on unless closed or held. */
    if (!l->held && l->d.p.nkept > 0 && !l->d.p.handing &&
        !l->d.p.backing_off && !l->closing)
      (void)l_hand_later_locked(l);
    else
      (void)l_accept_locked(l);
  } else if (!l->closing && taxi_proactor_timer(l->d.p.px, &l->d.p.bop, pause,
                                                l_backoff_done, l) == 0) {
    /* Out of descriptors, most likely: pause, then accept again. */
    l->d.p.inflight++;
    l->d.p.backing_off = true;
  }
  bool last = l_last_locked(l);
  taxi__mutex_unlock(&l->lock);
  if (last) l_release(l);
}

/* A sharded listener has a member per proactor of the group: each
 * accepts on its own ring, and its connections stay there. */
static unsigned l_members(taxi_io_t *io) {
  return io->group ? taxi_proactor_group_count(io->group) : 1;
}

static int l_open(taxi_listener_t *l, unsigned index) {
  taxi_op_init(&l->d.p.aop);
  taxi_op_init(&l->d.p.bop);
  taxi_op_init(&l->d.p.pop);
  l->d.p.px = l->io->group && index > 0
                  ? taxi_proactor_group_at(l->io->group, index)
                  : l->io->proactor;
  if (!l->d.p.px) return TAXI_EINVAL;
  int rc = taxi_proactor_attach(l->d.p.px, l->fd);
  if (rc < 0) return rc;
  l->d.p.attached = true;
  /* A member of a sharded listener starts held: its accept starts when
   * the listener is complete (taxi_listener_create lets it go). */
  if (l->held) return 0;
  rc = taxi_proactor_accept(l->d.p.px, &l->d.p.aop, l->fd,
                            TAXI_ACCEPT_MULTISHOT, l_accepted, l);
  if (rc < 0) {
    taxi_proactor_detach(l->d.p.px, l->fd);
    return rc;
  }
  l->d.p.inflight = 1;
  l->d.p.accepting = true;
  return 0;
}

static void l_close_req(taxi_listener_t *l) {
  taxi__mutex_lock(&l->lock);
  /* Both complete what is pending on the socket with TAXI_ECANCELED; a
   * kept socket is given back open once no operation names it. */
  if (l->keep_socket)
    taxi_proactor_detach(l->d.p.px, l->fd);
  else
    taxi_proactor_close(l->d.p.px, l->fd);
  if (l->d.p.backing_off) taxi_proactor_cancel(l->d.p.px, &l->d.p.bop);
  /* Kept connections were never handed over: closed, as the system's
   * accepted ones not yet handed over are. */
  for (unsigned i = 0; i < l->d.p.nkept; i++)
    taxi_proactor_close(l->d.p.px, l->d.p.kept[i].fd);
  l->d.p.nkept = 0;
  bool last = l_last_locked(l);
  taxi__mutex_unlock(&l->lock);
  if (last) l_release(l);
}

/* Held: the accept is cancelled (what it takes meanwhile is kept); let
 * go: hand the kept connections over, or accept again, unless a
 * failure's pause is running (it does both when over) or the cancelled
 * accept has not completed yet (its completion does). */
static int l_hold(taxi_listener_t *l, bool hold) {
  int rc = 0;
  taxi__mutex_lock(&l->lock);
  if (hold && !l->held && !l->closing) {
    if (!l->d.p.kept &&
        !(l->d.p.kept = taxi__calloc(KEPT_MAX, sizeof *l->d.p.kept))) {
      taxi__mutex_unlock(&l->lock);
      return TAXI_ENOMEM;
    }
    l->held = true;
    if (l->d.p.accepting) (void)taxi_proactor_cancel(l->d.p.px, &l->d.p.aop);
  } else if (!hold && l->held) {
    l->held = false;
    if (l->closing || l->d.p.backing_off || l->d.p.handing)
      rc = 0;
    else if (l->d.p.nkept > 0)
      rc = l_hand_later_locked(l);
    else
      rc = l_accept_locked(l);
    if (rc < 0) l->held = true;
  }
  taxi__mutex_unlock(&l->lock);
  return rc;
}

/* The posts run in the completion of `pop`, which counts in inflight
 * until they have: the release waits for it.  A closed listener leaves
 * them to the release (TAXI_ECANCELED). */
static void l_post_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_listener_t *l = act;
  (void)op;
  (void)status;
  (void)bytes;
  l->ops->run_posts(l);
  taxi__mutex_lock(&l->lock);
  l->d.p.inflight--;
  bool last = l_last_locked(l);
  taxi__mutex_unlock(&l->lock);
  if (last) l_release(l);
}

static int l_post(taxi_listener_t *l) {
  int rc = taxi_proactor_post(l->d.p.px, &l->d.p.pop, l_post_done, l);
  if (rc == 0) l->d.p.inflight++;
  return rc;
}

/* ---- application timers ---------------------------------------------------
 */

static void t_done(taxi_op_t *op, int status, size_t bytes, void *act);

/* Start the operation for the deadline in t.  Lock held. */
static void t_go_locked(taxi_io_timer_t *t) {
  taxi_time_t delay = t->d.p.deadline - taxi_now();
  if (delay < 0) delay = 0;
  if (taxi_proactor_timer(t->io->proactor, &t->d.p.op, delay, t_done, t) == 0)
    t->d.p.busy = true;
  else
    t->d.p.armed = false;
}

static void t_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_io_timer_t *t = act;
  (void)op;
  (void)bytes;
  taxi__mutex_lock(&t->lock);
  t->d.p.busy = false;
  bool fire = status == 0 && t->d.p.armed && !t->d.p.restart && !t->destroying;
  if (fire) {
    if (t->d.p.period > 0) {
      /* Keep the cadence; skip periods missed while late. */
      taxi_time_t now = taxi_now(), next = t->d.p.deadline + t->d.p.period;
      if (next <= now)
        next += ((now - next) / t->d.p.period + 1) * t->d.p.period;
      t->d.p.deadline = next;
    } else {
      t->d.p.armed = false;
    }
    t->d.p.running = true;
    taxi__mutex_unlock(&t->lock);
    t->ops->fire(t);
    taxi__mutex_lock(&t->lock);
    t->d.p.running = false;
  }
  t->d.p.restart = false;
  if (t->d.p.armed && !t->destroying) t_go_locked(t);
  bool gone = t->destroying && !t->d.p.busy;
  taxi__mutex_unlock(&t->lock);
  if (gone) t->ops->free(t);
}

static int t_start(taxi_io_timer_t *t, taxi_time_t delay, taxi_time_t period) {
  taxi__mutex_lock(&t->lock);
  t->d.p.deadline = taxi_now() + delay;
  t->d.p.period = period;
  t->d.p.armed = true;
  if (t->d.p.busy) {
    t->d.p.restart = true; /* its completion starts it again */
    taxi_proactor_cancel(t->io->proactor, &t->d.p.op);
  } else if (!t->d.p.running) {
    t_go_locked(t); /* else t_done starts it after the callback */
  }
  int rc = t->d.p.armed ? 0 : TAXI_ENOMEM;
  taxi__mutex_unlock(&t->lock);
  return rc;
}

static int t_stop(taxi_io_timer_t *t) {
  taxi__mutex_lock(&t->lock);
  int rc = t->d.p.armed ? 0 : TAXI_ENOENT;
  t->d.p.armed = false;
  if (t->d.p.busy) taxi_proactor_cancel(t->io->proactor, &t->d.p.op);
  taxi__mutex_unlock(&t->lock);
  return rc;
}

static void t_destroy(taxi_io_timer_t *t) {
  taxi__mutex_lock(&t->lock);
  t->d.p.armed = false;
  bool busy = t->d.p.busy, running = t->d.p.running;
  if (busy) taxi_proactor_cancel(t->io->proactor, &t->d.p.op);
  taxi__mutex_unlock(&t->lock);
  /* In flight or running: t_done frees it once the operation is over. */
  if (!busy && !running) t->ops->free(t);
}

const taxi__io_driver_t taxi__io_proactive = {
    .open = ctx_open,
    .close = ctx_close,
    .dispatch = ctx_dispatch,
    .add_signal = ctx_add_signal,
    .remove_signal = ctx_remove_signal,
    .stream_open = s_open,
    .read = s_read,
    .write = s_write,
    .sendfile = s_sendfile,
    .connect_start = s_connect_start,
    .adopt = s_adopt,
    .connect_result = s_connect_result,
    .update = s_update,
    .defer = s_defer,
    .kick = s_kick,
    .arm = s_arm,
    .teardown = s_teardown,
    .unread = s_unread,
    .read_settle = s_read_settle,
    .read_forget = s_read_forget,
    .written = s_written,
    .max_bufs = TAXI_OP_MAX_BUFS,
    .stream_size = TAXI__STREAM_SIZE(p),
    .listener_members = l_members,
    .listener_open = l_open,
    .listener_close = l_close_req,
    .listener_hold = l_hold,
    .listener_post = l_post,
    .timer_start = t_start,
    .timer_stop = t_stop,
    .timer_destroy = t_destroy,
    .dgram = &taxi__dgram_proactive,
};
