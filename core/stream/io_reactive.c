/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_reactive.c - the stream layer's driver over a reactor, whoever
 * dispatches it (one thread, a Leader/Followers or a half-sync/half-async
 * pool): readiness events become stream events, and the stream's
 * transfers are non-blocking socket calls made when it is ready.
 *
 * Each stream is one event handler with two timers: `kick` (delay 0) gets
 * work done in a dispatching thread when another thread asked for it, and
 * `deadline` serves the timeouts.  The handle is registered once the
 * stream first wants an event; no interest at all is a suspended handle
 * (a registration cannot be empty).  Level-triggered: a handle readable
 * again after one receive is reported again, which keeps one busy stream
 * from starving the others.
 *
 * The bottom of the wing with io_proactive.c: calls the reactor, and
 * nothing of the wing by name; what it sees goes up through the ops
 * records of the context, stream, listener or timer (core/stream/io_impl.h).
 *
 * Under a Leader/Followers pool on a backend with edge triggering
 * (taxi__reactor_drains_edge) every handle here but a TLS stream's (see
 * stream_edge) is armed once, edge-triggered, and never re-armed after an
 * event: the reactor gives a
 * report that comes while a hook runs to the thread running it.  The
 * hooks must then drain: a stream reads until a receive says the socket
 * is empty (EAGAIN, or a short receive when no hang-up was reported),
 * yielding with its kick timer after READ_BURST full receives so that one
 * busy stream does not keep its thread from the others; a listener that
 * stops after its batch goes on from a timer due at once; the wake-up
 * channel is read empty.
 *
 * A receive lands in a buffer the dispatching thread lends
 * (taxi__batch_scratch) rather than in the stream's own, and what the read
 * callback leaves unconsumed is copied into the stream's buffer afterwards
 * (s_read_settle). With many connections the streams' own buffers are cold: the
 * kernel's copy into one cost a cache miss per message, which the one buffer
 * every receive of the thread reuses does not.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/batch_clock.h"
#include "core/stream/dgram_impl.h"
#include "core/reactor/reactor_closing.h"

#include <string.h>

#define STREAM_OF(hp) TAXI_CONTAINER_OF(hp, taxi_stream_t, d.r.h)

/* ---- the context ----------------------------------------------------------
 */

static int wake_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)fd;
  (void)ev;
  taxi_io_t *io = TAXI_CONTAINER_OF(h, taxi_io_t, wake_h);
  io->ops->woken(io);
  return 0;
}

static int sig_hook(taxi_handler_t *h, int signo) {
  taxi_io_t *io = TAXI_CONTAINER_OF(h, taxi_io_t, sig_h);
  io->ops->signal(io, signo);
  return 0;
}

static const taxi_handler_ops_t wake_ops = {.input = wake_input};
static const taxi_handler_ops_t sig_ops = {.signal = sig_hook};

static int ctx_open(taxi_io_t *io) {
  taxi_handler_init(&io->wake_h, &wake_ops);
  taxi_handler_init(&io->sig_h, &sig_ops);
  /* taxi__io_woken reads the channel empty. */
  return taxi__reactor_register_drains(io->reactor, io->wake[0], &io->wake_h,
                                       TAXI_EV_READ, false);
}

static void ctx_close(taxi_io_t *io) {
  taxi_reactor_remove(io->reactor, &io->wake_h);
  /* Its signals are gone, but the handler stays attached until removed:
   * a reactor the application supplied outlives the context (ENOENT when
   * no signal was ever asked for). */
  (void)taxi_reactor_remove(io->reactor, &io->sig_h);
  taxi__close(io->wake[0]);
}

static int ctx_dispatch(taxi_io_t *io, int timeout_ms) {
  return taxi_reactor_handle_events(io->reactor, timeout_ms);
}

static int ctx_add_signal(taxi_io_t *io, int signo) {
  return taxi_reactor_add_signal(io->reactor, signo, &io->sig_h);
}

static int ctx_remove_signal(taxi_io_t *io, int signo) {
  return taxi_reactor_remove_signal(io->reactor, signo);
}

