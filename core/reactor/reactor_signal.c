/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_signal.c - POSIX signals dispatched as events.
 *
 * The port's signal source turns signals into a readable handle (signalfd,
 * or a pipe written by a minimal sigaction handler), so no user code ever
 * runs in signal context.  The source is opened on the first add_signal, so
 * reactors that take no signals own no signal resources.
 *
 * A backend that reports signals itself (TAXI__EXT_SIGNAL: kqueue's
 * EVFILT_SIGNAL, as libevent uses it) is used instead, unless
 * TAXI_SIGNAL_SOURCE=port is in the environment (so tests can run both):
 * no descriptor, and each signal is reported under the signal row with
 * its number in the token's upper half.
 *
 * A signal can be consumed by one reader only, so each signal number is
 * claimed by one reactor per process; the claim table is process-wide.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"

#include <string.h>

#define CLAIM_LIMIT 128

static _Atomic(taxi_reactor_t *) claims[CLAIM_LIMIT];

static bool claim(taxi_reactor_t *r, int signo) {
  taxi_reactor_t *expected = NULL;
  return atomic_compare_exchange_strong(&claims[signo], &expected, r);
}

static void unclaim(taxi_reactor_t *r, int signo) {
  taxi_reactor_t *expected = r;
  atomic_compare_exchange_strong(&claims[signo], &expected, NULL);
}

/* Have the backend watch the signal source under its reserved row. */
static int watch_source_locked(taxi_reactor_t *r) {
  int rc = r->ops->add(r->backend, taxi__sigsrc_handle(&r->sig),
                       TAXI__ROW_SIGNALS, TAXI_EV_READ, 0);
  /* A pool's thread may be waiting already, on a backend that waits on a
   * copy of its set (poll, select): it must look again, or the source
   * would be watched only from its next wait on. */
  if (rc == 0 && !(r->ops->caps & TAXI_CAP_LIVE_UPDATE))
    taxi__reactor_wake_locked(r);
  return rc;
}

static bool backend_reports_signals(const taxi_reactor_t *r) {
  if (!(r->ops->ext & TAXI__EXT_SIGNAL)) return false;
  const char *v = taxi__secure_getenv("TAXI_SIGNAL_SOURCE");
  return v == NULL || strcmp(v, "port") != 0;
}

static uint64_t signal_token(int signo) {
  return (uint64_t)(uint32_t)signo << 32 | TAXI__ROW_SIGNALS;
}

/* Start and stop one signal, with the source or the backend. */
static int add_locked(taxi_reactor_t *r, int signo) {
  if (!r->sig_in_backend) return taxi__sigsrc_add(&r->sig, signo);
  int rc = taxi__signal_take(signo);
  if (rc < 0) return rc;
  rc = r->ops->signal_add(r->backend, signo, signal_token(signo));
  if (rc < 0) (void)taxi__signal_give_back(signo);
  return rc;
}

static void del_locked(taxi_reactor_t *r, int signo) {
  if (!r->sig_in_backend) {
    taxi__sigsrc_del(&r->sig, signo);
    return;
  }
  /* Failures leave nothing to undo: the reactor forgets the signal, and a
   * report still collected finds no handler. */
  (void)r->ops->signal_del(r->backend, signo);
  (void)taxi__signal_give_back(signo);
}

/* Open the source and its tables on first use. */
static int open_source_locked(taxi_reactor_t *r) {
  if (r->sig_open) return 0;
  int limit = taxi__signal_limit();
  if (limit <= 0) return TAXI_ENOTSUP;
  if (limit > CLAIM_LIMIT) limit = CLAIM_LIMIT;
  if (!r->sig_handlers) {
    r->sig_handlers = taxi__calloc((size_t)limit, sizeof *r->sig_handlers);
    r->sig_pending = taxi__calloc((size_t)limit, 1);
    if (!r->sig_handlers || !r->sig_pending) {
      taxi__free(r->sig_handlers);
      taxi__free(r->sig_pending);
      r->sig_handlers = NULL;
      r->sig_pending = NULL;
      return TAXI_ENOMEM;
    }
  }
  r->sig_limit = limit;
  if (backend_reports_signals(r)) {
    r->sig_in_backend = true;
    r->sig_open = true;
    return 0;
  }
  r->sig_in_backend = false;
  int rc = taxi__sigsrc_open(&r->sig);
  if (rc < 0) return rc;
  rc = watch_source_locked(r);
  if (rc < 0) {
    taxi__sigsrc_close(&r->sig);
    return rc;
  }
  r->sig_open = true;
  return 0;
}

