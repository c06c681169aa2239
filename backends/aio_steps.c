/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/aio_steps.c - the steps of the POSIX aio backend's
 * operations: what each kind does when its handle is ready
 * (docs/backends/aio.md, "What runs where"), the readiness interest in the
 * internal Reactor, starting aio requests, the list of requests the
 * system refused for now, and the completion list wait() takes from.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POSIX aio under -std=c11 */
#endif
#include "config.h"

#ifdef TAXI_HAVE_AIO

#include "aio_impl.h"

#include "backends/nbio.h"
#include "core/common/alloc.h"
#include "core/reactor/reactor_closing.h"
#include "taxi/reactor.h"

#include <string.h>
#include <unistd.h>

/* ---- waking wait() ------------------------------------------------------ */

/* Something was listed by a thread other than the one in wait(): make the
 * reactor call it blocks in return.  Coalesced by the wake-up channel. */
void taxi__aio_kick_locked(aio_state_t *s) {
  if (s->waiting && taxi__wakeup_signal(&s->wakeup) > 0) count(s, 1);
}

/* Move op to the completion list.  The caller kicks unless it is the
 * thread in wait() (a reactor hook), which looks at the list next. */
void taxi__aio_push_done_locked(aio_state_t *s, taxi_op_t *op, int64_t result) {
  aio_op_t *ao = room(op);
  ao->state = OP_DONE;
  ao->result = result;
  ao->next = NULL;
  if (s->done_tail)
    room(s->done_tail)->next = op;
  else
    s->done_head = op;
  s->done_tail = op;
}

/* The result of op's step, or the error the internal reactor reported
 * with its handle's event where the step cannot see it (nbio.h). */
int64_t taxi__aio_settle_locked(aio_state_t *s, taxi_op_t *op, int64_t r) {
  aio_op_t *ao = room(op);
  int pending = 0;
  if (ao->ah && ao->ah->registered &&
      taxi__nbio_may_hide_error(op, ao->connecting, r) &&
      taxi_reactor_pending_error(s->reactor, &ao->ah->h, &pending) == 0 &&
      pending)
    return pending;
  return r;
}

static int wake_input(taxi_handler_t *h, taxi_handle_t fd, unsigned events) {
  aio_state_t *s = TAXI_CONTAINER_OF(h, aio_state_t, wake_h);
  (void)fd;
  (void)events;
  taxi__wakeup_drain(&s->wakeup);
  count(s, 1);
  return 0;
}

/* retry_timer: try the refused operations again (see refused_locked);
 * runs in the thread inside wait(), which looks at the completion list
 * next.  The refusals are reported here, once per round, with no lock
 * held. */
static int retry_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  aio_state_t *s = TAXI_CONTAINER_OF(h, aio_state_t, wake_h);
  (void)t;
  (void)act;
  taxi__mutex_lock(&s->lock);
  s->retry_armed = false;
  unsigned refused = s->refused_unreported;
  int code = s->refused_code;
  unsigned attempt = s->refusals.failures;
  s->refused_unreported = 0;
  taxi_op_t *list = s->retry_head;
  s->retry_head = NULL;
  while (list) {
    taxi_op_t *op = list;
    aio_op_t *ao = room(op);
    list = ao->next;
    aio_handle_t *ah = ao->ah;
    if (ao->cancel || !ah || ah->detached) {
      taxi__aio_push_done_locked(s, op, TAXI_ECANCELED);
      continue;
    }
    ao->state = OP_ARMED;
    ao->wants = wants_of(op);
    taxi__aio_advance_locked(s, op);
    int rc = taxi__aio_rearm_locked(s, ah);
    if (rc < 0 && ao->state == OP_ARMED) taxi__aio_push_done_locked(s, op, rc);
  }
  taxi__mutex_unlock(&s->lock);
  if (refused)
    taxi__report_error(s->on_error, s->on_error_arg, code, "aio_read/aio_write",
                       TAXI_INVALID_HANDLE, attempt, false);
  return 0;
}

const taxi_handler_ops_t taxi__aio_wake_ops = {.input = wake_input,
                                               .timeout = retry_timeout};

/* ---- readiness interest ------------------------------------------------- */

static unsigned wanted(aio_handle_t *ah) {
  unsigned ev = 0;
  for (int d = 0; d < 2; d++) {
    taxi_op_t *op = ah->dir[d];
    if (op && room(op)->state == OP_ARMED) ev |= room(op)->wants;
  }
  return ev;
}

/* Make the reactor watch ah for what its armed operations wait for:
 * registered on first need, then suspended while nothing waits (an aio
 * request in flight must not keep a readable socket reported). */