/* ---- streams --------------------------------------------------------------
 */

/* The reactor runs one hook of a handler at a time, whoever dispatches
 * it; the stream counts any breach of that (hook_overlaps), for the tests
 * to assert none. */
static void hook_enter(taxi_stream_t *s) {
  if (atomic_exchange_explicit(&s->d.r.in_hook, 1u, memory_order_acquire))
    atomic_fetch_add_explicit(&s->cnt.hook_overlaps, 1, memory_order_relaxed);
}

static void hook_leave(taxi_stream_t *s) {
  atomic_store_explicit(&s->d.r.in_hook, 0u, memory_order_release);
}

static int s_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  taxi_stream_t *s = STREAM_OF(h);
  (void)fd;
  hook_enter(s);
  s->ops->event(s, TAXI__P_READABLE |
                       ((ev & (TAXI_EV_HUP | TAXI_EV_ERR)) ? TAXI__P_HUP : 0u));
  hook_leave(s);
  return 0;
}

static int s_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  taxi_stream_t *s = STREAM_OF(h);
  (void)fd;
  (void)ev;
  hook_enter(s);
  s->ops->event(s, TAXI__P_WRITABLE);
  hook_leave(s);
  return 0;
}

static int s_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  taxi_stream_t *s = STREAM_OF(h);
  (void)act;
  hook_enter(s);
  s->ops->event(s, t == &s->d.r.kick ? TAXI__P_KICK : TAXI__P_DEADLINE);
  hook_leave(s);
  return 0;
}

/* After the last hook: no event of s can come any more. */
static void s_close(taxi_handler_t *h, taxi_handle_t fd) {
  taxi_stream_t *s = STREAM_OF(h);
  (void)fd;
  if (!s->keep_handle) taxi__close(s->fd); /* else detached: the caller's */
  s->ops->event(s, TAXI__P_RELEASED);
}

static const taxi_handler_ops_t stream_ops = {.input = s_input,
                                              .output = s_output,
                                              .timeout = s_timeout,
                                              .close = s_close};

static int s_open(taxi_stream_t *s, taxi_proactor_t *home, bool stay) {
  (void)home;
  (void)stay;
  taxi_handler_init(&s->d.r.h, &stream_ops);
  taxi_timer_init(&s->d.r.kick);
  taxi_timer_init(&s->d.r.deadline);
  return 0;
}

/* Full receives one round makes on an edge-triggered handle before it
 * yields to the other handlers (with its kick: no system call). */
#define READ_BURST 16

/* Whether s's handle is armed edge-triggered: under a pool that asked for
 * it, every stream but a TLS one.  A TLS stream stays one-shot: its engine
 * holds records between the socket and the reader, which a missed edge
 * would strand, and a handshake is not a hot path. */
static bool stream_edge(const taxi_stream_t *s) {
  return !s->tls && taxi__reactor_drains_edge(s->io->reactor);
}

/* One receive of s: into the buffer the dispatching thread lends
 * (taxi__batch_scratch, taken until s_read_settle gives it back), else
 * into s's own.  A read callback that dispatches in turn (an await in a
 * pool) finds the thread's buffer taken, and the streams it reads read
 * into their own.  Not for a TLS stream: its engine takes the ciphertext
 * from s->rbuf at once, and lends plaintext of its own
 * (core/stream/stream_tls.c). */
static int64_t receive(taxi_stream_t *s) {
  /* Lent to s by its previous receive of this round: a read is made only
   * once s->rlen is 0, so the bytes there were delivered. */
  unsigned char *into = s->rdata != s->rbuf ? s->rdata : taxi__batch_scratch;
  if (!into || s->tls || s->rcap > TAXI__SCRATCH_BYTES)
    return taxi__sock_recv(s->fd, s->rbuf, s->rcap);
  int64_t n = taxi__sock_recv(s->fd, into, s->rcap);
  if (n > 0 && s->rdata == s->rbuf) {
    s->rdata = into;
    taxi__batch_scratch = NULL;
  }
  return n;
}

