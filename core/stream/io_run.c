/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_run.c - running a context and stopping it: the run of
 * each dispatcher (a reactor, a Leader/Followers pool, a half-sync/
 * half-async pool, a proactor, a group of them), the stop that
 * taxi_io_stop's wake-up socket pair carries into a dispatching thread,
 * waiting for the end, and the error reports of what the context made
 * (a fatal one ends the run).
 *
 * Every use of the pools' run and stop calls is in this file (run_*,
 * real_stop), so that renaming them is a change here only; their create
 * calls are io.c's.  Calls post.c (the context's posts run at the
 * wake-up), the pools, the proactor, the reactor and common; nothing else
 * of the wing.
 */
#include "config.h"

#include "core/common/backoff.h"
#include "core/common/detail.h"
#include "core/stream/io_impl.h"

/* What the dispatcher the context made reports: passed on to the
 * application; a failure that stopped something of the context ends
 * taxi_io_run with that error: a pool that stopped (taxi_io_run could not
 * otherwise learn of it from a half-sync/half-async pool: its threads are
 * gone, and with them whoever would dispatch taxi_io_stop's wake-up), or
 * the proactor's signal catcher (taxi_proactor_add_signal), without which
 * the application's signals would go unheard. */
static void io_note_fatal(taxi_io_t *io, const taxi_error_report_t *r) {
  if (!r->fatal) return;
  taxi__mutex_lock(&io->lock);
  io->failed = true;
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
  taxi__io_fail(io, r->code);
}

static void io_failure(const taxi_error_report_t *r, void *arg) {
  taxi_io_t *io = arg;
  if (io->on_error) io->on_error(r, io->on_error_arg);
  io_note_fatal(io, r);
}

void taxi__io_on_error(const taxi_error_report_t *r, void *arg) {
  io_failure(r, arg);
}

void taxi__io_hsha_on_error(const taxi_error_report_t *r, void *arg) {
  taxi_io_t *io = arg;
  io->hsha_on_error(r, io->hsha_on_error_arg);
  io_note_fatal(io, r);
}

/* ---- running and stopping -------------------------------------------------
 */

static void note_error_locked(taxi_io_t *io, int rc) {
  if (rc < 0 && io->first_error == 0) io->first_error = rc;
}

/* Tell the dispatcher to stop: in a thread that dispatches io (the wake-up
 * callback), where the pools' shutdown calls may be made. */
static void real_stop(taxi_io_t *io) {
  taxi__mutex_lock(&io->lock);
  bool first = !io->stop_done;
  io->stop_done = true;
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
  if (!first) return;
  int rc = 0;
  switch (io->kind) {
    case TAXI_IO_REACTOR:
      rc = taxi_reactor_stop(io->reactor);
      break;
    case TAXI_IO_LF:
      rc = io->lf ? taxi_lf_stop(io->lf) : 0;
      break;
    case TAXI_IO_HSHA: {
      /* A worker may run this before taxi_hsha_create has returned; then
       * taxi_io_run shuts the pool down when it sees stop_done. */
      taxi_hsha_pool_t *p = atomic_load(&io->hsha_live);
      rc = p ? taxi_hsha_stop(p) : 0;
      break;
    }
    case TAXI_IO_PROACTOR:
      rc = io->lf ? taxi_lf_stop(io->lf) : taxi_proactor_stop(io->proactor);
      break;
    case TAXI_IO_PROACTORS:
      rc = taxi_proactor_group_stop(io->group);
      break;
  }
  if (rc == TAXI_ESTOPPED) rc = 0;
  taxi__mutex_lock(&io->lock);
  note_error_locked(io, rc);
  taxi__mutex_unlock(&io->lock);
}

void taxi__io_woken(taxi_io_t *io) {
  /* Drained first: a kick between the two would otherwise leave
   * wake_pending set with no byte to read, and every later kick would
   * count on that byte.  A kick that finds it still set has made its
   * change before, and the steps below see it. */
  taxi__sock_drain(io->wake[0]);
  atomic_store(&io->wake_pending, 0);
  taxi__io_posts_run(io); /* before a stop, posted before it */
  if (atomic_load(&io->stop_requested)) real_stop(io);
}