int taxi__aio_rearm_locked(aio_state_t *s, aio_handle_t *ah) {
  unsigned want = wanted(ah);
  int rc = 0;
  if (!ah->registered) {
    if (!want) return 0;
    rc = taxi__reactor_register_own(s->reactor, ah->fd, &ah->h, want);
    if (rc < 0) return rc;
    count(s, 1);
    ah->registered = true;
    ah->suspended = false;
    ah->interest = want;
    return 0;
  }
  if (!want) {
    if (ah->suspended) return 0;
    rc = taxi_reactor_suspend(s->reactor, &ah->h);
    if (rc < 0) return rc;
    count(s, 1);
    ah->suspended = true;
    return 0;
  }
  if (want != ah->interest) {
    rc = taxi_reactor_modify(s->reactor, &ah->h, want);
    if (rc < 0) return rc;
    count(s, 1);
    ah->interest = want;
  }
  if (ah->suspended) {
    rc = taxi_reactor_resume(s->reactor, &ah->h);
    if (rc < 0) return rc;
    count(s, 1);
    ah->suspended = false;
  }
  return 0;
}

/* ---- aio requests ------------------------------------------------------- */

int taxi__aio_reserve_flight_locked(aio_state_t *s, size_t need) {
  if (need <= s->flight_cap) return 0;
  size_t cap = s->flight_cap ? s->flight_cap : 16;
  while (cap < need) cap *= 2;
  struct aiocb **f = taxi__reallocarray(s->flight, cap, sizeof *f);
  if (!f) return TAXI_ENOMEM;
  s->flight = f;
  s->flight_cap = cap;
  return 0;
}

/* A new request must join the reaper's aio_suspend() list (or the reaper
 * must stop).  Without a doorbell it sees it within AIO_POLL_NSEC. */
void taxi__aio_ring_reaper_locked(aio_state_t *s) {
  if (s->reaper_mode == REAPER_IDLE) {
    s->reaper_mode = REAPER_BUSY;
    taxi__cond_signal(&s->cond);
  } else if (s->reaper_mode == REAPER_SUSPENDED && s->bell_armed &&
             !s->bell_rung) {
    static const unsigned char one = 1;
    if (write(s->bell[1], &one, 1) == 1) s->bell_rung = true;
    count(s, 1);
  }
}

/* Start the aio request for op's next step: its first buffer left (the
 * header or trailer of a transmit-file), at the file offset for file
 * operations.  0 (OP_AIO), or the error that kept it from starting. */
int taxi__aio_start_locked(aio_state_t *s, taxi_op_t *op) {
  aio_op_t *ao = room(op);
  taxi_buf_t b;
  if (taxi__op_remaining_bufs(op, &b, 1) != 1) return TAXI_EINVAL;
  int rc = taxi__aio_reserve_flight_locked(s, s->nflight + 1);
  if (rc < 0) return rc;
  struct aiocb *cb = &ao->cb;
  memset(cb, 0, sizeof *cb);
  cb->aio_fildes = op->handle;
  cb->aio_buf = b.base;
  cb->aio_nbytes = b.len;
  if (is_file_op(op->kind)) {
    int64_t off = taxi__op_file_offset(op);
    if ((int64_t)(off_t)off != off) return TAXI_EINVAL;
    cb->aio_offset = (off_t)off;
  }
  cb->aio_sigevent.sigev_notify = SIGEV_NONE;
  bool input = op->kind == TAXI_OP_READ || op->kind == TAXI_OP_READ_FILE;
  int r = input ? aio_read(cb) : aio_write(cb);
  count(s, 1);
  if (r < 0) {
    /* EAGAIN: out of resources (glibc could not queue the request or
     * start a helper thread) - for now. */
    int err = taxi__last_error();
    ao->refused = err == TAXI_EAGAIN || err == TAXI_ENOMEM;
    return err;
  }
  taxi__backoff_reset(&s->refusals);
  ao->state = OP_AIO;
  s->flight[s->nflight++] = cb;
  taxi__aio_ring_reaper_locked(s);
  return 0;
}

/* ---- steps -------------------------------------------------------------- */

/* Perform op's next step now that its handle is ready (or optimistically,
 * from submit).  Returns the step's result or TAXI_EAGAIN (wait for
 * readiness); *started when an aio request was started instead (OP_AIO),
 * whose result the reaper will list. */
static int64_t step_locked(aio_state_t *s, taxi_op_t *op, bool *started) {
  taxi__completion_counters_t *c = s->counters;
  aio_op_t *ao = room(op);
  *started = false;
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      return taxi__nbio_accept(op, c);
    case TAXI_OP_RECVFROM:
      /* An aiocb has no room for the sender's address (nor aio_write for a
       * destination): a datagram moves in a non-blocking step when the
       * internal reactor reports the socket ready, as on the emulated
       * Proactor (docs/backends/aio.md, "Datagrams"). */
      return taxi__nbio_recvfrom(op, c);
    case TAXI_OP_SENDTO:
      return taxi__nbio_sendto(op, c);
    case TAXI_OP_CONNECT:
      if (ao->connecting) return taxi__nbio_connect_check(op, c);
      ao->connecting = true;
      return taxi__nbio_connect_start(op, c);
    case TAXI_OP_TRANSMIT_FILE:
      if (taxi__op_tx_part(op) == TAXI__TX_FILE)
        return taxi__nbio_transmit(op, c);
      break;
    case TAXI_OP_WRITE: {
      /* Several buffers left: one gathering sendmsg, not an aio_write per
       * buffer (see WRITE in docs/backends/aio.md). */
      taxi_buf_t left[2];
      if (taxi__op_remaining_bufs(op, left, 2) > 1)
        return taxi__nbio_write(op, c);
      break;
    }
    case TAXI_OP_READ:
      break;
    default:
      return TAXI_EINVAL;
  }
  int rc = taxi__aio_start_locked(s, op);
  if (rc < 0) return rc;
  *started = true;
  return 0;
}

