/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io.c - the I/O context: the dispatcher it owns or was given, how
 * it runs and stops, signals, counters, and the lists of what it must close
 * when destroyed.
 *
 * Every use of the other objects' create, pool and stop calls is in this
 * file (dispatcher_create, run_*, real_stop), so that renaming them is a
 * change here only.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/io_impl.h"
#include "core/common/backoff.h"
#include "core/common/detail.h"
#include "core/common/options.h"

#include <string.h>

static const char *const dispatcher_names[] = {"reactor", "lf", "hsha",
                                               "proactor", "proactors"};
#define DISPATCHERS (sizeof dispatcher_names / sizeof dispatcher_names[0])

int taxi_io_dispatcher_parse(const char *name, taxi_io_dispatcher_t *out) {
  if (!name || !out) return TAXI_EINVAL;
  for (unsigned i = 0; i < DISPATCHERS; i++)
    if (strcmp(name, dispatcher_names[i]) == 0) {
      *out = (taxi_io_dispatcher_t)i;
      return 0;
    }
  return TAXI_EINVAL;
}

const char *taxi_io_dispatcher_name(taxi_io_dispatcher_t d) {
  return (unsigned)d < DISPATCHERS ? dispatcher_names[d] : NULL;
}

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

/* The half-sync/half-async pool's, when its options named a callback. */
static void io_hsha_failure(const taxi_error_report_t *r, void *arg) {
  taxi_io_t *io = arg;
  io->hsha_on_error(r, io->hsha_on_error_arg);
  io_note_fatal(io, r);
}

/* ---- creating -------------------------------------------------------------
 */

/* A proactor per thread: the group, made with the context's own error
 * callback; none of the objects an application may supply fits it. */
static int group_create(taxi_io_t *io, const taxi_io_options_t *o) {
  if (o->reactor || o->proactor || o->lf_pool || o->hsha_pool)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.%s: the proactors "
                        "dispatcher makes its group, and takes no object "
                        "of the application's",
                        o->reactor    ? "reactor"
                        : o->proactor ? "proactor"
                        : o->lf_pool  ? "lf_pool"
                                      : "hsha_pool");
  if (o->spread != TAXI_SPREAD_ROUND_ROBIN &&
      o->spread != TAXI_SPREAD_LEAST_LOADED)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.spread: not a "
                        "taxi_group_spread_t; got %d",
                        (int)o->spread);
  io->drv = &taxi__io_proactive;
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.backend = o->backend;
  po.on_error = io_failure;
  po.on_error_arg = io;
  taxi_proactor_group_options_t go = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  go.count = io->threads;
  go.proactor = &po;
  go.spread = o->spread;
  unsigned mark = taxi__refusals();
  int rc = taxi_proactor_group_create(&io->group, &go);
  /* The proactors' options are the context's. */
  rc = taxi__refuse_within(rc, mark,
                           "taxi_proactor_group_create: options.proactor",
                           "taxi_io_create: options");
  if (rc < 0) return rc;
  io->own_group = true;
  io->proactor = taxi_proactor_group_at(io->group, 0);
  return 0;
}