int taxi_reactor_add_signal(taxi_reactor_t *r, int signo, taxi_handler_t *h) {
  if (!r || !h || !h->ops || !h->ops->signal) return TAXI_EINVAL;
  int limit = taxi__signal_limit();
  if (limit <= 0) return TAXI_ENOTSUP;
  if (signo <= 0 || signo >= limit || signo >= CLAIM_LIMIT) return TAXI_EINVAL;

  taxi__mutex_lock(&r->lock);
  int rc = open_source_locked(r);
  if (rc < 0) goto out;
  if (r->sig_handlers[signo]) {
    rc = TAXI_EEXIST;
    goto out;
  }
  if (h->internal_.flags & TAXI__H_CLOSING) {
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_reactor_add_signal: h: closing (removed, its "
                      "close hook not yet run)");
    goto out;
  }
  if ((h->internal_.flags & TAXI__H_ATTACHED) && h->internal_.reactor != r) {
    rc = TAXI_EINVAL;
    goto out;
  }
  if (!claim(r, signo)) {
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_reactor_add_signal: signo: another reactor of "
                      "the process owns signal %d",
                      signo);
    goto out;
  }
  rc = add_locked(r, signo);
  if (rc < 0) {
    unclaim(r, signo);
    goto out;
  }
  taxi__reactor_attach_locked(r, h); /* cannot fail: checked above */
  r->sig_handlers[signo] = h;
  h->internal_.signals++;
out:
  taxi__mutex_unlock(&r->lock);
  return rc;
}

static void remove_locked(taxi_reactor_t *r, int signo) {
  del_locked(r, signo);
  unclaim(r, signo);
  r->sig_handlers[signo]->internal_.signals--;
  r->sig_handlers[signo] = NULL;
  r->sig_pending[signo] = 0;
}

int taxi_reactor_remove_signal(taxi_reactor_t *r, int signo) {
  if (!r) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  if (signo <= 0 || signo >= CLAIM_LIMIT) {
    rc = TAXI_EINVAL;
  } else if (r->sig_open && signo < r->sig_limit && r->sig_handlers[signo]) {
    remove_locked(r, signo);
    rc = 0;
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

void taxi__signals_detach_handler_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  for (int s = 1; s < r->sig_limit && h->internal_.signals; s++)
    if (r->sig_handlers[s] == h) remove_locked(r, s);
}

/* A signal removed since it arrived is not dispatched.  One set aside for
 * the thread that owns its handler (core/reactor/reactor_serial.c) has not run
 * yet: this instance merges into it. */
static void mark_pending_locked(taxi_reactor_t *r, int s) {
  if (s > 0 && s < r->sig_limit && r->sig_handlers[s] &&
      r->sig_pending[s] != TAXI__SIG_DEFERRED) {
    r->sig_pending[s] = TAXI__SIG_PENDING;
    r->sig_any_pending = true;
  }
}

void taxi__signals_read_locked(taxi_reactor_t *r, uint64_t token) {
  int got[32];
  int n;
  if (!r->sig_open) return;
  if (r->sig_in_backend) {
    mark_pending_locked(r, (int)(token >> 32));
    return;
  }
  while ((n = taxi__sigsrc_read(&r->sig, got, 32)) > 0) {
    for (int i = 0; i < n; i++) mark_pending_locked(r, got[i]);
    if (n < 32) break;
  }
}

bool taxi__signals_take_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  for (int s = 1; s < r->sig_limit; s++) {
    if (r->sig_pending[s] != TAXI__SIG_PENDING) continue;
    /* Another hook of its handler runs: its thread runs this one next. */
    if (!taxi__serial_claim_locked(r->sig_handlers[s])) {
      r->sig_pending[s] = TAXI__SIG_DEFERRED;
      r->sig_handlers[s]->internal_.serial |= TAXI__SER_DEFERRED;
      continue;
    }
    r->sig_pending[s] = 0;
    ev->kind = TAXI__EV_SIGNAL;
    ev->signo = s;
    ev->handler = r->sig_handlers[s];
    ev->handler->internal_.refs++;
    return true;
  }
  r->sig_any_pending = false;
  return false;
}

void taxi__signals_destroy(taxi_reactor_t *r) {
  if (r->sig_open) {
    /* Handlers were detached already; release any claims left. */
    for (int s = 1; s < r->sig_limit; s++) {
      if (r->sig_in_backend && r->sig_handlers[s]) del_locked(r, s);
      unclaim(r, s);
    }
    if (!r->sig_in_backend) taxi__sigsrc_close(&r->sig);
    r->sig_open = false;
  }
  taxi__free(r->sig_handlers);
  taxi__free(r->sig_pending);
  r->sig_handlers = NULL;
  r->sig_pending = NULL;
}

int taxi__signals_reinit_locked(taxi_reactor_t *r) {
  if (!r->sig_open) return 0;
  if (r->sig_in_backend) {
    /* The backend is new (a kqueue is not inherited); the claims, the
     * dispositions and the mask were. */
    int rc = 0;
    for (int s = 1; rc == 0 && s < r->sig_limit; s++)
      if (r->sig_handlers[s])
        rc = r->ops->signal_add(r->backend, s, signal_token(s));
    return rc;
  }
  /* Closing or changing the inherited source would change the parent's
   * (a signalfd's mask, a pipe), so the port makes a new one. */
  int rc = taxi__sigsrc_reinit_after_fork(&r->sig);
  return rc == 0 ? watch_source_locked(r) : rc;
}
