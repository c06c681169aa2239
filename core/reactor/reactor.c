/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor.c - a reactor's life: create (the backend, the
 * wake-up channel, the tables), its statistics, reopening after fork, and
 * destroy (every attached handler closed first).
 *
 * The rest of the Reactor is in the files beside this one (see the head of
 * core/reactor/reactor_impl.h for which does what).  Calls: the table
 * (reactor_table.c), timers, signals, handlers (handler.c), the wake-up
 * channel and the backends' list; common and ports.  Nothing in the wing
 * calls this file.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/alloc.h"
#include "core/reactor/reactor_backends.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/common/time_math.h"

#include <string.h>

#define DEFAULT_MAX_EVENTS 256u
#define LIMIT_MAX_EVENTS 65536u

static int open_internal_handles(taxi_reactor_t *r) {
  return taxi__rwake_open(r, taxi__reactor_token(TAXI__ROW_WAKEUP, 0));
}

void taxi_reactor_options_init(taxi_reactor_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi_reactor_create(taxi_reactor_t **out,
                        const taxi_reactor_options_t *in) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_reactor_create: out: NULL");
  *out = NULL;
  taxi_reactor_options_t o;
  taxi_reactor_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, in, sizeof o,
                         "taxi_reactor_create: options",
                         "taxi_reactor_options_init") < 0)
    return TAXI_EINVAL;
  const taxi_reactor_options_t *opts = &o;
  unsigned max_events =
      opts->max_events ? opts->max_events : DEFAULT_MAX_EVENTS;
  if (max_events > LIMIT_MAX_EVENTS)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_reactor_create: options.max_events: at most "
                        "%u; got %u",
                        LIMIT_MAX_EVENTS, max_events);
  unsigned notes_limit = opts->notify_capacity ? opts->notify_capacity
                                               : TAXI_NOTIFY_DEFAULT_CAPACITY;
  if (notes_limit > TAXI_NOTIFY_MAX_CAPACITY)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_reactor_create: options.notify_capacity: at "
                        "most TAXI_NOTIFY_MAX_CAPACITY (%u); got %u",
                        TAXI_NOTIFY_MAX_CAPACITY, notes_limit);

  taxi_reactor_t *r = taxi__calloc(1, sizeof *r);
  if (!r) return TAXI_ENOMEM;
  int rc = TAXI_ENOMEM;
  r->pending = taxi__calloc(max_events, sizeof *r->pending);
  r->wait_buf = taxi__calloc(max_events, sizeof *r->wait_buf);
  if (!r->pending || !r->wait_buf) goto fail_free;
  r->pending_cap = r->max_events = max_events;
  rc = taxi__mutex_init(&r->lock);
  if (rc < 0) goto fail_free;
  rc = taxi__backend_open(opts->backend, &r->ops, &r->backend);
  if (rc == TAXI_ENOBACKEND)
    taxi__refuse(rc,
                 "taxi_reactor_create: options.backend: \"%s\" is not a "
                 "backend compiled in that works here (see "
                 "taxi_backend_names)",
                 opts->backend ? opts->backend : "(NULL: TAXI_BACKEND or any)");
  if (rc < 0) goto fail_mutex;
  rc = open_internal_handles(r);
  if (rc < 0) goto fail_backend;
  rc = taxi__registry_add(&r->reg, TAXI__KIND_REACTOR);
  if (rc < 0) goto fail_wake;

  r->free_head = TAXI__ROW_NONE;
  taxi__handle_map_init(&r->map);
  taxi__timers_init(r);
  taxi__notify_queue_init(&r->notes);
  r->notes_limit = notes_limit;
  r->on_error = opts->on_error;
  r->on_error_arg = opts->on_error_arg;
  atomic_init(&r->stopped, false);
  atomic_init(&r->interrupted, false);
  *out = r;
  return 0;

fail_wake:
  taxi__rwake_close(r);
fail_backend:
  r->ops->close(r->backend);
fail_mutex:
  taxi__mutex_destroy(&r->lock);
fail_free:
  taxi__free(r->pending);
  taxi__free(r->wait_buf);
  taxi__free(r);
  return rc;
}