/* The stream's round has delivered what it could: bytes left at the
 * thread's buffer move into s's own (the read callback may leave some, in
 * taxi_stream_read_into or a pipe that paused), and the buffer goes back
 * to the thread for the next receive. */
static void s_read_settle(taxi_stream_t *s, bool reading) {
  (void)reading;
  if (s->tls || s->rdata == s->rbuf) return;
  if (s->rlen > 0) memcpy(s->rbuf, s->rdata + s->rpos, s->rlen);
  taxi__batch_scratch = s->rdata;
  s->rpos = 0;
  s->rdata = s->rbuf;
}

static int64_t s_read(taxi_stream_t *s) {
  if (!s->d.r.readable) return TAXI_EAGAIN;
  int64_t n;
  if (!stream_edge(s)) {
    /* One receive per report: if more is waiting, the handle is reported
     * again after the others had their turn. */
    s->d.r.readable = false;
    n = receive(s);
  } else {
    /* No report comes until the socket has been drained: readable stays
     * set until a receive shows it empty.  A short receive does (the
     * kernel hands over all it has, and what arrives later is a new
     * edge), unless a hang-up or error came with the report: the end of
     * the stream, already signalled, must still be read. */
    if (s->d.r.burst >= READ_BURST) {
      s->d.r.burst = 0;
      taxi__stream_request_locked(s); /* the kick resumes the reading */
      return TAXI_EAGAIN;
    }
    n = receive(s);
    if (n == TAXI_EAGAIN || n <= 0 || ((size_t)n < s->rcap && !s->d.r.hup)) {
      s->d.r.readable = false;
      s->d.r.burst = 0;
    } else {
      s->d.r.burst++;
    }
  }
  /* The end of the stream, or a reset whose error the reactor kept from
   * the event (taxi_reactor_pending_error) because the socket lost it. */
  int err = 0;
  if (n == 0 && s->d.r.registered &&
      taxi_reactor_pending_error(s->io->reactor, &s->d.r.h, &err) == 0 && err)
    return err;
  return n;
}

static int64_t s_write(taxi_stream_t *s, const taxi_buf_t *bufs, size_t n) {
  if (s->d.r.wblocked) return TAXI_EAGAIN;
  int64_t rc = taxi__sock_sendv(s->fd, bufs, n);
  if (rc == TAXI_EAGAIN) s->d.r.wblocked = true;
  return rc;
}

static int64_t s_sendfile(taxi_stream_t *s, taxi_handle_t file, int64_t off,
                          size_t len) {
  if (s->d.r.wblocked) return TAXI_EAGAIN;
  int64_t rc = taxi__sock_sendfile(s->fd, file, off, len);
  if (rc == TAXI_EAGAIN) s->d.r.wblocked = true;
  return rc;
}

static int s_connect_start(taxi_stream_t *s, const taxi_addr_t *a) {
  int rc = taxi__sock_connect(s->fd, a);
  if (rc == 0) s->d.r.writable = true; /* connected at once */
  return rc;
}

static int s_connect_result(taxi_stream_t *s) {
  if (s->conn_err) return s->conn_err;
  if (!s->d.r.writable) return TAXI_EAGAIN;
  s->d.r.writable = false;
  /* The error as the reactor reported it, else the socket's. */
  int err = 0;
  if (taxi_reactor_pending_error(s->io->reactor, &s->d.r.h, &err) == 0 && err)
    return err;
  return taxi__sock_connect_result(s->fd);
}

/* Edge-triggered, a handle newly watched for `gained` may have become
 * ready while it was not watched, and that edge was dropped: the next
 * round tries the receive or send (one system call that may find nothing,
 * at a change of interest only) rather than wait for an edge that will not
 * come.  A connect's readiness is not assumed: its result is asked of the
 * socket only once it reports. */
static void assume_ready_locked(taxi_stream_t *s, unsigned gained) {
  bool any = false;
  if ((gained & TAXI_EV_READ) && !s->d.r.readable) {
    s->d.r.readable = true;
    any = true;
  }
  if ((gained & TAXI_EV_WRITE) && !(s->flags & TAXI__S_CONNECTING) &&
      s->d.r.wblocked) {
    s->d.r.wblocked = false;
    any = true;
  }
  if (any) taxi__stream_request_locked(s);
}

