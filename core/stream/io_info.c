/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_info.c - what a context is: the names of its dispatchers,
 * the dispatcher and threads it has, and its counters.  Calls the pools,
 * proactor and reactor for what they tell, and of the wing only the
 * lists (io_lists.c) for the streams' counters.
 */
#include "config.h"

#include "core/stream/io_impl.h"

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
  GET(timeouts);
  GET(timers);
  GET(streams_reused);
  GET(streams_allocated);
#undef GET
  /* The per-message ones: no thread adds to a context-wide counter per
   * message (see io->retired), so they are summed now. */
  taxi__io_stream_totals(m, out);
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
