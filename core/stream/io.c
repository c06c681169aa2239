/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io.c - a context's creation and destruction: the dispatcher
 * it makes or was given, its driver, its Leader/Followers pool; and at
 * the end, closing what is still open and dispatching until it is gone.
 *
 * Every use of the other objects' create and destroy calls is in this
 * file (dispatcher_create, pool_create), so that renaming them is a change
 * here only.  The top of the wing: calls io_options.c, post.c, io_run.c,
 * io_signal.c and io_info.c, the driver through its table, and what is
 * left on the context's lists through their ops' close hooks, never
 * stream.c, listener.c or io_timer.c by name.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/stream/dgram_impl.h"

#include <string.h>

/* ---- creating -------------------------------------------------------------
 */

/* The pool of the proactors the context makes, for its streams' pooled
 * reads (core/stream/io_pooled.c): buffers of a page, which a small
 * stream's buffer (examples/echo_server's 4 KiB) holds too, a few to
 * start with, doubled by the proactor while reads find none free.  Every
 * stream reading may hold one at once, so the cap is the most the
 * proactor allows (32,768 buffers, 128 MiB, only ever reached by that
 * many arrivals at once): a cap below the streams a server keeps left the
 * rest waiting for buffers, arrival after arrival.  Only where io_uring
 * may be chosen: elsewhere the streams read into their own buffers, and a
 * pool would be memory for nothing. */
#define POOL_SIZE 4096u
#define POOL_COUNT 64u
#define POOL_MAX 32768u

static void pool_options(taxi_io_t *io, taxi_proactor_options_t *po) {
  if (po->backend && strncmp(po->backend, "uring", 5) != 0) return;
  po->buffer_size = POOL_SIZE;
  po->buffer_count = POOL_COUNT;
  po->buffer_max = POOL_MAX;
  io->pool_size = POOL_SIZE;
}

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
  po.on_error = taxi__io_on_error;
  po.on_error_arg = io;
  pool_options(io, &po);
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
  const char *name = taxi_io_dispatcher_name(io->kind);
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
    po.on_error = taxi__io_on_error;
    po.on_error_arg = io;
    /* One dispatching thread: the proactor is that thread's alone (on
     * io_uring, a ring it owns; taxi/proactor.h). */
    if (io->threads <= 1) po.flags |= TAXI_PROACTOR_ONE_THREAD;
    pool_options(io, &po);
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
  ro.on_error = taxi__io_on_error;
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

static const taxi__io_ops_t io_ops = {taxi__io_woken, taxi__io_signal};

int taxi_io_create(taxi_io_t **out, const taxi_io_options_t *opts) {
  taxi_io_options_t o;
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_io_create: out: NULL");
  taxi_io_t *io = taxi__calloc(1, sizeof *io);
  if (!io) return TAXI_ENOMEM;
  int rc = taxi__io_options_read(io, &o, opts);
  if (rc == 0 && !taxi_io_dispatcher_name(o.dispatcher))
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
   * learns that a pool stopped by itself (taxi__io_on_error, io_run.c). */
  if (!io->lf_opts.on_error) {
    io->lf_opts.on_error = taxi__io_on_error;
    io->lf_opts.on_error_arg = io;
  }
  io->hsha_on_error = io->hsha_opts.on_error;
  io->hsha_on_error_arg = io->hsha_opts.on_error_arg;
  io->hsha_opts.on_error =
      io->hsha_on_error ? taxi__io_hsha_on_error : taxi__io_on_error;
  io->hsha_opts.on_error_arg = io;
  io->lf = o.lf_pool;
  io->hsha = o.hsha_pool;
  io->wake[0] = io->wake[1] = TAXI_INVALID_HANDLE;
  atomic_init(&io->stop_requested, 0);
  atomic_init(&io->wake_pending, 0);
  atomic_init(&io->hsha_live, o.hsha_pool);
  /* What the driver reports of the context: io_run.c, io_signal.c. */
  io->ops = &io_ops;
  rc = taxi__io_threads_check(io, &o);
  if (rc == 0) rc = taxi__io_one_thread_check(io, &o);
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

/* ---- destroying -----------------------------------------------------------
 */

static bool empty(taxi_io_t *io) {
  taxi__mutex_lock(&io->lock);
  bool e = !io->streams && !io->listeners && !io->timers && !io->dgrams;
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
  /* The close callbacks run here, and the streams take no lock. */
  if (taxi__io_foreign(io))
    return taxi__stream_refuse_foreign("taxi_io_destroy");
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

  /* Close everything still open, each through the close hook of its ops
   * record (this file knows no kind of object).  Listeners first, so no
   * new streams come; each close is asked for under the list lock and done
   * later (by drain), so the lists may be walked safely. */
  taxi__mutex_lock(&io->lock);
  taxi_listener_t *ls[64];
  for (;;) {
    size_t n = 0;
    for (taxi_listener_t *l = io->listeners; l && n < 64; l = l->next)
      if (!l->closing) ls[n++] = l;
    taxi__mutex_unlock(&io->lock);
    for (size_t i = 0; i < n; i++) (void)ls[i]->ops->close(ls[i]);
    taxi__mutex_lock(&io->lock);
    if (n < 64) break;
  }
  /* TAXI_EBADF only: closing already (its own close, an error), and
   * released by the drain below all the same. */
  for (taxi_stream_t *s = io->streams; s; s = s->next)
    (void)s->ops->close(s, 0);
  taxi_dgram_t *ds[64];
  for (;;) {
    size_t n = 0;
    for (taxi_dgram_t *d = io->dgrams; d && n < 64; d = d->next)
      if (!d->closing) ds[n++] = d;
    taxi__mutex_unlock(&io->lock);
    for (size_t i = 0; i < n; i++) (void)ds[i]->ops->close(ds[i]);
    taxi__mutex_lock(&io->lock);
    if (n < 64) break;
  }
  taxi_io_timer_t *ts[64];
  for (;;) {
    size_t n = 0;
    for (taxi_io_timer_t *t = io->timers; t && n < 64; t = t->next)
      if (!t->destroying) ts[n++] = t;
    taxi__mutex_unlock(&io->lock);
    for (size_t i = 0; i < n; i++) (void)ts[i]->ops->close(ts[i]);
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
  taxi__io_spares_free(io);
  taxi__cond_destroy(&io->cond);
  taxi__mutex_destroy(&io->lock);
  taxi__free(io);
  return 0;
}