/*
 * op's aio_read or aio_write was refused for want of resources: retrying
 * at once would be refused again, and waiting for readiness would not help
 * either (the socket is ready: that is why the request was made), so it
 * would spin.  Instead op waits on the retry list, and one timer of the
 * internal reactor tries the whole list again after a pause that grows
 * with each round refused in a row (core/common/backoff.h).  When the refusals
 * last too long, op completes with the error.  Returns true if it listed
 * a completion.
 */
static bool refused_locked(aio_state_t *s, taxi_op_t *op, int64_t r) {
  aio_op_t *ao = room(op);
  ao->refused = false;
  s->refused_unreported++;
  s->refused_code = (int)r;
  if (!s->retry_armed) {
    taxi_time_t pause = taxi__backoff_failed(&s->refusals);
    if (pause < 0 || taxi_reactor_schedule(s->reactor, &s->retry_timer,
                                           &s->wake_h, pause, 0, NULL) < 0) {
      taxi__backoff_reset(&s->refusals);
      ao->gave_up = true;
      taxi__aio_push_done_locked(s, op, r);
      return true;
    }
    count(s, 1);
    s->retry_armed = true;
  }
  ao->state = OP_BACKOFF;
  ao->next = s->retry_head;
  s->retry_head = op;
  return false;
}

/* Take op off the retry list. */
void taxi__aio_unlist_retry_locked(aio_state_t *s, taxi_op_t *op) {
  taxi_op_t **at = &s->retry_head;
  while (*at && *at != op) at = &room(*at)->next;
  if (*at) *at = room(op)->next;
  room(op)->next = NULL;
}

/* Run op's step and file the outcome: armed again on EAGAIN, in flight,
 * or listed as done.  Returns true if it listed a completion. */
bool taxi__aio_advance_locked(aio_state_t *s, taxi_op_t *op) {
  bool started;
  int64_t r = step_locked(s, op, &started);
  if (started) return false;
  if (room(op)->refused) return refused_locked(s, op, r);
  r = taxi__aio_settle_locked(s, op, r);
  if (r == TAXI_EAGAIN) {
    room(op)->state = OP_ARMED;
    room(op)->wants = wants_of(op);
    return false;
  }
  taxi__aio_push_done_locked(s, op, r);
  return true;
}

/* A hook of the internal reactor: the handle became ready for direction
 * d; runs in the thread inside wait(). */
static void ready_locked(aio_state_t *s, aio_handle_t *ah, int d) {
  taxi_op_t *op = ah->dir[d];
  if (!op || room(op)->state != OP_ARMED) return;
  taxi__aio_advance_locked(s, op);
}

static int handle_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  aio_handle_t *ah = TAXI_CONTAINER_OF(h, aio_handle_t, h);
  aio_state_t *s = ah->s;
  (void)fd;
  taxi__mutex_lock(&s->lock);
  if (!ah->detached) {
    ready_locked(s, ah, 0);
    /* A hang-up or an error goes to the input hook when READ is watched;
     * a writer waiting on the same handle learns of it from its step. */
    if (ev & (TAXI_EV_HUP | TAXI_EV_ERR)) ready_locked(s, ah, 1);
    taxi__aio_rearm_locked(s, ah);
  }
  taxi__mutex_unlock(&s->lock);
  return 0;
}

static int handle_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  aio_handle_t *ah = TAXI_CONTAINER_OF(h, aio_handle_t, h);
  aio_state_t *s = ah->s;
  (void)fd;
  (void)ev;
  taxi__mutex_lock(&s->lock);
  if (!ah->detached) {
    ready_locked(s, ah, 1);
    taxi__aio_rearm_locked(s, ah);
  }
  taxi__mutex_unlock(&s->lock);
  return 0;
}

/* The reactor is done with a removed handle (possibly inside
 * taxi_reactor_remove(), with our lock held: take no lock but the spare
 * records' here). */
static void handle_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  aio_handle_t *ah = TAXI_CONTAINER_OF(h, aio_handle_t, h);
  taxi__spares_put(&ah->s->idle, ah);
}

const taxi_handler_ops_t taxi__aio_handle_ops = {
    .input = handle_input, .output = handle_output, .close = handle_close};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__aio_steps_absent;
#endif /* TAXI_HAVE_AIO */