static void s_update(taxi_stream_t *s) {
  taxi_reactor_t *r = s->io->reactor;
  unsigned want = 0;
  if (s->flags & TAXI__S_CONNECTING) {
    if (!s->conn_err) want = TAXI_EV_WRITE;
  } else {
    bool reading =
        (s->flags & TAXI__S_READ_INTO) ||
        (s->flags & (TAXI__S_READING | TAXI__S_PAUSED | TAXI__S_EOF_TOLD)) ==
            TAXI__S_READING;
    if ((reading && s->rlen == 0 && !(s->flags & TAXI__S_EOF)) ||
        (s->flags & TAXI__S_TLS_IN))
      want |= TAXI_EV_READ;
    if ((s->rcount > 0 || (s->flags & TAXI__S_TLS_OUT)) && s->d.r.wblocked)
      want |= TAXI_EV_WRITE;
  }
  int rc = 0;
  if (!s->d.r.registered) {
    if (!want) return;
    if (s->tls)
      rc = s->own_fd ? taxi__reactor_register_open(r, s->fd, &s->d.r.h, want)
                     : taxi__reactor_register_own(r, s->fd, &s->d.r.h, want);
    else
      rc = taxi__reactor_register_drains(r, s->fd, &s->d.r.h, want, s->own_fd);
    if (rc == 0) {
      s->d.r.registered = s->d.r.attached = true;
      s->d.r.interest = want;
      s->d.r.suspended = false;
    }
  } else if (want) {
    /* What the handle is watched for anew: an edge-triggered report of it
     * that came while it was not (dropped as of no interest) comes no
     * more. */
    unsigned gained = s->d.r.suspended ? want : want & ~s->d.r.interest;
    if (want != s->d.r.interest) {
      rc = taxi_reactor_modify(r, &s->d.r.h, want);
      if (rc == 0) s->d.r.interest = want;
    }
    if (rc == 0 && s->d.r.suspended) {
      rc = taxi_reactor_resume(r, &s->d.r.h);
      if (rc == 0) s->d.r.suspended = false;
    }
    if (rc == 0 && gained && stream_edge(s)) assume_ready_locked(s, gained);
  } else if (!s->d.r.suspended) {
    rc = taxi_reactor_suspend(r, &s->d.r.h);
    if (rc == 0) s->d.r.suspended = true;
  }
  if (rc < 0) {
    /* The reactor cannot watch the handle (beyond select's FD_SETSIZE,
     * out of memory): the stream cannot go on. */
    s->reason = rc;
    s->flags |= TAXI__S_CLOSE_REQ;
    s->pending |= TAXI__P_WORK;
  }
}

static void s_defer(taxi_stream_t *s) {
  /* Edge-triggered, the handle is reported again only by a new edge: the
   * bits the processing thread will see are all it takes. */
  if (stream_edge(s)) return;
  if (s->d.r.registered && !s->d.r.suspended &&
      taxi_reactor_suspend(s->io->reactor, &s->d.r.h) == 0)
    s->d.r.suspended = true;
}

static int s_kick(taxi_stream_t *s) {
  int rc = taxi_reactor_schedule(s->io->reactor, &s->d.r.kick, &s->d.r.h, 0, 0,
                                 NULL);
  if (rc == 0) s->d.r.attached = true;
  return rc;
}

static void s_arm(taxi_stream_t *s, taxi_time_t deadline) {
  taxi_time_t delay = deadline - taxi_now();
  if (delay < 0) delay = 0;
  if (taxi_reactor_schedule(s->io->reactor, &s->d.r.deadline, &s->d.r.h, delay,
                            0, NULL) == 0)
    s->d.r.attached = true;
  else
    s->armed = 0; /* tried again at the next round */
}

