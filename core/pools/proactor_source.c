/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/proactor_source.c - the proactor's completion queue as a
 * taxi__source_t, so that the Leader/Followers pool (core/pools/lf_pool.c) can
 * dispatch it: the leader waits on the backend, what it reaps is processed
 * into the completion queue, it promotes a follower and runs one handler;
 * the others take the rest of the queue without a system call.
 */
#include "config.h"

#include "core/pools/dispatch_source.h"
#include "core/common/detail.h"
#include "core/proactor/proactor_impl.h"

static bool take(void *self, taxi_time_t now, taxi__event_t *ev) {
  return taxi__proactor_take_locked(self, now, ev);
}

static unsigned run(void *self, taxi__event_t *ev) {
  return taxi__proactor_run_locked(self, ev);
}

static void untake(void *self, taxi__event_t *ev) {
  taxi__proactor_untake_locked(self, ev);
}

static int wait_for(void *self, void *buf, size_t cap, taxi_time_t deadline,
                    taxi_time_t *now) {
  return taxi__proactor_wait_locked(self, buf, cap, deadline, now);
}

static bool has_work(const void *self, taxi_time_t now) {
  return taxi__proactor_has_work_locked(self, now);
}

/* Each waiter reaps into a buffer of its own: there is always room. */
static size_t room(const void *self) {
  const taxi_proactor_t *p = self;
  return p->max_events;
}

static int attach_pool(void *self, void *pool, size_t max_waiters) {
  taxi_proactor_t *p = self;
  (void)max_waiters; /* the completion queue is intrusive: no room to grow */
  /* A ONE_THREAD proactor belongs to one dispatching thread (its ring
   * may refuse any other): a pool's threads take turns. */
  if (p->pool)
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_lf_create_proactor: p: another pool "
                        "dispatches this proactor");
  if (p->has_owner)
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_lf_create_proactor: p: a thread is dispatching "
                        "this proactor (taxi_proactor_run, _handle_events)");
  if (p->flags & TAXI_PROACTOR_ONE_THREAD)
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_lf_create_proactor: p: made with "
                        "TAXI_PROACTOR_ONE_THREAD, for one dispatching "
                        "thread, not a pool's");
  if (p->destroying) return TAXI_ESTOPPED;
  p->pool = pool;
  return 0;
}

static void detach_pool(void *self) {
  taxi_proactor_t *p = self;
  p->pool = NULL;
}

static void wake_all(void *self) {
  taxi_proactor_t *p = self;
  p->ops->wake(p->backend, 1);
}

static void set_sticky(void *self, bool sticky) {
  taxi_proactor_t *p = self;
  p->sticky = sticky;
}

/* Completions never drain a handle (taxi__event_t.drains): the pool
 * promotes for them as has_work says, and needs no count. */
static size_t backlog(const void *self) {
  (void)self;
  return 0;
}

static const taxi__source_ops_t proactor_source_ops = {
    take,        run,         untake,   wait_for,   has_work, room,
    attach_pool, detach_pool, wake_all, set_sticky, backlog};

static void proactor_source(taxi_proactor_t *p, taxi__source_t *out) {
  out->ops = &proactor_source_ops;
  out->self = p;
  out->lock = &p->lock;
  out->max_events = p->max_events;
  out->buf_elem = sizeof(taxi__completion_t);
  out->multi_wait = (p->ops->caps & TAXI__PCAP_MULTI_WAIT) != 0;
  out->stop_flag = &p->stopped;
}

int taxi_lf_create_proactor(taxi_lf_pool_t **out, taxi_proactor_t *p,
                            const taxi_lf_options_t *opts) {
  if (!out || !p)
    return taxi__refuse(TAXI_EINVAL, "taxi_lf_create_proactor: %s: NULL",
                        !out ? "out" : "p");
  taxi__source_t src;
  proactor_source(p, &src);
  return taxi__lf_create_source(out, &src, opts, "taxi_lf_create_proactor");
}
