/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/aio.c - the POSIX aio completion backend: its table
 * (taxi__completion_aio) and the contract of backends/completion.h.
 *
 * Socket and file data move with aio_read(3) and aio_write(3); accept,
 * connect, the gathering writes and the file part of a transmit-file are
 * the non-blocking steps of backends/nbio.c, and the readiness that gates
 * every socket step comes from an internal Reactor ("aio:<reactor
 * backend>" picks its backend).  A reaper thread waits in aio_suspend(3)
 * for the requests in flight and lists their completions for wait().
 * At most 8 instances at once; after fork() a child should use another
 * backend.
 *
 * How it works, and why (what runs where, completion notification, what
 * it relies on in glibc, ThreadSanitizer builds, limits, counters):
 * docs/backends/aio.md.  The other files: aio_steps.c (the steps, the
 * readiness interest, starting requests, refusals), aio_reaper.c (the
 * reaper and its doorbell).
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

#include <string.h>
#include <unistd.h>

/* ---- the table ---------------------------------------------------------- */

static void aio_close(void *state);

static atomic_int instances;

/* The state with its lock and condition; nothing else yet. */
static int new_state(aio_state_t **out, taxi__completion_counters_t *c) {
  aio_state_t *s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  s->counters = c;
  s->bell[0] = s->bell[1] = -1;
  int rc = taxi__mutex_init(&s->lock);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  rc = taxi__cond_init(&s->cond);
  if (rc == 0) {
    rc = taxi__spares_init(&s->idle, sizeof(aio_handle_t), 64);
    if (rc < 0) taxi__cond_destroy(&s->cond);
  }
  if (rc < 0) {
    taxi__mutex_destroy(&s->lock);
    taxi__free(s);
    return rc;
  }
  *out = s;
  return 0;
}

static int aio_open(void **state, const char *variant,
                    const taxi_proactor_options_t *opts,
                    taxi__completion_counters_t *counters) {
  if (atomic_fetch_add(&instances, 1) >= AIO_MAX_INSTANCES) {
    atomic_fetch_sub(&instances, 1);
    taxi__set_os_error(EAGAIN);
    return TAXI_ENOTSUP;
  }
  aio_state_t *s;
  int rc = new_state(&s, counters);
  if (rc < 0) {
    atomic_fetch_sub(&instances, 1);
    return rc;
  }
  taxi__aio_tsan_init();
  /* From here aio_close() undoes whatever was done. */
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = variant && *variant ? variant : NULL;
  rc = taxi_reactor_create(&s->reactor, &ro);
  if (rc == 0) {
    /* A failed wait of the internal reactor comes out of wait() at once,
     * for the proactor (or the pool dispatching it) to back off from,
     * count, report and, if it lasts, stop on; backing off inside as well
     * would hide it, and make the outer backoff count one failure per
     * inner series of pauses. */
    taxi__reactor_pass_wait_errors(s->reactor);
    rc = taxi__wakeup_open(&s->wakeup);
    s->wakeup_open = rc == 0;
  }
  if (opts) {
    s->on_error = opts->on_error;
    s->on_error_arg = opts->on_error_arg;
  }
  if (rc == 0) rc = taxi_timer_init(&s->retry_timer);
  if (rc == 0) rc = taxi_handler_init(&s->wake_h, &taxi__aio_wake_ops);
  if (rc == 0)
    rc = taxi__reactor_register_own(s->reactor, taxi__wakeup_handle(&s->wakeup),
                                    &s->wake_h, TAXI_EV_READ);
  if (rc == 0) rc = taxi__aio_open_bell(s);
  if (rc == 0) rc = taxi__aio_start_reaper(s);
  if (rc < 0) {
    aio_close(s);
    return rc;
  }
  *state = s;
  return 0;
}

static void aio_close(void *state) {
  aio_state_t *s = state;
  if (!s) return;
  if (s->reaper_started) {
    taxi__mutex_lock(&s->lock);
    s->stopping = true;
    taxi__aio_ring_reaper_locked(s);
    taxi__mutex_unlock(&s->lock);
    taxi__thread_join(s->reaper);
  }
  /* Handles the core did not detach: those in the reactor are freed by
   * its destruction (their close hook), the others here. */
  for (size_t i = 0; i < s->handles_cap; i++)
    if (s->handles[i] && !s->handles[i]->registered) taxi__free(s->handles[i]);
  if (s->reactor) taxi_reactor_destroy(s->reactor);
  taxi__spares_fini(&s->idle); /* after the reactor, which returns some */
  if (s->wakeup_open) taxi__wakeup_close(&s->wakeup);
  for (int i = 0; i < 2; i++)
    if (s->bell[i] >= 0) close(s->bell[i]);
  taxi__free(s->handles);
  taxi__free(s->flight);
  taxi__free(s->snap);
  taxi__free(s->spare);
  taxi__cond_destroy(&s->cond);
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
  atomic_fetch_sub(&instances, 1);
}

static aio_handle_t *handle_of(aio_state_t *s, taxi_handle_t h) {
  return h >= 0 && (size_t)h < s->handles_cap ? s->handles[h] : NULL;
}

static int grow_handles_locked(aio_state_t *s, taxi_handle_t h) {
  if ((size_t)h < s->handles_cap) return 0;
  size_t cap = s->handles_cap ? s->handles_cap : 64;
  while (cap <= (size_t)h) cap *= 2;
  aio_handle_t **a = taxi__reallocarray(s->handles, cap, sizeof *a);
  if (!a) return TAXI_ENOMEM;
  memset(a + s->handles_cap, 0, (cap - s->handles_cap) * sizeof *a);
  s->handles = a;
  s->handles_cap = cap;
  return 0;
}

static int attach_locked(aio_state_t *s, aio_handle_t *ah) {
  int rc = grow_handles_locked(s, ah->fd);
  if (rc < 0) return rc;
  if (s->handles[ah->fd]) return TAXI_EEXIST;
  /* Room for a request per direction of every handle (and for those of
   * detached handles not yet reaped), in the list of requests in flight
   * and in the reaper's: starting and waiting then never allocate. */
  size_t most = s->nflight + 2 * (s->nhandles + 1);
  rc = taxi__aio_reserve_flight_locked(s, most);
  if (rc == 0) rc = taxi__aio_reserve_snap_locked(s, most);
  if (rc < 0) return rc;
  s->handles[ah->fd] = ah;
  s->nhandles++;
  return 0;
}

static int aio_attach(void *state, taxi_handle_t h) {
  aio_state_t *s = state;
  if (h < 0) return TAXI_EBADF;
  int rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  bool file = taxi__nbio_is_file(h) == 1;
  /* A request on a socket must never block a glibc helper (see READ in
   * docs/backends/aio.md). */
  if (!file && (rc = taxi__set_nonblocking(h)) < 0) return rc;
  aio_handle_t *ah = taxi__spares_get(&s->idle);
  if (!ah) return TAXI_ENOMEM;
  taxi_handler_init(&ah->h, &taxi__aio_handle_ops);
  ah->s = s;
  ah->fd = h;
  ah->file = file;
  taxi__mutex_lock(&s->lock);
  rc = attach_locked(s, ah);
  taxi__mutex_unlock(&s->lock);
  if (rc < 0) taxi__spares_put(&s->idle, ah);
  return rc;
}

static void aio_detach(void *state, taxi_handle_t h) {
  aio_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  aio_handle_t *ah = handle_of(s, h);
  if (!ah) {
    taxi__mutex_unlock(&s->lock);
    return;
  }
  s->handles[h] = NULL;
  s->nhandles--;
  ah->detached = true;
  /* The core cancelled everything first; an operation still waiting for
   * readiness is finished here all the same. */
  for (int d = 0; d < 2; d++) {
    taxi_op_t *op = ah->dir[d];
    if (op && room(op)->state == OP_BACKOFF)
      taxi__aio_unlist_retry_locked(s, op);
    if (op && (room(op)->state == OP_ARMED || room(op)->state == OP_BACKOFF)) {
      taxi__aio_push_done_locked(s, op, TAXI_ECANCELED);
      taxi__aio_kick_locked(s);
    }
  }
  /* Requests still running finish by themselves (cancelled or with their
   * own result) and are reaped as usual; their completions no longer
   * refer to the handle. */
  for (int d = 0; d < 2; d++) {
    if (ah->dir[d]) room(ah->dir[d])->ah = NULL;
    ah->dir[d] = NULL;
  }
  if (ah->registered) {
    taxi_reactor_remove(s->reactor, &ah->h); /* frees ah, now or later */
    count(s, 1);
  } else {
    taxi__spares_put(&s->idle, ah);
  }
  taxi__mutex_unlock(&s->lock);
}

/* Start op (docs/backends/aio.md tells what each kind does). */
static int submit_locked(aio_state_t *s, aio_handle_t *ah, taxi_op_t *op) {
  int d = dir_of(op->kind);
  if (d < 0) return TAXI_EINVAL;
  if (is_file_op(op->kind) != ah->file) return TAXI_ENOTSUP;
  if (ah->dir[d]) return TAXI_EBUSY; /* the core submits one at a time */
  aio_op_t *ao = room(op);
  memset(ao, 0, sizeof *ao);
  ao->ah = ah;
  if (is_file_op(op->kind)) {
    int rc = taxi__aio_start_locked(s, op);
    if (rc < 0) return rc;
  } else if (op->kind == TAXI_OP_READ || op->kind == TAXI_OP_ACCEPT ||
             op->kind == TAXI_OP_RECVFROM) {
    ao->state = OP_ARMED; /* data is seldom there yet: wait for it */
    ao->wants = TAXI_EV_READ;
  } else if (taxi__aio_advance_locked(s, op)) {
    taxi__aio_kick_locked(s);
  }
  ah->dir[d] = op;
  if (ao->state == OP_ARMED) {
    int rc = taxi__aio_rearm_locked(s, ah);
    if (rc < 0) {
      ah->dir[d] = NULL;
      ao->state = OP_IDLE;
      return rc;
    }
  }
  return 0;
}

static int aio_submit(void *state, taxi_op_t *op) {
  aio_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  aio_handle_t *ah = handle_of(s, op->handle);
  int rc = ah ? submit_locked(s, ah, op) : TAXI_ENOENT;
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int aio_cancel_op(void *state, taxi_op_t *op) {
  aio_state_t *s = state;
  aio_op_t *ao = room(op);
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  switch (ao->state) {
    case OP_ARMED:
      taxi__aio_push_done_locked(s, op, TAXI_ECANCELED);
      taxi__aio_kick_locked(s);
      if (ao->ah) taxi__aio_rearm_locked(s, ao->ah);
      break;
    case OP_AIO:
      /* AIO_CANCELED: the reaper finds it ECANCELED; AIO_NOTCANCELED:
       * running, it completes with its own result; AIO_ALLDONE: finished,
       * the reaper has yet to report it.  One completion in every case. */
      ao->cancel = true;
      aio_cancel(ao->cb.aio_fildes, &ao->cb);
      count(s, 1);
      break;
    case OP_DONE:
      ao->cancel = true; /* its completion is on the list already */
      break;
    case OP_BACKOFF:
      taxi__aio_unlist_retry_locked(s, op);
      taxi__aio_push_done_locked(s, op, TAXI_ECANCELED);
      taxi__aio_kick_locked(s);
      break;
    default:
      rc = TAXI_ENOENT;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

/* A socket request that found nothing to do (EAGAIN: readiness reported
 * spuriously, or an optimistic write to a full socket) waits for
 * readiness again instead of completing.  Returns true if it does; else
 * *result is what op completes with. */
static bool retry_locked(aio_state_t *s, taxi_op_t *op, int64_t *result) {
  aio_op_t *ao = room(op);
  /* A detached handle had its operations cancelled by the core first. */
  if (ao->cancel || !ao->ah || ao->ah->detached) {
    *result = TAXI_ECANCELED;
    return false;
  }
  if (ao->ah->file) return false;
  ao->state = OP_ARMED;
  ao->wants = wants_of(op);
  int rc = taxi__aio_rearm_locked(s, ao->ah);
  if (rc == 0) return true;
  ao->state = OP_DONE;
  *result = rc;
  return false;
}

/* Take up to max completions off the list. */
static int take_locked(aio_state_t *s, taxi__completion_t *out, size_t max) {
  size_t n = 0;
  while (n < max && s->done_head) {
    taxi_op_t *op = s->done_head;
    aio_op_t *ao = room(op);
    s->done_head = ao->next;
    if (!s->done_head) s->done_tail = NULL;
    int64_t result = ao->result;
    if (result == TAXI_EAGAIN && !ao->gave_up && retry_locked(s, op, &result))
      continue;
    int d = dir_of(op->kind);
    if (ao->ah && ao->ah->dir[d] == op) ao->ah->dir[d] = NULL;
    ao->ah = NULL;
    ao->state = OP_IDLE;
    out[n].op = op;
    out[n].result = result;
    out[n].flags = 0;
    n++;
  }
  return (int)n;
}

static uint64_t reactor_waits(aio_state_t *s) {
  taxi_reactor_stats_t st;
  return taxi_reactor_stats(s->reactor, &st) == 0 ? st.waits : 0;
}

static int wait_ms(taxi_time_t now, taxi_time_t deadline) {
  if (deadline == INT64_MAX) return -1;
  if (deadline <= now) return 0;
  taxi_time_t ms =
      (deadline - now + TAXI_NSEC_PER_MSEC - 1) / TAXI_NSEC_PER_MSEC;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Return listed completions at once; else let the internal reactor wait
 * (its hooks perform the readiness steps, the reaper wakes it) until
 * something is listed, wake() is called or the time is up. */
static int aio_wait(void *state, taxi__completion_t *out, size_t max,
                    int timeout_ms) {
  aio_state_t *s = state;
  if (!out || max == 0) return TAXI_EINVAL;
  taxi_time_t now = taxi_now();
  taxi_time_t deadline =
      timeout_ms < 0 ? INT64_MAX
                     : now + (taxi_time_t)timeout_ms * TAXI_NSEC_PER_MSEC;
  bool waited = false;
  for (;;) {
    taxi__mutex_lock(&s->lock);
    s->waiting = false;
    int n = take_locked(s, out, max);
    bool woken = atomic_exchange(&s->wake_asked, false);
    bool done = n > 0 || woken || (waited && now >= deadline);
    if (!done) s->waiting = true;
    taxi__mutex_unlock(&s->lock);
    if (done) return n;

    uint64_t before = reactor_waits(s);
    int rc = taxi_reactor_handle_events(s->reactor, wait_ms(now, deadline));
    count_wait(s, reactor_waits(s) - before);
    waited = true;
    now = taxi_now();
    if (rc < 0) {
      taxi__mutex_lock(&s->lock);
      s->waiting = false;
      n = take_locked(s, out, max);
      taxi__mutex_unlock(&s->lock);
      return n > 0 ? n : rc;
    }
  }
}

static void aio_wake(void *state, int all) {
  aio_state_t *s = state;
  (void)all; /* one waiter at a time: no TAXI__PCAP_MULTI_WAIT */
  /* No lock: callable from a signal handler (by taxi_proactor_stop).  The
   * channel is signalled whether or not a thread waits: a wait about to
   * start returns at once (it sees wake_asked); a stale signal costs the
   * next wait one empty turn. */
  atomic_store(&s->wake_asked, true);
  if (taxi__wakeup_signal(&s->wakeup) > 0) count(s, 1);
}

static const char *aio_reactor_backend(void *state) {
  const struct aio_state *s = state;
  return taxi_reactor_backend(s->reactor);
}

const taxi__completion_ops_t taxi__completion_aio = {
    .name = "aio",
    .caps = 0,
    .open = aio_open,
    .reactor_backend = aio_reactor_backend,
    .close = aio_close,
    .attach = aio_attach,
    .detach = aio_detach,
    .submit = aio_submit,
    .cancel = aio_cancel_op,
    .wait = aio_wait,
    .wake = aio_wake,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__completion_aio_absent;
#endif /* TAXI_HAVE_AIO */