static void s_teardown(taxi_stream_t *s) {
  /* Called by the thread processing s: it alone reads these. */
  if (!s->d.r.attached) {
    if (!s->keep_handle) taxi__close(s->fd);
    s->ops->event(s, TAXI__P_RELEASED);
    return;
  }
  /* The close hook (s_close) follows, here or after the hooks of s
   * running in other threads.  Closing a socket nothing else shares
   * deregisters it too, which the reactor may count on. */
  if (s->close_ends_socket)
    taxi__reactor_remove_closing(s->io->reactor, &s->d.r.h);
  else
    taxi_reactor_remove(s->io->reactor, &s->d.r.h);
}

/* ---- listeners ------------------------------------------------------------
 */

#define LISTENER_OF(hp) TAXI_CONTAINER_OF(hp, taxi_listener_t, d.r.h)

/* Connections taken per readiness report: a bound, so that a flood of
 * connections does not keep the thread from the streams it serves.  What
 * is left in the backlog comes back at the next turn because the listener
 * is registered level-triggered, as everything in the Reactor is (an
 * edge-triggered registration would not report it again: the loop below
 * would have to post itself a zero-delay timer before returning). */
#define ACCEPT_BATCH 64

static int l_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  taxi_listener_t *l = LISTENER_OF(h);
  (void)fd;
  (void)ev;
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    taxi_handle_t conn;
    taxi_addr_t peer;
    /* Paused (taxi_listener_pause) by the callback or another thread
     * since the report: the rest stays queued, the handle suspended.  The
     * accept is made under the lock, so that a pause returns only once
     * no accept that began before it can still take a connection. */
    taxi__mutex_lock(&l->lock);
    bool held = l->held;
    int rc = held ? 0 : taxi__sock_accept(l->fd, &conn, &peer);
    taxi__mutex_unlock(&l->lock);
    if (held) return 0;
    if (rc == TAXI_EAGAIN) return 0;
    if (rc < 0) {
      /* Out of descriptors (or memory): the connection stays queued and
       * the listener readable, so pause instead of spinning. */
      taxi_time_t pause = l->ops->failed(l, rc);
      taxi__mutex_lock(&l->lock);
      if (taxi_reactor_suspend(l->io->reactor, h) == 0 &&
          taxi_reactor_schedule(l->io->reactor, &l->d.r.timer, h, pause, 0,
                                NULL) == 0)
        l->d.r.paused = true;
      else if (!l->held)
        taxi_reactor_resume(l->io->reactor, h);
      taxi__mutex_unlock(&l->lock);
      return 0;
    }
    if (i == 0) l->ops->recovered(l);
    l->ops->accepted(l, conn, &peer, NULL);
  }
  /* The batch is over and connections may still wait.  Edge-triggered,
   * none would be reported again: the next batch runs from a timer due at
   * once, after the handlers already ready had their turn.  (Re-arming
   * the handle to have it reported afresh is no answer: kqueue's EV_ADD
   * of a knote armed already need not look at the socket again.)  If the
   * timer cannot be had (out of memory), the next connection's report
   * resumes the accepting. */
  if (taxi__reactor_drains_edge(l->io->reactor))
    (void)taxi_reactor_schedule(l->io->reactor, &l->d.r.more, h, 0, 0, NULL);
  return 0;
}

static int l_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  taxi_listener_t *l = LISTENER_OF(h);
  (void)act;
  if (t == &l->d.r.post) {
    l->ops->run_posts(l);
    return 0;
  }
  if (t == &l->d.r.more) return l_input(h, l->fd, TAXI_EV_READ);
  taxi__mutex_lock(&l->lock);
  l->d.r.paused = false;
  bool held = l->held;
  if (!held) taxi_reactor_resume(l->io->reactor, h);
  taxi__mutex_unlock(&l->lock);
  /* Edge-triggered, the connections that waited through the pause may
   * bring no new report: try them now. */
  if (!held && taxi__reactor_drains_edge(l->io->reactor))
    return l_input(h, l->fd, TAXI_EV_READ);
  return 0;
}

static void l_close(taxi_handler_t *h, taxi_handle_t fd) {
  taxi_listener_t *l = LISTENER_OF(h);
  (void)fd;
  if (!l->keep_socket) taxi__close(l->fd);
  l->ops->released(l);
}