const char *taxi_reactor_backend(const taxi_reactor_t *r) {
  return r ? r->ops->name : NULL;
}

int taxi_reactor_caps(const taxi_reactor_t *r, unsigned *out) {
  if (!r || !out) return TAXI_EINVAL;
  *out = r->ops->caps;
  return 0;
}

/* ---- statistics ---------------------------------------------------------- */

int taxi_reactor_stats(const taxi_reactor_t *r, taxi_reactor_stats_t *out) {
  if (!r || !out) return TAXI_EINVAL;
  taxi_reactor_t *mr = (taxi_reactor_t *)r;
  taxi__mutex_lock(&mr->lock);
  *out = r->stats;
  taxi__mutex_unlock(&mr->lock);
  return 0;
}

/* ---- fork ---------------------------------------------------------------- */

int taxi_reactor_reinit_after_fork(taxi_reactor_t *r) {
  if (!r) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  /* Closing only releases our descriptors: the parent's set is untouched
   * (backends never deregister on close). */
  r->ops->close(r->backend);
  taxi__rwake_close(r);
  r->backend = NULL;
  r->has_owner = false;
  r->waiters = 0;
  r->pending_count = r->pending_reserved = 0;
  int rc = r->ops->open(&r->backend);
  if (rc == 0) rc = open_internal_handles(r);
  for (uint32_t row = 0; rc == 0 && row < r->nslots; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (!s->handler) continue;
    rc = r->ops->add(r->backend, s->handle,
                     taxi__reactor_token(row, s->generation), s->interest, 0);
    if (rc == 0 && (s->flags & TAXI__S_SUSPENDED))
      rc = taxi__reactor_arm_locked(r, s);
  }
  if (rc == 0) rc = taxi__signals_reinit_locked(r);
  /* Queued notifications were posted before fork; make sure they run. */
  taxi__mutex_unlock(&r->lock);
  return rc;
}

/* ---- destruction --------------------------------------------------------- */

/* Detach every attached handler.  The lock is released while close hooks
 * run, and they may attach or detach others, so take the list's head each
 * time until it is empty. */
static void detach_all_locked(taxi_reactor_t *r) {
  taxi_handler_t *h;
  while ((h = r->attached) != NULL) {
    /* A handler referenced elsewhere outlives the reactor: its last unref
     * closes it without a reactor to lock. */
    bool outlives = h->internal_.refs > 1;
    if (taxi__reactor_detach_locked(r, h) < 0) {
      /* Its state was overwritten while attached (taxi_handler_init
       * refuses that, a memset does not): drop it from the list rather
       * than take it for ever as the list's head. */
      taxi__reactor_unlink_locked(r, h);
      continue;
    }
    if (outlives) taxi__handler_set_reactor(h, NULL);
  }
}

int taxi_reactor_destroy(taxi_reactor_t *r) {
  if (!r) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  if (r->has_owner || r->pool) {
    bool pool = r->pool != NULL;
    taxi__mutex_unlock(&r->lock);
    return taxi__refuse(TAXI_EBUSY,
                        pool ? "taxi_reactor_destroy: r: a thread pool "
                               "dispatches it: destroy the pool first"
                             : "taxi_reactor_destroy: r: a thread is "
                               "dispatching it (or this is one of its "
                               "hooks): stop it and let it return first");
  }
  detach_all_locked(r);
  taxi__mutex_unlock(&r->lock);
  /* No taxi_handler_init finds it from now on; one that did is done with
   * its lock before the memory goes. */
  taxi__registry_remove(&r->reg, TAXI__KIND_REACTOR);
  while (atomic_load(&r->reg.pins) > 0) taxi__sleep(TAXI_NSEC_PER_MSEC / 10);

  taxi__signals_destroy(r);
  r->ops->close(r->backend);
  taxi__rwake_close(r);
  taxi__handle_map_destroy(&r->map);
  taxi__timer_heap_destroy(&r->timers);
  taxi__notify_queue_destroy(&r->notes);
  taxi__mutex_destroy(&r->lock);
  taxi__free(r->slots);
  taxi__free(r->pending);
  taxi__free(r->wait_buf);
  taxi__free(r->scratch);
  taxi__free(r);
  return 0;
}
