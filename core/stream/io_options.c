/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_options.c - the I/O context's options: the defaults, reading
 * them (and the pools' options they point to), and what `threads` means
 * under each dispatcher (taxi_io_options_t.threads), each refusal with
 * its detail (core/common/detail.h).  Calls the pools' options and common;
 * nothing of the wing.
 */
#include "config.h"

#include "core/stream/io_impl.h"
#include "core/common/detail.h"
#include "core/common/options.h"

#include <string.h>

void taxi_io_options_init(taxi_io_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi__io_span_check(taxi_time_t span) {
  return span < 0 || span > TAXI_TIME_SPAN_MAX ? TAXI_EINVAL : 0;
}

/* The context's options and the pools' options they point to, read into
 * io (see core/common/options.h). */
int taxi__io_options_read(taxi_io_t *io, taxi_io_options_t *o,
                          const taxi_io_options_t *in) {
  taxi_io_options_init(o);
  taxi_lf_options_init(&io->lf_opts);
  taxi_hsha_options_init(&io->hsha_opts);
  if (taxi__options_copy(o, sizeof *o, in, sizeof *o, "taxi_io_create: options",
                         "taxi_io_options_init") < 0 ||
      taxi__options_copy(&io->lf_opts, sizeof io->lf_opts, o->lf,
                         sizeof io->lf_opts, "taxi_io_create: options.lf",
                         "taxi_lf_options_init") < 0 ||
      taxi__options_copy(&io->hsha_opts, sizeof io->hsha_opts, o->hsha,
                         sizeof io->hsha_opts, "taxi_io_create: options.hsha",
                         "taxi_hsha_options_init") < 0)
    return TAXI_EINVAL;
  o->lf = NULL;
  o->hsha = NULL;
  return 0;
}

/* The most proactors a group has (taxi/proactor_group.h). */
#define GROUP_MAX 1024u

/* A pool the application supplied: its own threads run the callbacks, so
 * `threads` may only say what they are (see taxi_io_options_t.threads). */
static int supplied_threads(taxi_io_t *io, const taxi_io_options_t *o) {
  if (o->lf_pool) {
    /* The application's (taxi_lf_spawn, taxi_lf_join) and taxi_io_run's
     * caller: counted when asked (taxi_io_threads). */
    if (o->threads)
      return taxi__refuse(TAXI_EINVAL,
                          "taxi_io_create: options.threads: the threads of "
                          "the supplied lf_pool are the application's "
                          "(taxi_lf_spawn, taxi_lf_join) and taxi_io_run's "
                          "caller: leave it 0; got %u",
                          o->threads);
    io->threads = 0;
    return 0;
  }
  taxi_hsha_stats_t st;
  int rc = taxi_hsha_stats(o->hsha_pool, &st);
  if (rc < 0)
    return taxi__refuse(rc,
                        "taxi_io_create: options.hsha_pool: not a pool "
                        "(destroyed?)");
  if (o->threads && o->threads != st.workers)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.threads: the supplied "
                        "hsha_pool runs callbacks in its %u workers; got %u",
                        st.workers, o->threads);
  io->threads = st.workers;
  return 0;
}

/* `threads` means one thing under every dispatcher (taxi/io.h): how many
 * threads run the application's callbacks, taxi_io_run's caller counted
 * when it is one of them.  Its default and limit are the dispatcher's. */
int taxi__io_one_thread_check(taxi_io_t *io, const taxi_io_options_t *o) {
  if (o->flags & ~TAXI_IO_ONE_THREAD)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.flags: 0x%x: not a "
                        "TAXI_IO_* flag",
                        o->flags & ~TAXI_IO_ONE_THREAD);
  if (!(o->flags & TAXI_IO_ONE_THREAD)) return 0;
  /* The streams' callbacks must run in the one thread that calls their
   * functions: only a dispatcher that runs them all in taxi_io_run's
   * caller. */
  bool one = io->kind == TAXI_IO_REACTOR ||
             (io->kind == TAXI_IO_PROACTOR && io->threads == 1);
  if (!one || o->lf_pool || o->hsha_pool)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.flags: TAXI_IO_ONE_THREAD "
                        "needs the callbacks in taxi_io_run's caller alone: "
                        "the reactor dispatcher, or the proactor one with "
                        "one thread and no lf_pool; got %s with %u threads",
                        taxi_io_dispatcher_name(io->kind), io->threads);
  io->one_thread = true;
  io->owner = taxi__thread_self();
  return 0;
}

int taxi__io_threads_check(taxi_io_t *io, const taxi_io_options_t *o) {
  if ((o->lf_pool &&
       (io->kind == TAXI_IO_LF || io->kind == TAXI_IO_PROACTOR)) ||
      (o->hsha_pool && io->kind == TAXI_IO_HSHA))
    return supplied_threads(io, o);
  unsigned dflt = 1, max = 1;
  const char *why = "";
  switch (io->kind) {
    case TAXI_IO_REACTOR:
      why =
          "the reactor dispatcher runs callbacks in one thread, "
          "taxi_io_run's caller";
      break;
    case TAXI_IO_LF:
      dflt = 4, max = TAXI_LF_MAX_THREADS;
      why = "a Leader/Followers pool has at most TAXI_LF_MAX_THREADS";
      break;
    case TAXI_IO_HSHA:
      dflt = 4, max = TAXI_HSHA_MAX_WORKERS;
      why = "a half-sync/half-async pool has at most TAXI_HSHA_MAX_WORKERS";
      break;
    case TAXI_IO_PROACTOR:
      max = TAXI_LF_MAX_THREADS;
      why =
          "the Leader/Followers pool over the proactor has at most "
          "TAXI_LF_MAX_THREADS";
      break;
    case TAXI_IO_PROACTORS:
      dflt = 2, max = GROUP_MAX;
      why = "a group has at most 1024 proactors, one thread each";
      break;
  }
  io->threads = o->threads ? o->threads : dflt;
  if (io->threads > max)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.threads: %s; "
                        "got %u",
                        why, io->threads);
  if (io->kind != TAXI_IO_HSHA) return 0;
  /* The pool is made when taxi_io_run starts: what it would refuse is
   * refused now.  Its workers are the threads. */
  taxi_hsha_options_t ho = io->hsha_opts;
  if (ho.workers && ho.workers != io->threads)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.hsha.workers: the "
                        "context's workers are options.threads (%u): set that, "
                        "and leave this 0; got %u",
                        io->threads, ho.workers);
  ho.workers = io->threads;
  return taxi__hsha_options_check(&ho, "taxi_io_create: options.hsha");
}
