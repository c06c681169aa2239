/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_signal.c - POSIX signals delivered by a proactor.
 *
 * A completion backend has no portable way to wait for a signal (io_uring
 * could poll a signalfd, IOCP has no signals at all), so the signals are
 * caught the way the reactor catches them - its signal source, or kqueue's
 * filter - by a small reactor of the proactor's own, run by a thread that
 * does nothing else.  Its hook marks the signal pending and posts one
 * record the proactor owns; that completion runs in a dispatching thread
 * and calls the application's function for every pending signal.  So no
 * user code runs in the thread that catches them, a burst of signals is
 * one completion, and nothing is allocated per signal.  The reactor and
 * the thread are made with the first signal added: a proactor that takes
 * none has neither.
 *
 * Layer 5, above the core: it uses the proactor through its public calls
 * (taxi_proactor_post, taxi_op_init) and the reactor's, and nothing of the
 * core calls it.  taxi_proactor_destroy stops and frees the catcher through
 * the teardown hook registered here when the catcher is made (see
 * core/proactor/proactor_impl.h).
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/backoff.h"
#include "core/common/detail.h"
#include "core/proactor/proactor_impl.h"

#include <string.h>

/* Signal numbers below this are accepted (Linux has 64, the BSDs 128). */
#define PSIG_MAX 128

struct taxi__psig {
  taxi_proactor_t *p;
  taxi_reactor_t *r; /* catches the signals */
  taxi_handler_t h;  /* its signal hook */
  taxi__thread_t thread;
  bool running;        /* the thread was started and not joined */
  atomic_bool closing; /* the thread is being stopped: stop retrying */
  taxi_op_t op;        /* posted when signals are pending */
  atomic_ullong pending[PSIG_MAX / 64];
  /* Guarded by the proactor's lock: who is told of each signal. */
  struct {
    taxi_proactor_signal_fn fn;
    void *arg;
  } to[PSIG_MAX];
};

/* In a dispatching thread: call the application for each pending signal. */
static void psig_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi__psig_t *s = act;
  (void)op;
  (void)bytes;
  if (status < 0) return; /* cancelled: the proactor is going */
  for (unsigned w = 0; w < PSIG_MAX / 64; w++) {
    unsigned long long bits = atomic_exchange(&s->pending[w], 0);
    for (unsigned b = 0; bits; b++, bits >>= 1) {
      if (!(bits & 1)) continue;
      int signo = (int)(w * 64 + b);
      taxi__mutex_lock(&s->p->lock);
      /* Removed meanwhile, or the proactor is being destroyed (its signals
       * given back already): dropped. */
      taxi_proactor_signal_fn fn = s->p->destroying ? NULL : s->to[signo].fn;
      void *arg = s->to[signo].arg;
      taxi__mutex_unlock(&s->p->lock);
      if (fn) fn(s->p, signo, arg);
    }
  }
}

/* In the signal thread: mark and post.  A record in flight will see the
 * mark (its handler reads the marks after the record went idle), so
 * TAXI_EBUSY is success.  Other refusals are retried after a growing
 * pause, each reported - the thread does nothing else, so it may wait -
 * until the post goes through or the proactor stops the thread. */
static int psig_caught(taxi_handler_t *h, int signo) {
  taxi__psig_t *s = TAXI_CONTAINER_OF(h, taxi__psig_t, h);
  atomic_fetch_or(&s->pending[signo / 64], 1ull << (signo % 64));
  taxi__backoff_t b = {0};
  int rc;
  while ((rc = taxi_proactor_post(s->p, &s->op, psig_done, s)) < 0 &&
         rc != TAXI_EBUSY && rc != TAXI_ESTOPPED && !atomic_load(&s->closing)) {
    taxi_time_t pause = taxi__backoff_failed(&b);
    taxi__report_error(s->p->on_error, s->p->on_error_arg, rc, "signal",
                       TAXI_INVALID_HANDLE, b.failures, false);
    taxi__sleep(pause < 0 ? TAXI__BACKOFF_MAX_NS : pause);
  }
  return 0;
}

static const taxi_handler_ops_t psig_ops = {.signal = psig_caught};

static void *psig_main(void *arg) {
  taxi__psig_t *s = arg;
  /* The reactor retries transient failures of its wait and reports them
   * to the proactor's callback; one it returns is persistent and was
   * reported as fatal there.  The signals are then no longer caught. */
  (void)taxi_reactor_run(s->r);
  return NULL;
}