/* The reactor or proactor, made or taken from the options. */
static int dispatcher_create(taxi_io_t *io, const taxi_io_options_t *o) {
  if (io->kind == TAXI_IO_PROACTORS) return group_create(io, o);
  const char *name = dispatcher_names[io->kind];
  if (io->kind == TAXI_IO_PROACTOR) {
    if (o->reactor || o->hsha_pool)
      return taxi__refuse(TAXI_EINVAL,
                          "taxi_io_create: options.%s: the proactor "
                          "dispatcher runs over a proactor, not a reactor",
                          o->reactor ? "reactor" : "hsha_pool");
    io->drv = &taxi__io_proactive;
    if (o->proactor) {
      io->proactor = o->proactor;
      return 0;
    }
    if (o->lf_pool) /* a pool needs its proactor */
      return taxi__refuse(TAXI_EINVAL,
                          "taxi_io_create: options.lf_pool: needs "
                          "options.proactor, the proactor it dispatches");
    taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
    po.backend = o->backend;
    po.on_error = io_failure;
    po.on_error_arg = io;
    /* One dispatching thread: the proactor is that thread's alone (on
     * io_uring, a ring it owns; taxi/proactor.h). */
    if (io->threads <= 1) po.flags |= TAXI_PROACTOR_ONE_THREAD;
    unsigned mark = taxi__refusals();
    int rc = taxi_proactor_create(&io->proactor, &po);
    io->own_proactor = rc == 0;
    return taxi__refuse_within(rc, mark, "taxi_proactor_create: options",
                               "taxi_io_create: options");
  }
  if (o->proactor)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.proactor: the %s "
                        "dispatcher runs over a reactor, not a proactor",
                        name);
  if ((o->lf_pool && io->kind != TAXI_IO_LF) ||
      (o->hsha_pool && io->kind != TAXI_IO_HSHA))
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.%s: not the pool of the %s "
                        "dispatcher",
                        o->lf_pool ? "lf_pool" : "hsha_pool", name);
  io->drv = &taxi__io_reactive;
  if (o->reactor) {
    io->reactor = o->reactor;
    return 0;
  }
  if (o->lf_pool || o->hsha_pool)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.%s: needs options.reactor, "
                        "the reactor it dispatches",
                        o->lf_pool ? "lf_pool" : "hsha_pool");
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = o->backend;
  ro.on_error = io_failure;
  ro.on_error_arg = io;
  unsigned mark = taxi__refusals();
  int rc = taxi_reactor_create(&io->reactor, &ro);
  io->own_reactor = rc == 0;
  return taxi__refuse_within(rc, mark, "taxi_reactor_create: options",
                             "taxi_io_create: options");
}

static void dispatcher_destroy(taxi_io_t *io) {
  if (io->own_reactor) taxi_reactor_destroy(io->reactor);
  if (io->own_proactor) taxi_proactor_destroy(io->proactor);
  if (io->own_group) taxi_proactor_group_destroy(io->group);
  io->own_reactor = io->own_proactor = io->own_group = false;
}

static int pool_create(taxi_io_t *io);

