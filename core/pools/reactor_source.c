/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/reactor_source.c - the reactor's dispatch steps as a
 * taxi__source_t, so that the Leader/Followers pool can run it.
 */
#include "config.h"

#include "core/pools/dispatch_source.h"
#include "core/reactor/reactor_take.h"

static bool take(void *self, taxi_time_t now, taxi__event_t *ev) {
  return taxi__reactor_take_locked(self, now, ev);
}

static unsigned run(void *self, taxi__event_t *ev) {
  return taxi__reactor_run_locked(self, ev);
}

static void untake(void *self, taxi__event_t *ev) {
  taxi__reactor_untake_locked(self, ev);
}

static int wait_for(void *self, void *buf, size_t cap, taxi_time_t deadline,
                    taxi_time_t *now) {
  return taxi__reactor_wait_locked(self, buf, cap, deadline, now);
}

static bool has_work(const void *self, taxi_time_t now) {
  return taxi__reactor_has_work_locked(self, now);
}

static size_t room(const void *self) {
  const taxi_reactor_t *r = self;
  return r->pending_cap - r->pending_count - r->pending_reserved;
}

static int attach_pool(void *self, void *pool, size_t max_waiters) {
  /* Only taxi_lf_create makes a pool over a reactor source.  Its threads
   * own a handle in user space (the handler's claim) rather than by
   * deactivating it in the kernel, so the handles whose hooks drain are
   * armed edge-triggered once, with no re-arm after each event. */
  return taxi__reactor_attach_pool_locked(self, pool, max_waiters, true,
                                          "taxi_lf_create");
}

static void detach_pool(void *self) { taxi__reactor_detach_pool_locked(self); }

static void wake_all(void *self) { taxi__reactor_wake_all_locked(self); }

static void set_sticky(void *self, bool sticky) {
  taxi_reactor_t *r = self;
  r->wake_sticky = sticky;
  if (!sticky) taxi__rwake_drain(r);
}

static size_t backlog(const void *self) {
  const taxi_reactor_t *r = self;
  return r->pending_count;
}

static const taxi__source_ops_t reactor_source_ops = {
    take,        run,         untake,   wait_for,   has_work, room,
    attach_pool, detach_pool, wake_all, set_sticky, backlog};

void taxi__reactor_source(taxi_reactor_t *r, taxi__source_t *out) {
  unsigned need = TAXI_CAP_MULTI_WAIT | TAXI_CAP_ONESHOT;
  out->ops = &reactor_source_ops;
  out->self = r;
  out->lock = &r->lock;
  out->max_events = r->max_events;
  out->buf_elem = sizeof(taxi__ready_t);
  out->multi_wait = (r->ops->caps & need) == need;
  out->stop_flag = &r->stopped;
}