int taxi__io_kick(taxi_io_t *io) {
  if (atomic_exchange(&io->wake_pending, 1) != 0) return 0;
  int rc = taxi__sock_poke(io->wake[1]);
  /* Nothing was sent: the next kick must try again. */
  if (rc < 0) atomic_store(&io->wake_pending, 0);
  return rc;
}

void taxi__io_fail(taxi_io_t *io, int code) {
  taxi__mutex_lock(&io->lock);
  note_error_locked(io, code);
  taxi__mutex_unlock(&io->lock);
  atomic_store(&io->stop_requested, 1);
  taxi__io_kick(io); /* failing too: the dispatcher's own failure ends it */
}

int taxi_io_stop(taxi_io_t *io) {
  if (!io) return TAXI_EINVAL;
  /* Only atomics and one send(): callable from a signal handler. */
  atomic_store(&io->stop_requested, 1);
  return taxi__io_kick(io);
}

/* The runs below return 0 once stopped, or the error that ended them. */
static int run_reactor(taxi_io_t *io) {
  int rc = taxi_reactor_run(io->reactor);
  return rc == TAXI_ESTOPPED ? 0 : rc;
}

/* A thread could not be started (`code`): report it (unless the pool did),
 * and a transient failure (the OS out of threads or memory for now) is
 * worth another try after a growing pause.  Returns 0 to try again, else
 * the code. */
static int start_failed(taxi_io_t *io, taxi__backoff_t *b, int code,
                        bool reported) {
  taxi_time_t pause =
      taxi__error_transient(code) ? taxi__backoff_failed(b) : -1;
  unsigned attempt = b->failures + (pause < 0 ? 1 : 0);
  if (!reported)
    taxi__report_error(io_failure, io, code, "thread", TAXI_INVALID_HANDLE,
                       attempt, pause < 0);
  if (pause < 0) return code;
  taxi__sleep(pause);
  return 0;
}

/* Spawn the pool's threads but the caller, as many as asked even when the
 * OS refuses some for a while (spawn keeps those it started). */
static int spawn_all(taxi_io_t *io, unsigned n) {
  taxi__backoff_t b = {0};
  for (;;) {
    taxi_lf_stats_t st;
    int rc = taxi_lf_stats(io->lf, &st);
    if (rc == 0 && st.threads >= n) return 0;
    if (rc == 0) rc = taxi_lf_spawn(io->lf, n - st.threads);
    if (rc == 0) return 0;
    /* The pool told its error callback already. */
    if ((rc = start_failed(io, &b, rc, true)) < 0) return rc;
  }
}

/* Start the pool's threads (all but the caller) and join it; when it
 * returns every thread of the pool has left. */
static int run_lf(taxi_io_t *io) {
  int rc = 0;
  if (io->own_lf && io->threads > 1) rc = spawn_all(io, io->threads - 1);
  if (rc == 0) rc = taxi_lf_join(io->lf, -1, 0);
  /* A spawned thread may have run taxi_io_stop's shutdown before this
   * thread joined (or before spawn returned): stopped all the same. */
  if (rc == TAXI_ESTOPPED) rc = 0;
  if (io->own_lf) {
    /* Shut down (if an error ended the join) and join the spawned
     * threads; the pool object stays until destroy. */
    int src = taxi_lf_stop(io->lf);
    if (rc == 0 && src < 0 && src != TAXI_ESTOPPED) rc = src;
  }
  return rc;
}