int taxi_io_create(taxi_io_t **out, const taxi_io_options_t *opts) {
  taxi_io_options_t o;
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_io_create: out: NULL");
  taxi_io_t *io = taxi__calloc(1, sizeof *io);
  if (!io) return TAXI_ENOMEM;
  int rc = taxi__io_options_read(io, &o, opts);
  if (rc == 0 && (unsigned)o.dispatcher >= DISPATCHERS)
    rc = taxi__refuse(TAXI_EINVAL,
                      "taxi_io_create: options.dispatcher: not a "
                      "taxi_io_dispatcher_t; got %d",
                      (int)o.dispatcher);
  if (rc < 0) {
    taxi__free(io);
    return rc;
  }
  io->kind = o.dispatcher;
  io->on_error = o.on_error;
  io->on_error_arg = o.on_error_arg;
  /* The pools report to the context, which passes the report on and
   * learns that a pool stopped by itself (see io_failure). */
  if (!io->lf_opts.on_error) {
    io->lf_opts.on_error = io_failure;
    io->lf_opts.on_error_arg = io;
  }
  io->hsha_on_error = io->hsha_opts.on_error;
  io->hsha_on_error_arg = io->hsha_opts.on_error_arg;
  io->hsha_opts.on_error = io->hsha_on_error ? io_hsha_failure : io_failure;
  io->hsha_opts.on_error_arg = io;
  io->lf = o.lf_pool;
  io->hsha = o.hsha_pool;
  io->wake[0] = io->wake[1] = TAXI_INVALID_HANDLE;
  atomic_init(&io->stop_requested, 0);
  atomic_init(&io->wake_pending, 0);
  atomic_init(&io->hsha_live, o.hsha_pool);
  rc = taxi__io_threads_check(io, &o);
  if (rc == 0) rc = taxi__io_resolve_options(io, &o);
  if (rc < 0) goto fail_free;
  rc = taxi__mutex_init(&io->lock);
  if (rc < 0) goto fail_free;
  rc = taxi__cond_init(&io->cond);
  if (rc < 0) goto fail_lock;
  rc = taxi__io_posts_init(io);
  if (rc < 0) goto fail_cond;
  rc = dispatcher_create(io, &o);
  if (rc < 0) goto fail_posts;
  rc = taxi__socketpair(io->wake);
  if (rc < 0) goto fail_dispatcher;
  rc = io->drv->open(io);
  if (rc < 0) goto fail_pair;
  rc = pool_create(io);
  if (rc < 0) goto fail_open;
  *out = io;
  return 0;

fail_open:
  io->drv->close(io);
  taxi__close(io->wake[1]);
  dispatcher_destroy(io);
  goto fail_posts;
fail_pair:
  taxi__close(io->wake[0]);
  taxi__close(io->wake[1]);
fail_dispatcher:
  dispatcher_destroy(io);
fail_posts:
  taxi__io_posts_fini(io);
fail_cond:
  taxi__cond_destroy(&io->cond);
fail_lock:
  taxi__mutex_destroy(&io->lock);
fail_free:
  taxi__free(io);
  return rc;
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

/* Make the Leader/Followers pool now, so that a configuration the pool
 * refuses (several leaders on poll) is an error of taxi_io_create, before
 * the application announces anything.  It has no threads until run. */
static int pool_create(taxi_io_t *io) {
  bool proactive = io->kind == TAXI_IO_PROACTOR;
  if (io->lf || !(io->kind == TAXI_IO_LF || (proactive && io->threads > 1)))
    return 0;
  unsigned mark = taxi__refusals();
  int rc = proactive
               ? taxi_lf_create_proactor(&io->lf, io->proactor, &io->lf_opts)
               : taxi_lf_create(&io->lf, io->reactor, &io->lf_opts);
  io->own_lf = rc == 0;
  if (rc < 0) io->lf = NULL;
  return taxi__refuse_within(rc, mark,
                             proactive ? "taxi_lf_create_proactor: options"
                                       : "taxi_lf_create: options",
                             "taxi_io_create: options.lf");
}

static void pool_destroy(taxi_io_t *io) {
  if (io->own_lf) taxi_lf_destroy(io->lf);
  io->own_lf = false;
  io->lf = NULL;
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

/* ---- destroying -----------------------------------------------------------
 */

static bool empty(taxi_io_t *io) {
  taxi__mutex_lock(&io->lock);
  bool e = !io->streams && !io->listeners && !io->timers;
  taxi__mutex_unlock(&io->lock);
  return e;
}

/* proactors: every 10 ms, in the first proactor's thread, whether the
 * group may stop (see drain_op in core/stream/io_impl.h). */
static void drain_look(taxi_op_t *op, int status, size_t bytes, void *act) {
  taxi_io_t *io = act;
  (void)bytes;
  if (status == TAXI_ECANCELED) return; /* the group is going */
  if (empty(io) || taxi_now() > io->drain_give_up ||
      taxi_proactor_timer(io->proactor, op, 10 * TAXI_NSEC_PER_MSEC, drain_look,
                          io) < 0)
    taxi_proactor_group_stop(io->group);
}

/* proactors: the group's threads dispatch the closes while this one waits
 * in a run of the group that the look above ends.  A stop from elsewhere
 * (taxi_io_stop before any run) must not keep the closes from running:
 * the group is run again, the look still on its way. */
static void drain_group(taxi_io_t *io) {
  io->drain_give_up = taxi_now() + 10 * TAXI_NSEC_PER_SEC;
  taxi_op_init(&io->drain_op);
  while (!empty(io) && taxi_now() <= io->drain_give_up) {
    if (!taxi_op_in_flight(&io->drain_op) &&
        taxi_proactor_timer(io->proactor, &io->drain_op, 0, drain_look, io) < 0)
      return;
    int rc = taxi_proactor_group_run(io->group);
    if (rc < 0 && rc != TAXI_ESTOPPED) return;
  }
}

/* Dispatch in this thread until every stream, listener and timer is gone
 * (their close callbacks run here), or a pool the application supplied
 * does it. */
static void drain(taxi_io_t *io) {
  if (io->group) {
    drain_group(io);
    return;
  }
  taxi_time_t give_up = taxi_now() + 10 * TAXI_NSEC_PER_SEC;
  for (;;) {
    if (empty(io) || taxi_now() > give_up) return;
    /* A stop (ours, or the application's) must not keep us from
     * dispatching the closes. */
    if (io->reactor) taxi_reactor_restart(io->reactor);
    if (io->proactor) taxi_proactor_restart(io->proactor);
    int rc = io->drv->dispatch(io, 10);
    if (rc == TAXI_ESTOPPED) continue;
    if (rc < 0 && rc != TAXI_EBUSY) return;
    if (rc == TAXI_EBUSY) {
      /* Another thread dispatches (a supplied pool): let it finish. */
      taxi__mutex_lock(&io->lock);
      taxi__cond_timedwait(&io->cond, &io->lock,
                           taxi_now() + 10 * TAXI_NSEC_PER_MSEC);
      taxi__mutex_unlock(&io->lock);
    }
  }
}

int taxi_io_destroy(taxi_io_t *io) {
  if (!io) return TAXI_EINVAL;
  taxi__mutex_lock(&io->lock);
  if (io->running || io->destroying) {
    bool running = io->running;
    taxi__mutex_unlock(&io->lock);
    return taxi__refuse(TAXI_EBUSY, "taxi_io_destroy: io: %s",
                        running ? "a thread is in taxi_io_run (this one, if "
                                  "this is a callback of io): stop it and let "
                                  "it return first"
                                : "another thread is destroying it");
  }
  io->destroying = true;
  atomic_store(&io->ending, 1);
  taxi__mutex_unlock(&io->lock);
  taxi__resolver_close(io); /* its callbacks: TAXI_ECANCELED, below */

  /* Close everything still open.  Listeners first, so no new streams
   * come; each close is asked for under the list lock and done later (by
   * drain), so the lists may be walked safely. */
  taxi__mutex_lock(&io->lock);
  taxi_listener_t *ls[64];
  for (;;) {
    size_t n = 0;
    for (taxi_listener_t *l = io->listeners; l && n < 64; l = l->next)
      if (!l->closing) ls[n++] = l;
    taxi__mutex_unlock(&io->lock);
    for (size_t i = 0; i < n; i++) taxi_listener_close(ls[i]);
    taxi__mutex_lock(&io->lock);
    if (n < 64) break;
  }
  /* TAXI_EBADF only: closing already (its own close, an error), and
   * released by the drain below all the same. */
  for (taxi_stream_t *s = io->streams; s; s = s->next)
    (void)taxi__stream_close(s, 0);
  taxi_io_timer_t *ts[64];
  for (;;) {
    size_t n = 0;
    for (taxi_io_timer_t *t = io->timers; t && n < 64; t = t->next)
      if (!t->destroying) ts[n++] = t;
    taxi__mutex_unlock(&io->lock);
    for (size_t i = 0; i < n; i++) taxi_io_timer_destroy(ts[i]);
    taxi__mutex_lock(&io->lock);
    if (n < 64) break;
  }
  taxi__mutex_unlock(&io->lock);
  /* Our pool goes first, so that this thread may dispatch. */
  pool_destroy(io);
  drain(io);
  taxi__io_posts_cancel(io); /* those not yet run: TAXI_ECANCELED */
  taxi__resolver_release(io);

  for (int signo = 1; signo < TAXI__IO_SIGNALS; signo++)
    if (io->sig[signo].fn) taxi_io_on_signal(io, signo, NULL, NULL);
  io->drv->close(io);
  taxi__close(io->wake[1]);
  dispatcher_destroy(io);
  taxi__io_posts_fini(io);
  taxi__cond_destroy(&io->cond);
  taxi__mutex_destroy(&io->lock);
  taxi__free(io);
  return 0;
}

/* ---- lists ----------------------------------------------------------------
 */

#define LINK(head, x)             \
  do {                            \
    (x)->prev = NULL;             \
    (x)->next = (head);           \
    if (head) (head)->prev = (x); \
    (head) = (x);                 \
  } while (0)
#define UNLINK(head, x)                         \
  do {                                          \
    if ((x)->prev)                              \
      (x)->prev->next = (x)->next;              \
    else                                        \
      (head) = (x)->next;                       \
    if ((x)->next) (x)->next->prev = (x)->prev; \
    (x)->prev = (x)->next = NULL;               \
  } while (0)

int taxi__io_link_stream(taxi_io_t *io, taxi_stream_t *s) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->streams, s);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_stream(taxi_io_t *io, taxi_stream_t *s) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->streams, s);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