static const taxi_handler_ops_t listener_ops = {
    .input = l_input, .timeout = l_timeout, .close = l_close};

/* One reactor: a listener has one socket, sharded or not. */
static unsigned l_members(taxi_io_t *io) {
  (void)io;
  return 1;
}

static int l_open(taxi_listener_t *l, unsigned index) {
  (void)index;
  taxi_handler_init(&l->d.r.h, &listener_ops);
  taxi_timer_init(&l->d.r.timer);
  taxi_timer_init(&l->d.r.post);
  taxi_timer_init(&l->d.r.more);
  /* l_input accepts until EAGAIN, or goes on from a timer. */
  return taxi__reactor_register_drains(l->io->reactor, l->fd, &l->d.r.h,
                                       TAXI_EV_READ, false);
}

static void l_close_req(taxi_listener_t *l) {
  taxi_reactor_remove(l->io->reactor, &l->d.r.h);
}

/* The handle is watched while neither the application (held) nor a
 * failed accept (paused, until its timer) stops it; both flags change
 * under the lock, with the suspension they call for. */
static int l_hold(taxi_listener_t *l, bool hold) {
  int rc = 0;
  taxi__mutex_lock(&l->lock);
  if (l->held != hold && !l->closing && !l->d.r.paused) {
    rc = hold ? taxi_reactor_suspend(l->io->reactor, &l->d.r.h)
              : taxi_reactor_resume(l->io->reactor, &l->d.r.h);
  }
  if (rc == 0) l->held = hold;
  taxi__mutex_unlock(&l->lock);
  return rc;
}

/* The posts run in a timer hook of the listener's handler: removing the
 * handler cancels it, and the close hook waits for one that runs. */
static int l_post(taxi_listener_t *l) {
  return taxi_reactor_schedule(l->io->reactor, &l->d.r.post, &l->d.r.h, 0, 0,
                               NULL);
}

/* ---- application timers ---------------------------------------------------
 */

#define TIMER_OF(hp) TAXI_CONTAINER_OF(hp, taxi_io_timer_t, d.r.h)

static int t_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  (void)t;
  (void)act;
  taxi_io_timer_t *it = TIMER_OF(h);
  it->ops->fire(it);
  return 0;
}

static void t_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  taxi_io_timer_t *it = TIMER_OF(h);
  it->ops->free(it);
}

static const taxi_handler_ops_t timer_ops = {.timeout = t_timeout,
                                             .close = t_close};

static int t_start(taxi_io_timer_t *t, taxi_time_t delay, taxi_time_t period) {
  taxi__mutex_lock(&t->lock);
  if (!t->d.r.attached) {
    taxi_handler_init(&t->d.r.h, &timer_ops);
    taxi_timer_init(&t->d.r.t);
  }
  int rc = taxi_reactor_schedule(t->io->reactor, &t->d.r.t, &t->d.r.h, delay,
                                 period, NULL);
  if (rc == 0) t->d.r.attached = true;
  taxi__mutex_unlock(&t->lock);
  return rc;
}

static int t_stop(taxi_io_timer_t *t) {
  taxi__mutex_lock(&t->lock);
  int rc = t->d.r.attached ? taxi_reactor_cancel(t->io->reactor, &t->d.r.t)
                           : TAXI_ENOENT;
  taxi__mutex_unlock(&t->lock);
  return rc;
}

static void t_destroy(taxi_io_timer_t *t) {
  taxi__mutex_lock(&t->lock);
  bool attached = t->d.r.attached;
  taxi__mutex_unlock(&t->lock);
  /* Removal cancels the timer; the close hook frees it after a callback
   * running in another thread has returned. */
  if (!attached || taxi_reactor_remove(t->io->reactor, &t->d.r.h) < 0)
    t->ops->free(t);
}

/* ---- datagram endpoints ---------------------------------------------------
 *
 * One handler per endpoint, watching for readability from the start and
 * for writability while its send queue holds datagrams.  The endpoint
 * serialises what its hooks do itself (core/stream/dgram_impl.h).
 */

#define DGRAM_OF(hp) TAXI_CONTAINER_OF(hp, taxi_dgram_t, d.r.h)