/* The teardown hook's first part: stop catching signals (join the catching
 * thread, restore each signal's disposition); the record it posts may
 * still be in flight.  Without the lock, before the proactor drains. */
static void psig_stop(taxi_proactor_t *p) {
  taxi__psig_t *s = p->sig;
  if (!s) return;
  if (s->running) {
    atomic_store(&s->closing, true);
    taxi_reactor_stop(s->r);
    taxi__thread_join(s->thread);
    s->running = false;
  }
  /* Restores each signal's disposition and the thread's mask. */
  taxi_reactor_destroy(s->r);
  s->r = NULL;
}

/* Its second part: free what is left, once nothing is in flight. */
static void psig_release(taxi_proactor_t *p) {
  taxi__free(p->sig);
  p->sig = NULL;
}

static const taxi__proactor_teardown_t psig_teardown = {psig_stop,
                                                        psig_release};

static int psig_open(taxi_proactor_t *p, taxi__psig_t **out) {
  taxi__psig_t *s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  s->p = p;
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.on_error = p->on_error;
  ro.on_error_arg = p->on_error_arg;
  int rc = taxi_reactor_create(&s->r, &ro);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  taxi_handler_init(&s->h, &psig_ops);
  taxi_op_init(&s->op);
  atomic_init(&s->closing, false);
  for (unsigned w = 0; w < PSIG_MAX / 64; w++) atomic_init(&s->pending[w], 0);
  *out = s;
  return 0;
}

int taxi_proactor_add_signal(taxi_proactor_t *p, int signo,
                             taxi_proactor_signal_fn fn, void *arg) {
  if (!p || !fn || signo <= 0 || signo >= PSIG_MAX) return TAXI_EINVAL;
  /* One caller at a time makes the catcher; the lock is not held across
   * the reactor's calls (they may take the signal lock of the process). */
  taxi__mutex_lock(&p->lock);
  int rc = p->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0 && p->sig && p->sig->to[signo].fn) rc = TAXI_EEXIST;
  if (rc == 0 && p->sig_busy)
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_proactor_add_signal: p: another thread is adding "
                      "or removing a signal of it now");
  if (rc == 0) p->sig_busy = true;
  taxi__mutex_unlock(&p->lock);
  if (rc < 0) return rc;

  taxi__psig_t *s = p->sig;
  if (!s) rc = psig_open(p, &s);
  /* In the caller's thread, which the rules of taxi_reactor_add_signal
   * are about (the signal is blocked here, and in threads made later). */
  unsigned mark = taxi__refusals();
  if (rc == 0) rc = taxi_reactor_add_signal(s->r, signo, &s->h);
  rc = taxi__refuse_within(rc, mark, "taxi_reactor_add_signal: signo",
                           "taxi_proactor_add_signal: signo");
  if (rc == 0 && !s->running) {
    /* Like every thread of taxi's it starts with the signals blocked, so
     * the signal source reads them without their delivery here. */
    rc = taxi__thread_create(&s->thread, psig_main, s);
    if (rc == 0)
      s->running = true;
    else
      (void)taxi_reactor_remove_signal(s->r, signo);
  }

  taxi__mutex_lock(&p->lock);
  if (rc == 0) {
    s->to[signo].fn = fn;
    s->to[signo].arg = arg;
  }
  if (s && !p->sig) {
    if (rc == 0) {
      p->sig = s;
      p->teardown = &psig_teardown;
    } else {
      taxi_reactor_destroy(s->r);
      taxi__free(s);
    }
  }
  p->sig_busy = false;
  taxi__mutex_unlock(&p->lock);
  return rc;
}

int taxi_proactor_remove_signal(taxi_proactor_t *p, int signo) {
  if (!p || signo <= 0 || signo >= PSIG_MAX) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  taxi__psig_t *s = p->sig;
  int rc = !s || !s->to[signo].fn ? TAXI_ENOENT : 0;
  if (rc == 0 && p->sig_busy)
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_proactor_remove_signal: p: another thread is "
                      "adding or removing a signal of it now");
  if (rc == 0) {
    s->to[signo].fn = NULL;
    s->to[signo].arg = NULL;
    p->sig_busy = true;
  }
  taxi__mutex_unlock(&p->lock);
  if (rc < 0) return rc;
  /* The catcher stays (with its thread) for the next signal added. */
  rc = taxi_reactor_remove_signal(s->r, signo);
  taxi__mutex_lock(&p->lock);
  p->sig_busy = false;
  taxi__mutex_unlock(&p->lock);
  return rc == TAXI_ENOENT ? 0 : rc;
}