int taxi__io_link_listener(taxi_io_t *io, taxi_listener_t *l) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->listeners, l);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_listener(taxi_io_t *io, taxi_listener_t *l) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->listeners, l);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

int taxi__io_link_timer(taxi_io_t *io, taxi_io_timer_t *t) {
  taxi__mutex_lock(&io->lock);
  int rc = io->destroying ? TAXI_ESTOPPED : 0;
  if (rc == 0) LINK(io->timers, t);
  taxi__mutex_unlock(&io->lock);
  return rc;
}

void taxi__io_unlink_timer(taxi_io_t *io, taxi_io_timer_t *t) {
  taxi__mutex_lock(&io->lock);
  UNLINK(io->timers, t);
  taxi__cond_broadcast(&io->cond);
  taxi__mutex_unlock(&io->lock);
}

/* ---- signals --------------------------------------------------------------
 */

void taxi__io_signal(taxi_io_t *io, int signo) {
  if (signo <= 0 || signo >= TAXI__IO_SIGNALS) return;
  taxi__mutex_lock(&io->lock);
  taxi_io_signal_fn fn = io->sig[signo].fn;
  void *arg = io->sig[signo].arg;
  taxi__mutex_unlock(&io->lock);
  if (!fn) return;
  taxi__mutex_lock(&io->cb_lock); /* never beside a post (core/stream/post.c) */
  fn(io, signo, arg);
  taxi__mutex_unlock(&io->cb_lock);
}