/* The pool runs its own threads: wait until told to stop. */
static int run_hsha(taxi_io_t *io) {
  taxi_hsha_pool_t *pool = io->hsha;
  int rc = 0;
  if (!pool) {
    taxi_hsha_options_t o = io->hsha_opts;
    o.workers = io->threads;
    taxi__backoff_t b = {0};
    while ((rc = taxi_hsha_create(&pool, io->reactor, &o)) < 0)
      if ((rc = start_failed(io, &b, rc, false)) < 0) return rc;
    io->own_hsha = true;
    atomic_store(&io->hsha_live, pool);
  }
  /* Until told to stop, or the pool stopped by itself: io_failure says so
   * at once for a pool made here; one the application supplied may report
   * elsewhere, so it is also asked every 100 ms. */
  taxi__mutex_lock(&io->lock);
  while (!io->stop_done && !io->failed) {
    taxi__cond_timedwait(&io->cond, &io->lock,
                         taxi_now() + 100 * TAXI_NSEC_PER_MSEC);
    if (!io->own_hsha && taxi_hsha_wait(pool, 0) != TAXI_ETIMEDOUT) break;
  }
  taxi__mutex_unlock(&io->lock);
  /* Shut down (or, after a failure, wait for the threads to be gone): its
   * result is the failure that stopped the pool, if one did. */
  rc = taxi_hsha_stop(pool);
  if (rc == TAXI_ESTOPPED) rc = 0;
  if (io->own_hsha) {
    atomic_store(&io->hsha_live, NULL);
    taxi_hsha_destroy(pool);
    io->own_hsha = false;
  }
  return rc;
}

static int run_proactor(taxi_io_t *io) {
  if (io->lf) return run_lf(io);
  int rc = taxi_proactor_run(io->proactor);
  return rc == TAXI_ESTOPPED ? 0 : rc;
}

int taxi_io_run(taxi_io_t *io) {
  if (!io) return TAXI_EINVAL;
  if (taxi__io_foreign(io)) return taxi__stream_refuse_foreign("taxi_io_run");
  taxi__mutex_lock(&io->lock);
  if (io->running || io->destroying) {
    bool running = io->running;
    taxi__mutex_unlock(&io->lock);
    return taxi__refuse(TAXI_EBUSY, "taxi_io_run: io: %s",
                        running ? "a thread is in taxi_io_run already (this "
                                  "one, if this is a callback of io)"
                                : "being destroyed");
  }
  if (io->stop_done) {
    int rc = io->first_error ? io->first_error : TAXI_ESTOPPED;
    taxi__mutex_unlock(&io->lock);
    return rc;
  }
  io->running = true;
  taxi__mutex_unlock(&io->lock);

  int rc;
  switch (io->kind) {
    case TAXI_IO_LF:
      rc = run_lf(io);
      break;
    case TAXI_IO_HSHA:
      rc = run_hsha(io);
      break;
    case TAXI_IO_PROACTOR:
      rc = run_proactor(io);
      break;
    case TAXI_IO_PROACTORS:
      rc = taxi_proactor_group_run(io->group);
      if (rc == TAXI_ESTOPPED) rc = 0;
      break;
    default:
      rc = run_reactor(io);
      break;
  }

  taxi__mutex_lock(&io->lock);
  note_error_locked(io, rc);
  /* Whatever ended the run, the context is stopped now. */
  io->stop_done = true;
  atomic_store(&io->stop_requested, 1);
  io->running = false;
  rc = io->first_error ? io->first_error : TAXI_ESTOPPED;
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

int taxi_io_wait(taxi_io_t *io, int timeout_ms) {
  if (!io) return TAXI_EINVAL;
  taxi_time_t deadline = timeout_ms < 0 ? INT64_MAX
                                        : taxi_now() + (taxi_time_t)timeout_ms *
                                                           TAXI_NSEC_PER_MSEC;
  taxi__mutex_lock(&io->lock);
  int rc = 0;
  /* Stopped (or asked to stop before any run), and no run in progress. */
  while (io->running || !(io->stop_done || atomic_load(&io->stop_requested))) {
    if (deadline == INT64_MAX) {
      taxi__cond_wait(&io->cond, &io->lock);
    } else if (taxi__cond_timedwait(&io->cond, &io->lock, deadline) ==
               TAXI_ETIMEDOUT) {
      rc = TAXI_ETIMEDOUT;
      break;
    }
  }
  if (rc == 0) rc = io->first_error ? io->first_error : TAXI_ESTOPPED;
  taxi__mutex_unlock(&io->lock);
  return rc;
}