static int d_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)fd;
  taxi_dgram_t *d = DGRAM_OF(h);
  d->d.r.event_err = (ev & (TAXI_EV_ERR | TAXI_EV_HUP)) != 0;
  d->ops->readable(d);
  return 0;
}

static int d_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)fd;
  (void)ev;
  taxi_dgram_t *d = DGRAM_OF(h);
  d->ops->writable(d);
  return 0;
}

static int d_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  (void)t;
  (void)act;
  taxi_dgram_t *d = DGRAM_OF(h);
  d->d.r.event_err = false;
  d->ops->readable(d);
  return 0;
}

/* The endpoint closes its socket when it finishes. */
static void d_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  taxi_dgram_t *d = DGRAM_OF(h);
  d->ops->released(d);
}

static const taxi_handler_ops_t dgram_hooks = {.input = d_input,
                                               .output = d_output,
                                               .timeout = d_timeout,
                                               .close = d_close};

/* Its hooks receive until the socket is empty, or leave the rest to the
 * timer (d_more), and send until it is full: under a Leader/Followers pool
 * the handle is armed edge-triggered, once, and no follower is woken for
 * its events. */
static int d_open(taxi_dgram_t *d) {
  taxi_handler_init(&d->d.r.h, &dgram_hooks);
  taxi_timer_init(&d->d.r.more);
  return taxi__reactor_register_drains(d->io->reactor, d->fd, &d->d.r.h,
                                       TAXI_EV_READ, true);
}

static int d_want_write(taxi_dgram_t *d, bool on) {
  return taxi_reactor_modify(d->io->reactor, &d->d.r.h,
                             on ? TAXI_EV_READ | TAXI_EV_WRITE : TAXI_EV_READ);
}

static void d_close_req(taxi_dgram_t *d) {
  taxi_reactor_remove(d->io->reactor, &d->d.r.h);
}

/* Asked only after a report of an error: any other report that finds
 * nothing to receive (one that came while another thread drained the
 * socket) costs no system call. */
static int d_kept_error(taxi_dgram_t *d) {
  int err = 0;
  if (!d->d.r.event_err) return 0;
  d->d.r.event_err = false;
  if (taxi_reactor_pending_error(d->io->reactor, &d->d.r.h, &err) < 0) return 0;
  return err;
}

/* If the timer cannot be had (out of memory), the next datagram's report
 * takes up the receiving. */
static void d_more(taxi_dgram_t *d) {
  if (taxi__reactor_drains_edge(d->io->reactor))
    (void)taxi_reactor_schedule(d->io->reactor, &d->d.r.more, &d->d.r.h, 0, 0,
                                NULL);
}

const taxi__dgram_driver_t taxi__dgram_reactive = {.open = d_open,
                                                   .want_write = d_want_write,
                                                   .close = d_close_req,
                                                   .kept_error = d_kept_error,
                                                   .more = d_more};

const taxi__io_driver_t taxi__io_reactive = {
    .open = ctx_open,
    .close = ctx_close,
    .dispatch = ctx_dispatch,
    .add_signal = ctx_add_signal,
    .remove_signal = ctx_remove_signal,
    .stream_open = s_open,
    .read = s_read,
    .read_settle = s_read_settle,
    .write = s_write,
    .sendfile = s_sendfile,
    .connect_start = s_connect_start,
    .adopt = NULL, /* registered at its first round that wants events */
    .connect_result = s_connect_result,
    .update = s_update,
    .defer = s_defer,
    .kick = s_kick,
    .arm = s_arm,
    .teardown = s_teardown,
    .max_bufs = 16,
    .stream_size = TAXI__STREAM_SIZE(r),
    .closes_at_teardown = true,
    .corks_files = true,
    .writes_anywhere = true,
    .listener_members = l_members,
    .listener_open = l_open,
    .listener_close = l_close_req,
    .listener_hold = l_hold,
    .listener_post = l_post,
    .timer_start = t_start,
    .timer_stop = t_stop,
    .timer_destroy = t_destroy,
    .dgram = &taxi__dgram_reactive,
};