int taxi_io_on_signal(taxi_io_t *io, int signo, taxi_io_signal_fn fn,
                      void *arg) {
  if (!io) return taxi__refuse(TAXI_EINVAL, "taxi_io_on_signal: io: NULL");
  if (signo <= 0 || signo >= TAXI__IO_SIGNALS)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_on_signal: signo: 1 to %d; got %d",
                        TAXI__IO_SIGNALS - 1, signo);
  taxi__mutex_lock(&io->lock);
  bool had = io->sig[signo].fn != NULL;
  taxi__mutex_unlock(&io->lock);
  int rc = 0;
  unsigned mark = taxi__refusals();
  if (!fn) {
    if (!had) return TAXI_ENOENT;
    rc = io->drv->remove_signal(io, signo);
  } else if (!had) {
    rc = io->drv->add_signal(io, signo);
  }
  /* The dispatcher's refusal (a signal another reactor owns) is ours. */
  rc = taxi__refuse_within(rc, mark,
                           io->proactor ? "taxi_proactor_add_signal: signo"
                                        : "taxi_reactor_add_signal: signo",
                           "taxi_io_on_signal: signo");
  if (rc < 0) return rc;
  taxi__mutex_lock(&io->lock);
  io->sig[signo].fn = fn;
  io->sig[signo].arg = fn ? arg : NULL;
  taxi__mutex_unlock(&io->lock);
  return 0;
}

/* ---- about the context ----------------------------------------------------
 */

taxi_io_dispatcher_t taxi_io_dispatcher(const taxi_io_t *io) {
  return io ? io->kind : TAXI_IO_REACTOR;
}

const char *taxi_io_backend(const taxi_io_t *io) {
  if (!io) return NULL;
  return io->proactor ? taxi_proactor_backend(io->proactor)
                      : taxi_reactor_backend(io->reactor);
}

unsigned taxi_io_threads(const taxi_io_t *io) {
  if (!io) return 0;
  /* A supplied Leader/Followers pool has what the application gave it:
   * counted now. */
  taxi_lf_stats_t st;
  if (io->lf && !io->own_lf && taxi_lf_stats(io->lf, &st) == 0)
    return st.threads;
  return io->threads;
}

taxi_reactor_t *taxi_io_reactor(const taxi_io_t *io) {
  return io ? io->reactor : NULL;
}

taxi_proactor_t *taxi_io_proactor(const taxi_io_t *io) {
  return io ? io->proactor : NULL;
}

taxi_proactor_group_t *taxi_io_proactor_group(const taxi_io_t *io) {
  return io ? io->group : NULL;
}

int taxi_io_stats(const taxi_io_t *io, taxi_io_stats_t *out) {
  if (!io || !out) return TAXI_EINVAL;
  taxi_io_t *m = (taxi_io_t *)(uintptr_t)io;
#define GET(f) out->f = atomic_load_explicit(&m->stats.f, memory_order_relaxed)
  GET(streams_opened);
  GET(streams_closed);
  GET(accepts);
  GET(accept_errors);
  GET(accept_pauses);
  GET(connects);
  GET(connect_errors);
  GET(bytes_in);
  GET(bytes_out);
  GET(reads);
  GET(writes);
  GET(writes_refused);
  GET(read_pauses);
  GET(timeouts);
  GET(timers);
#undef GET
  /* A multishot accept out of descriptors pauses inside the proactor
   * (taxi/proactor.h), and the listener never sees it fail: its pauses
   * count here too. */
  taxi_proactor_stats_t ps;
  if (m->proactor && taxi_proactor_stats(m->proactor, &ps) == 0) {
    out->accept_errors += ps.accept_pauses;
    out->accept_pauses += ps.accept_pauses;
  }
  return 0;
}
