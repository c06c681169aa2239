/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor.c - the Reactor: demultiplexing table, timers,
 * notification and the dispatch loop, over one readiness backend.
 *
 * Dispatch is split in three steps so that thread pools can interleave
 * their own protocol between them: wait (backend call, lock released),
 * take (under the lock: pick one ready event, reference its handler) and
 * dispatch (lock released: run the hook, then release the reference).
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/reactor/reactor_closing.h"
#include "backends/completion.h"
#include "core/common/alloc.h"
#include "core/reactor/reactor_backends.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/common/time_math.h"

#include <inttypes.h>
#include <string.h>

#define DEFAULT_MAX_EVENTS 256u
#define LIMIT_MAX_EVENTS 65536u

static uint64_t make_token(uint32_t row, uint32_t generation) {
  return taxi__reactor_token(row, generation);
}

void taxi__reactor_wake_locked(taxi_reactor_t *r) {
  if (!r->waiters) return;
  if (taxi__rwake_signal(r) > 0) r->stats.wakeups++;
}

void taxi__reactor_wake_all_locked(taxi_reactor_t *r) {
  /* Each waiter that sees the channel while it is sticky passes the
   * wake-up on (take_io_locked), so one write reaches them all. */
  if (taxi__rwake_force(r) > 0) r->stats.wakeups++;
}

static unsigned arm_flags(const taxi_reactor_t *r) {
  return taxi__reactor_arm_flags(r);
}

/* Backends without live update wait on a snapshot of their set: after a
 * change made by another thread, the waiter must look again. */
static void set_changed_locked(taxi_reactor_t *r) {
  if (!(r->ops->caps & TAXI_CAP_LIVE_UPDATE)) taxi__reactor_wake_locked(r);
}

/* ---- creation ---------------------------------------------------------- */

/* The timer heap's view of taxi_timer_t: by deadline, then as scheduled. */
static bool timer_before(const void *a, const void *b) {
  const taxi_timer_t *x = a, *y = b;
  if (x->internal_.deadline != y->internal_.deadline)
    return x->internal_.deadline < y->internal_.deadline;
  return x->internal_.seq < y->internal_.seq;
}

static size_t *timer_index(void *t) {
  return &((taxi_timer_t *)t)->internal_.heap_index;
}

static const taxi__timer_heap_ops_t timer_heap_ops = {timer_before,
                                                      timer_index};

static int open_internal_handles(taxi_reactor_t *r) {
  return taxi__rwake_open(r, make_token(TAXI__ROW_WAKEUP, 0));
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
  taxi__timer_heap_init(&r->timers, &timer_heap_ops);
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

/* ---- the demultiplexing table ------------------------------------------ */

static int slot_alloc_locked(taxi_reactor_t *r, uint32_t *row) {
  if (r->free_head != TAXI__ROW_NONE) {
    *row = r->free_head;
    r->free_head = r->slots[*row].next_free;
    return 0;
  }
  if (r->nslots == r->slots_cap) {
    if (r->slots_cap >= TAXI__ROW_NONE / 2) return TAXI_ETOOMANY;
    uint32_t ncap = r->slots_cap ? r->slots_cap * 2 : 64;
    taxi__slot_t *s = taxi__reallocarray(r->slots, ncap, sizeof *s);
    if (!s) return TAXI_ENOMEM;
    r->slots = s;
    r->slots_cap = ncap;
  }
  *row = r->nslots++;
  r->slots[*row].generation = 1;
  return 0;
}

static void slot_free_locked(taxi_reactor_t *r, uint32_t row) {
  taxi__slot_t *s = &r->slots[row];
  if (s->flags & TAXI__S_REARM) r->rearm_pending--;
  if (s->flags & TAXI__S_UNCHECKED) r->unchecked--;
  s->handler = NULL;
  s->handle = TAXI_INVALID_HANDLE;
  s->generation++; /* outstanding tokens for this row are now stale */
  s->flags = 0;
  s->interest = 0;
  s->move_to = NULL;
  s->next_free = r->free_head;
  r->free_head = row;
}

static bool valid_interest(unsigned events) {
  return events && !(events & ~TAXI_EV_INTEREST);
}

static void link_attached_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  h->internal_.prev = NULL;
  h->internal_.next = r->attached;
  if (r->attached) r->attached->internal_.prev = h;
  r->attached = h;
}

int taxi__reactor_attach_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (h->internal_.flags & TAXI__H_CLOSING) return TAXI_EBUSY;
  if (h->internal_.flags & TAXI__H_ATTACHED)
    return h->internal_.reactor == r ? 0 : TAXI_EINVAL;
  taxi__handler_set_reactor(h, r);
  h->internal_.flags |= TAXI__H_ATTACHED;
  h->internal_.refs++;
  link_attached_locked(r, h);
  return 0;
}

static void unlink_attached_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (h->internal_.prev)
    h->internal_.prev->internal_.next = h->internal_.next;
  else
    r->attached = h->internal_.next;
  if (h->internal_.next) h->internal_.next->internal_.prev = h->internal_.prev;
  h->internal_.prev = h->internal_.next = NULL;
}

/* The handler is attached to r and not closing. */
static bool attached_here(const taxi_reactor_t *r, const taxi_handler_t *h) {
  return (h->internal_.flags & TAXI__H_ATTACHED) &&
         !(h->internal_.flags & TAXI__H_CLOSING) && h->internal_.reactor == r;
}

/* How a handle is registered, beside its interest. */
typedef struct reg_how {
  unsigned add_flags;  /* TAXI__ARM_OPEN or 0 */
  unsigned slot_flags; /* TAXI__S_OWNED, TAXI__S_IDENT or 0 */
  uint64_t ident;      /* with TAXI__S_IDENT */
} reg_how_t;

static int register_locked(taxi_reactor_t *r, taxi_handle_t handle,
                           taxi_handler_t *h, unsigned events,
                           const reg_how_t *how);

/* taxi_reactor_register; add_flags: TAXI__ARM_OPEN or 0; own: the library
 * serves the handle with hooks that never close it. */
static int register_handle(taxi_reactor_t *r, taxi_handle_t handle,
                           taxi_handler_t *h, unsigned events,
                           unsigned add_flags, bool own) {
  if (!r || !h || !h->ops || !valid_interest(events)) return TAXI_EINVAL;
  if (handle == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  int rc = 0;
  if ((events & TAXI_EV_EXCEPT) && !(r->ops->caps & TAXI_CAP_EXCEPT))
    rc = TAXI_ENOTSUP;
  reg_how_t how = {add_flags, own ? TAXI__S_OWNED : 0, 0};
  if (rc == 0 && !own && taxi__closed_by_identity(r)) {
    /* What an application's handle names, to tell later whether it was
     * closed under the reactor (core/reactor/reactor_closed.c).  It proves the
     * handle open, so the backend's own check is skipped: no system call
     * more than before. */
    rc = taxi__handle_identity(handle, &how.ident);
    how.slot_flags |= TAXI__S_IDENT;
    how.add_flags |= TAXI__ARM_OPEN;
  }
  if (rc == 0) {
    taxi__mutex_lock(&r->lock);
    rc = register_locked(r, handle, h, events, &how);
    /* The number may be held by a handler whose handle was closed under
     * the reactor and not found out yet: then this one takes it. */
    while (rc == TAXI_EEXIST && taxi__closed_evict_locked(r, handle, h))
      rc = register_locked(r, handle, h, events, &how);
    taxi__mutex_unlock(&r->lock);
  }
  if (rc == TAXI_EBUSY)
    taxi__refuse(rc,
                 "taxi_reactor_register: h: closing (removed, its close hook "
                 "not yet run); wait for the close hook");
  /* A closed handle is TAXI_EBADF whatever else is wrong.  The check is
   * made only on failure: where it succeeds, every backend's add has
   * found the handle open (the kernel's epoll_ctl or kevent, or the
   * backend's own check where its mechanism would notice only later),
   * and a registration per connection need not cost a system call more. */
  if (rc < 0 && rc != TAXI_EBADF && taxi__handle_check(handle) < 0)
    rc = TAXI_EBADF;
  return rc;
}

int taxi_reactor_register(taxi_reactor_t *r, taxi_handle_t handle,
                          taxi_handler_t *h, unsigned events) {
  return register_handle(r, handle, h, events, 0, false);
}

int taxi__reactor_register_open(taxi_reactor_t *r, taxi_handle_t handle,
                                taxi_handler_t *h, unsigned events) {
  return register_handle(r, handle, h, events, TAXI__ARM_OPEN, true);
}

int taxi__reactor_register_own(taxi_reactor_t *r, taxi_handle_t handle,
                               taxi_handler_t *h, unsigned events) {
  return register_handle(r, handle, h, events, 0, true);
}

/* The table part of registration (arguments checked).  r->lock held. */
static int register_locked(taxi_reactor_t *r, taxi_handle_t handle,
                           taxi_handler_t *h, unsigned events,
                           const reg_how_t *how) {
  uint32_t row;
  if (h->internal_.flags & TAXI__H_CLOSING) return TAXI_EBUSY;
  if ((h->internal_.flags & TAXI__H_ATTACHED) && h->internal_.reactor != r)
    return TAXI_EINVAL;
  if ((h->internal_.flags & TAXI__H_HAS_HANDLE) ||
      taxi__handle_map_get(&r->map, handle, &row) == 0)
    return TAXI_EEXIST;
  int rc = slot_alloc_locked(r, &row);
  if (rc < 0) return rc;

  rc = taxi__handle_map_put(&r->map, handle, row);
  if (rc < 0) {
    slot_free_locked(r, row);
    return rc;
  }
  taxi__slot_t *s = &r->slots[row];
  rc = r->ops->add(r->backend, handle, make_token(row, s->generation), events,
                   arm_flags(r) | how->add_flags);
  if (rc < 0) {
    taxi__handle_map_del(&r->map, handle);
    slot_free_locked(r, row);
    return rc;
  }
  s->handler = h;
  s->handle = handle;
  s->interest = events;
  s->flags = TAXI__S_ARMED | how->slot_flags;
  s->move_to = NULL;
  s->error = 0;
  s->ident = how->ident;
  taxi__reactor_attach_locked(r, h); /* cannot fail: checked above */
  h->internal_.handle = handle;
  h->internal_.slot = row;
  h->internal_.flags |= TAXI__H_HAS_HANDLE;
  r->stats.handles++;
  set_changed_locked(r);
  return 0;
}

/* The slot of h's registered handle in r, or NULL. */
static taxi__slot_t *slot_of(taxi_reactor_t *r, taxi_handler_t *h) {
  if (!attached_here(r, h) || !(h->internal_.flags & TAXI__H_HAS_HANDLE))
    return NULL;
  return &r->slots[h->internal_.slot];
}

/* Tell the backend what s should report now.  In pool mode a handle whose
 * hooks are running stays deactivated: it is re-armed, with whatever its
 * state is then, when they return. */
static int arm_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  if (r->pool && (s->flags & TAXI__S_BUSY)) return 0;
  unsigned events = (s->flags & TAXI__S_SUSPENDED) ? 0 : s->interest;
  uint32_t row = (uint32_t)(s - r->slots);
  int rc = r->ops->modify(r->backend, s->handle, make_token(row, s->generation),
                          events, arm_flags(r));
  if (rc < 0) return rc;
  if (events)
    s->flags |= TAXI__S_ARMED;
  else
    s->flags &= ~TAXI__S_ARMED;
  if (s->flags & TAXI__S_REARM) {
    s->flags &= ~TAXI__S_REARM;
    r->rearm_pending--;
  }
  set_changed_locked(r);
  return 0;
}

/* The backend would not re-arm s (after a hook, or when the pool took the
 * reactor over).  Nothing may be done about it here: the callers hold
 * state the application's hooks must not see half-changed, so the slot is
 * flagged and the next wait retries it (retry_rearms_locked), with a pause
 * that grows while the failures go on, and removes the handler if they
 * never stop.  Waiters come back to take the retry into account. */
static void rearm_later_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  r->stats.transient_errors++;
  if (s->flags & TAXI__S_REARM) return;
  s->flags |= TAXI__S_REARM;
  if (r->rearm_pending++ == 0) r->rearm_due = taxi_now();
  taxi__reactor_wake_locked(r);
}

/* arm_locked, for the callers that cannot give the failure back. */
static void arm_or_retry_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  if (arm_locked(r, s) < 0) rearm_later_locked(r, s);
}

int taxi_reactor_modify(taxi_reactor_t *r, taxi_handler_t *h, unsigned events) {
  if (!r || !h || !valid_interest(events)) return TAXI_EINVAL;
  if ((events & TAXI_EV_EXCEPT) && !(r->ops->caps & TAXI_CAP_EXCEPT))
    return TAXI_ENOTSUP;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  taxi__slot_t *s = slot_of(r, h);
  if (s) {
    uint32_t old = s->interest;
    s->interest = events;
    rc = arm_locked(r, s);
    if (rc < 0) s->interest = old;
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

static int set_suspended(taxi_reactor_t *r, taxi_handler_t *h, bool on) {
  if (!r || !h) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  taxi__slot_t *s = slot_of(r, h);
  if (s) {
    rc = 0;
    if (!!(s->flags & TAXI__S_SUSPENDED) != on) {
      s->flags ^= TAXI__S_SUSPENDED;
      rc = arm_locked(r, s);
      if (rc < 0) s->flags ^= TAXI__S_SUSPENDED;
    }
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi_reactor_suspend(taxi_reactor_t *r, taxi_handler_t *h) {
  return set_suspended(r, h, true);
}

int taxi_reactor_resume(taxi_reactor_t *r, taxi_handler_t *h) {
  return set_suspended(r, h, false);
}

/* ---- timers ------------------------------------------------------------ */

static void timer_link(taxi_handler_t *h, taxi_timer_t *t) {
  t->internal_.prev = NULL;
  t->internal_.next = h->internal_.timers;
  if (h->internal_.timers) h->internal_.timers->internal_.prev = t;
  h->internal_.timers = t;
}

static void timer_unlink(taxi_timer_t *t) {
  taxi_handler_t *h = t->internal_.handler;
  if (t->internal_.prev)
    t->internal_.prev->internal_.next = t->internal_.next;
  else
    h->internal_.timers = t->internal_.next;
  if (t->internal_.next) t->internal_.next->internal_.prev = t->internal_.prev;
  t->internal_.prev = t->internal_.next = NULL;
}

/* Disarm t: out of the heap and the handler's list.  A firing timer is only
 * marked, so that its hook's return does not re-arm it. */
static void timer_cancel_locked(taxi_reactor_t *r, taxi_timer_t *t) {
  if (t->internal_.state == TAXI__T_ARMED)
    taxi__timer_heap_remove(&r->timers, t);
  if (t->internal_.state != TAXI__T_IDLE) timer_unlink(t);
  t->internal_.state = TAXI__T_IDLE;
}

static void timer_arm_locked(taxi_reactor_t *r, taxi_timer_t *t,
                             taxi_time_t deadline) {
  t->internal_.deadline = deadline;
  t->internal_.seq = r->timer_seq++;
  taxi__timer_heap_push(&r->timers, t);
  t->internal_.state = TAXI__T_ARMED;
  if (r->waiters && deadline < r->waiters_deadline)
    taxi__reactor_wake_locked(r);
}

int taxi_reactor_schedule(taxi_reactor_t *r, taxi_timer_t *t, taxi_handler_t *h,
                          taxi_time_t delay, taxi_time_t period, void *act) {
  if (!r || !t || !h || !h->ops || !h->ops->timeout)
    return taxi__refuse(TAXI_EINVAL, "taxi_reactor_schedule: %s: NULL",
                        !r   ? "r"
                        : !t ? "t"
                        : !h ? "h"
                             : "h->ops->timeout");
  if (delay < 0 || delay > TAXI_TIME_SPAN_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_reactor_schedule: delay: 0 to "
                        "TAXI_TIME_SPAN_MAX ns; got %" PRId64,
                        (int64_t)delay);
  if (period < 0 || period > TAXI_TIME_SPAN_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_reactor_schedule: period: 0 to "
                        "TAXI_TIME_SPAN_MAX ns; got %" PRId64,
                        (int64_t)period);
  taxi_time_t now = taxi_now();

  taxi__mutex_lock(&r->lock);
  int rc = 0;
  if (t->internal_.state != TAXI__T_IDLE && t->internal_.handler &&
      t->internal_.handler->internal_.reactor != r) {
    rc = taxi__refuse(TAXI_EINVAL,
                      "taxi_reactor_schedule: t: armed on another reactor");
    goto out;
  }
  if (t->internal_.state != TAXI__T_ARMED) {
    /* A firing timer's place in the heap may have been taken meanwhile. */
    rc = taxi__timer_heap_reserve(&r->timers);
    if (rc < 0) goto out;
  }
  rc = taxi__reactor_attach_locked(r, h);
  if (rc < 0) {
    taxi__refuse(rc, rc == TAXI_EBUSY
                         ? "taxi_reactor_schedule: h: closing (removed, its "
                           "close hook not yet run)"
                         : "taxi_reactor_schedule: h: attached to another "
                           "reactor");
    goto out;
  }
  /* Rescheduling moves the timer, possibly to another handler. */
  timer_cancel_locked(r, t);
  t->internal_.handler = h;
  t->internal_.act = act;
  t->internal_.period = period;
  timer_link(h, t);
  timer_arm_locked(r, t, taxi__time_add(now, delay));
out:
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi_reactor_cancel(taxi_reactor_t *r, taxi_timer_t *t) {
  if (!r || !t) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  if (t->internal_.state != TAXI__T_IDLE &&
      t->internal_.handler->internal_.reactor == r) {
    timer_cancel_locked(r, t);
    rc = 0;
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

/* Whether t is still in the firing `seq` that was taken for dispatch.  A
 * timer scheduled again while that firing waited or ran is armed anew
 * (another seq), and may have been taken again already: FIRING then
 * belongs to the newer firing, which the older must neither cancel nor
 * drop, or the schedule made meanwhile would be lost. */
static bool timer_firing(const taxi_timer_t *t, uint64_t seq) {
  return t->internal_.state == TAXI__T_FIRING && t->internal_.seq == seq;
}

/* After a timer hook returned: re-arm a periodic timer unless the hook (or
 * another thread) cancelled or rescheduled it meanwhile. */
static void timer_fired_locked(taxi_reactor_t *r, taxi_timer_t *t, uint64_t seq,
                               int rc) {
  if (!timer_firing(t, seq)) return;
  if (rc < 0 || t->internal_.period == 0 ||
      taxi__timer_heap_reserve(&r->timers) < 0) {
    timer_cancel_locked(r, t);
    return;
  }
  /* Keep the original cadence; skip periods missed while we were late
   * rather than firing them in a burst. */
  taxi_time_t period = t->internal_.period;
  taxi_time_t next = taxi__time_add(t->internal_.deadline, period);
  taxi_time_t now = taxi_now();
  if (next <= now) {
    /* Both spans are at most TAXI_TIME_SPAN_MAX, so the product fits. */
    taxi_time_t missed = (now - next) / period + 1;
    next = taxi__time_add(next, missed * period);
  }
  timer_arm_locked(r, t, next);
}

/* ---- removal and close --------------------------------------------------- */

/* Whether the close of a handle, which its owner vouches is the last
 * descriptor of its socket, deregisters it so that del may be skipped.
 * The backend's registrations must die with the socket (epoll's do: they
 * belong to the open file description, epoll(7)), and the handle must be
 * armed one-shot (pool mode), because until the close - after the hooks
 * running in other threads return - and in a copy that fork(2) made
 * meanwhile, the registration lives on: one-shot, it is reported at most
 * once, with a token whose row's generation has moved on, dropped as
 * stale like a report another thread collected before the removal. */
static bool close_ends_registration(const taxi_reactor_t *r,
                                    const taxi__slot_t *s) {
  return (r->ops->ext & TAXI__EXT_CLOSE_DEREGISTERS) && arm_flags(r) &&
         !(s->flags & TAXI__S_REARM);
}

/* Stop watching h's handle and free its row; `closing`: the caller closes
 * the handle next, see taxi__reactor_remove_closing. */
static void deregister_locked(taxi_reactor_t *r, taxi_handler_t *h,
                              bool closing) {
  if (!(h->internal_.flags & TAXI__H_HAS_HANDLE)) return;
  if (!closing || !close_ends_registration(r, &r->slots[h->internal_.slot]))
    r->ops->del(r->backend, h->internal_.handle);
  taxi__handle_map_del(&r->map, h->internal_.handle);
  slot_free_locked(r, h->internal_.slot);
  r->stats.handles--;
  h->internal_.flags &= ~TAXI__H_HAS_HANDLE;
  set_changed_locked(r);
}

static int detach_locked(taxi_reactor_t *r, taxi_handler_t *h, bool closing) {
  if (!attached_here(r, h)) return TAXI_ENOENT;
  deregister_locked(r, h, closing);
  while (h->internal_.timers) timer_cancel_locked(r, h->internal_.timers);
  if (h->internal_.signals) taxi__signals_detach_handler_locked(r, h);
  unlink_attached_locked(r, h);
  h->internal_.flags |= TAXI__H_CLOSING;
  taxi__handler_release_locked(r, h);
  return 0;
}

int taxi__reactor_detach_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  return detach_locked(r, h, false);
}

void taxi__handler_release_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (--h->internal_.refs > 0 || !(h->internal_.flags & TAXI__H_CLOSING))
    return;
  /* Last reference of a removed handler: forget it, then close.  After the
   * close hook taxi must not touch h: it may be freed or attached again. */
  void (*close_hook)(taxi_handler_t *, taxi_handle_t) = h->ops->close;
  taxi_handle_t handle = h->internal_.handle;
  taxi__handler_set_reactor(h, NULL);
  h->internal_.flags = 0;
  h->internal_.handle = TAXI_INVALID_HANDLE;
  if (close_hook) {
    taxi__mutex_unlock(&r->lock);
    close_hook(h, handle);
    taxi__mutex_lock(&r->lock);
  }
}

int taxi_reactor_remove(taxi_reactor_t *r, taxi_handler_t *h) {
  if (!r || !h) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = taxi__reactor_detach_locked(r, h);
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi__reactor_remove_closing(taxi_reactor_t *r, taxi_handler_t *h) {
  taxi__mutex_lock(&r->lock);
  int rc = detach_locked(r, h, true);
  taxi__mutex_unlock(&r->lock);
  return rc;
}

/* ---- notification and stop ---------------------------------------------- */

int taxi_reactor_notify(taxi_reactor_t *r, void (*fn)(void *), void *arg) {
  if (!r || !fn) return TAXI_EINVAL;
  taxi__notification_t n = {fn, arg};
  taxi__mutex_lock(&r->lock);
  /* Those popped and still running count too: their room stays taken. */
  int rc = r->notes.count + r->notes.taken >= r->notes_limit
               ? TAXI_EAGAIN
               : taxi__notify_queue_push(&r->notes, n);
  if (rc == 0) taxi__reactor_wake_locked(r);
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi_reactor_stop(taxi_reactor_t *r) {
  if (!r) return TAXI_EINVAL;
  /* No lock, only atomics and one write: callable from a signal handler.
   * The channel is written whether or not a thread waits now, and even if
   * a wake-up seems pending already (it may be one a waiter is taking):
   * a thread about to wait then returns at once and sees the stop; if none
   * comes, the next wait drains a stale wake-up and goes on. */
  atomic_store(&r->stopped, true);
  int rc = taxi__rwake_force(r);
  return rc < 0 ? rc : 0;
}

int taxi__reactor_interrupt(taxi_reactor_t *r) {
  atomic_store(&r->interrupted, true);
  int rc = taxi__rwake_signal(r);
  return rc < 0 ? rc : 0;
}

int taxi_reactor_restart(taxi_reactor_t *r) {
  if (!r) return TAXI_EINVAL;
  atomic_store(&r->stopped, false);
  return 0;
}

int taxi_reactor_stopped(const taxi_reactor_t *r) {
  return r ? atomic_load(&((taxi_reactor_t *)r)->stopped) : 0;
}

/* ---- take and dispatch --------------------------------------------------- */

/* The live row a token names, or NULL if the handle was removed since. */
static taxi__slot_t *slot_for_token(taxi_reactor_t *r, uint64_t token) {
  uint32_t row = (uint32_t)token;
  taxi__slot_t *s = row < r->nslots ? &r->slots[row] : NULL;
  if (!s || !s->handler || s->generation != (uint32_t)(token >> 32))
    return NULL;
  return s;
}

/* Turn one reported {token, events} into an event, or false if there is
 * nothing to dispatch for it. */
static bool take_io_locked(taxi_reactor_t *r, const taxi__ready_t *rd,
                           taxi__event_t *ev) {
  uint32_t row = (uint32_t)rd->token;
  if (row == TAXI__ROW_WAKEUP) {
    if (r->wake_sticky)
      taxi__rwake_force(r); /* pass it on to the next waiter */
    else
      taxi__rwake_drain(r);
    return false;
  }
  if (row == TAXI__ROW_SIGNALS) {
    taxi__signals_read_locked(r, rd->token);
    return false;
  }
  taxi__slot_t *s = slot_for_token(r, rd->token);
  /* Closed while registered, says the wait: believed if the handle, as it
   * is now, confirms it (core/reactor/reactor_closed.c), and then taken for the
   * dispatch that tells its handler, unless a claim of it tells it. */
  if (s && (rd->events & TAXI__EV_CLOSED)) {
    bool consumed;
    if (taxi__closed_reported_locked(r, s, ev, &consumed)) return true;
    if (consumed) return false;
  }
  /* Removed, suspended (resume re-arms it), or already being processed by
   * another thread (the re-arm after its hooks reports it again). */
  if (!s || (s->flags & (TAXI__S_SUSPENDED | TAXI__S_BUSY))) {
    r->stats.stale++;
    return false;
  }
  /* Kept for taxi_reactor_pending_error(): the socket may no longer have
   * it to tell. */
  if ((r->ops->ext & TAXI__EXT_EVENT_ERROR) && rd->error) s->error = rd->error;
  /* The interest may have changed since the wait; hang-ups and errors are
   * always of interest. */
  uint32_t events = rd->events & (s->interest | TAXI_EV_HUP | TAXI_EV_ERR);
  if (!events) {
    r->stats.stale++;
    if (!(s->flags & TAXI__S_ARMED)) arm_or_retry_locked(r, s);
    return false;
  }
  /* Another hook of the handler runs: its thread runs this one next. */
  if (!taxi__serial_claim_locked(s->handler)) {
    taxi__serial_defer_io_locked(s, events);
    return false;
  }
  ev->kind = TAXI__EV_IO;
  ev->handler = s->handler;
  ev->handle = s->handle;
  ev->events = events;
  ev->interest = s->interest;
  ev->row = row;
  ev->generation = s->generation;
  s->flags |= TAXI__S_BUSY;
  s->handler->internal_.refs++;
  return true;
}

static bool take_timer_locked(taxi_reactor_t *r, taxi_time_t now,
                              taxi__event_t *ev) {
  taxi_timer_t *t;
  for (;;) {
    t = taxi__timer_heap_top(&r->timers);
    if (!t || t->internal_.deadline > now) return false;
    taxi__timer_heap_remove(&r->timers, t);
    if (taxi__serial_claim_locked(t->internal_.handler)) break;
    /* Another hook of its handler runs: its thread runs this one next. */
    taxi__serial_defer_timer_locked(t);
  }
  t->internal_.state = TAXI__T_FIRING;
  ev->kind = TAXI__EV_TIMER;
  ev->timer = t;
  ev->timer_seq = t->internal_.seq;
  ev->act = t->internal_.act;
  ev->handler = t->internal_.handler;
  ev->handler->internal_.refs++;
  return true;
}

/*
 * Pick the next thing to dispatch: notifications first (they are how other
 * threads talk to this one), then signals, expired timers, and the handles
 * the last wait reported.  `now` is the time of the last wait, so a timer
 * re-armed by its own hook waits for the next round instead of starving
 * I/O.  Returns false when nothing is ready without waiting.
 */
bool taxi__reactor_take_locked(taxi_reactor_t *r, taxi_time_t now,
                               taxi__event_t *ev) {
  if (r->notes_budget && taxi__notify_queue_pop(&r->notes, &ev->note)) {
    r->notes_budget--;
    ev->kind = TAXI__EV_NOTIFY;
    ev->handler = NULL;
    return true;
  }
  if (r->sig_any_pending && taxi__signals_take_locked(r, ev)) return true;
  if (take_timer_locked(r, now, ev)) return true;
  while (r->pending_count) {
    taxi__ready_t rd = r->pending[r->pending_head];
    r->pending_head = (r->pending_head + 1) % r->pending_cap;
    r->pending_count--;
    if (take_io_locked(r, &rd, ev)) return true;
    /* The wake-up or signal source may have just made work ready. */
    if (r->notes_budget == 0 && r->notes.count) {
      r->notes_budget = r->notes.count;
      return taxi__reactor_take_locked(r, now, ev);
    }
    if (r->sig_any_pending && taxi__signals_take_locked(r, ev)) return true;
  }
  return false;
}

static int run_io_hooks(const taxi__event_t *ev) {
  taxi_handler_t *h = ev->handler;
  const taxi_handler_ops_t *ops = h->ops;
  unsigned trouble = ev->events & (TAXI_EV_HUP | TAXI_EV_ERR);
  int rc = 0;
  if ((ev->events & TAXI_EV_EXCEPT) && ops->exception)
    rc = ops->exception(h, ev->handle, ev->events);
  /* A hang-up or error goes to the hook that will notice it: the reader if
   * there is one (read returns 0 or the error), else the writer. */
  bool to_input =
      (ev->events & TAXI_EV_READ) || (trouble && (ev->interest & TAXI_EV_READ));
  bool to_output = (ev->events & TAXI_EV_WRITE) ||
                   (trouble && !(ev->interest & TAXI_EV_READ));
  if (rc >= 0 && to_input && ops->input)
    rc = ops->input(h, ev->handle, ev->events);
  if (rc >= 0 && to_output && ops->output)
    rc = ops->output(h, ev->handle, ev->events);
  return rc;
}

/* A handle's hooks returned: it may be reported again.  In pool mode it
 * was deactivated when taken and is reactivated now, unless it was
 * removed (another generation) or suspended meanwhile. */
static taxi_reactor_t *io_done_locked(taxi_reactor_t *r,
                                      const taxi__event_t *ev) {
  taxi__slot_t *s = &r->slots[ev->row];
  if (!s->handler || s->generation != ev->generation) return NULL;
  s->flags &= ~TAXI__S_BUSY;
  taxi_reactor_t *move_to = s->move_to;
  s->move_to = NULL;
  /* A handle about to move is re-armed on its new reactor instead. */
  if (!move_to && r->pool && !(s->flags & TAXI__S_ARMED))
    arm_or_retry_locked(r, s);
  return move_to;
}

/* ---- moving a handler to another reactor ----------------------------------
 */

/* Both locks, always in the same (address) order, so that two moves in
 * opposite directions cannot deadlock. */
static void lock_pair(taxi_reactor_t *a, taxi_reactor_t *b) {
  bool a_first = (uintptr_t)a < (uintptr_t)b;
  taxi__mutex_lock(a_first ? &a->lock : &b->lock);
  taxi__mutex_lock(a_first ? &b->lock : &a->lock);
}

/* Move h from r to `to`, consuming a reference to h the caller holds (it
 * keeps h alive while no lock is held).  r->lock held on entry and on
 * return; both locks are held while h changes hands, so that a call on
 * either reactor sees h on one side or the other, never half-way. */
static int move_locked(taxi_reactor_t *r, taxi_handler_t *h,
                       taxi_reactor_t *to) {
  taxi__mutex_unlock(&r->lock);
  lock_pair(r, to);
  /* Things may have changed while no lock was held. */
  taxi__slot_t *s = slot_of(r, h);
  int rc = TAXI_ENOENT;
  if (s) rc = h->internal_.timers || h->internal_.signals ? TAXI_EBUSY : 0;
  bool moving = rc == 0;
  if (moving &&
      ((s->flags & TAXI__S_BUSY) || (h->internal_.serial & TAXI__SER_OWNED))) {
    /* Another thread took an event of h meanwhile: the move waits for the
     * end of that dispatch instead. */
    s->move_to = to;
    moving = false;
  }
  if (moving) {
    taxi_handle_t handle = h->internal_.handle;
    unsigned interest = s->interest;
    bool suspended = s->flags & TAXI__S_SUSPENDED;
    /* The same handle: the library's stays so, an application's keeps
     * what it named at registration (taken now if `to` needs it and r did
     * not; a closed one is then refused by the backend's own check). */
    reg_how_t how = {0, s->flags & (TAXI__S_OWNED | TAXI__S_IDENT), s->ident};
    if (!how.slot_flags && taxi__closed_by_identity(to) &&
        taxi__handle_identity(handle, &how.ident) == 0)
      how.slot_flags = TAXI__S_IDENT;
    deregister_locked(r, h, false);
    unlink_attached_locked(r, h);
    /* Its references, the attachment's included, carry over as they are. */
    taxi__handler_set_reactor(h, to);
    link_attached_locked(to, h);
    rc = register_locked(to, handle, h, interest, &how);
    if (rc == 0 && suspended) {
      taxi__slot_t *ns = &to->slots[h->internal_.slot];
      ns->flags |= TAXI__S_SUSPENDED;
      rc = arm_locked(to, ns);
    }
    /* The handle cannot be watched where it was sent: rather than leave a
     * handler nobody watches, remove it. */
    if (rc < 0) taxi__reactor_detach_locked(to, h);
  }
  /* Release our reference under the lock of the reactor h is with now
   * (a close hook may run, with only that reactor's lock dropped). */
  taxi_reactor_t *owner = h->internal_.reactor == to ? to : r;
  taxi__mutex_unlock(owner == to ? &r->lock : &to->lock);
  taxi__handler_release_locked(owner, h);
  if (owner == to) {
    taxi__mutex_unlock(&to->lock);
    taxi__mutex_lock(&r->lock);
  }
  return rc;
}

int taxi_reactor_move(taxi_reactor_t *from, taxi_handler_t *h,
                      taxi_reactor_t *to) {
  if (!from || !h || !to || from == to) return TAXI_EINVAL;
  taxi__mutex_lock(&from->lock);
  int rc = TAXI_ENOENT;
  taxi__slot_t *s = slot_of(from, h);
  if (!s) goto out;
  rc = TAXI_EBUSY;
  if (s->move_to || h->internal_.timers || h->internal_.signals) {
    taxi__refuse(rc, s->move_to
                         ? "taxi_reactor_move: h: a move of it is pending "
                           "already (an event of it is being dispatched)"
                         : "taxi_reactor_move: h: has timers or signals, "
                           "which cannot move with it (cancel them first)");
    goto out;
  }
  rc = TAXI_ENOTSUP;
  if ((s->interest & TAXI_EV_EXCEPT) && !(to->ops->caps & TAXI_CAP_EXCEPT)) {
    taxi__refuse(rc,
                 "taxi_reactor_move: to: its backend (%s) cannot watch "
                 "TAXI_EV_EXCEPT, which h asks for",
                 to->ops->name);
    goto out;
  }
  if ((s->flags & TAXI__S_BUSY) || (h->internal_.serial & TAXI__SER_OWNED)) {
    /* An event of h was taken (its hooks run, maybe this is one, or it
     * waits in a pool's queue): move when that dispatch is over. */
    s->move_to = to;
    rc = 0;
    goto out;
  }
  h->internal_.refs++;
  rc = move_locked(from, h, to);
  if (rc == TAXI_EBUSY) /* given timers or signals while no lock was held */
    taxi__refuse(rc,
                 "taxi_reactor_move: h: has timers or signals, which cannot "
                 "move with it (cancel them first)");
out:
  taxi__mutex_unlock(&from->lock);
  return rc;
}

/* Whether a taken event may still run.  Between take and run (in the
 * half-sync/half-async pool's queue) its handle may have been removed,
 * suspended or given other interest, its timer cancelled or moved, its
 * signal removed: those calls promise that no hook starts afterwards. */
static bool still_live_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      return true;
    case TAXI__EV_IO: {
      const taxi__slot_t *s = &r->slots[ev->row];
      if (s->handler != ev->handler || s->generation != ev->generation ||
          (s->flags & TAXI__S_SUSPENDED))
        return false;
      ev->events &= s->interest | TAXI_EV_HUP | TAXI_EV_ERR;
      ev->interest = s->interest;
      return ev->events != 0;
    }
    case TAXI__EV_TIMER:
      return timer_firing(ev->timer, ev->timer_seq) &&
             ev->timer->internal_.handler == ev->handler;
    case TAXI__EV_SIGNAL:
      return ev->signo < r->sig_limit &&
             r->sig_handlers[ev->signo] == ev->handler;
  }
  return true;
}

/* Drop a dispatch's reference to h, or hand it to a move asked for while
 * the dispatch went on (a removal meanwhile cancels the move): `move_to`,
 * the one a handle's hooks returned to, or one that waited for the end of
 * h's claim (a timer or signal hook of h ran when it was asked for). */
static void release_dispatch_locked(taxi_reactor_t *r, taxi_handler_t *h,
                                    taxi_reactor_t *move_to) {
  if (!move_to && !(h->internal_.serial & TAXI__SER_OWNED)) {
    taxi__slot_t *s = slot_of(r, h);
    if (s && s->move_to && !(s->flags & TAXI__S_BUSY)) {
      move_to = s->move_to;
      s->move_to = NULL;
    }
  }
  if (move_to && attached_here(r, h))
    move_locked(r, h, move_to);
  else
    taxi__handler_release_locked(r, h);
}

/* ev's dispatch is over.  First the handler's claim passes to the next of
 * its events set aside meanwhile, if any: put in *next, and true returned;
 * then ev's reference goes (release_dispatch_locked). */
static bool finish_locked(taxi_reactor_t *r, const taxi__event_t *ev,
                          taxi_reactor_t *move_to, taxi__event_t *next) {
  bool more = taxi__serial_next_locked(r, ev->handler, next);
  /* The claim ended: a removal for a closed handle made meanwhile tells
   * the handler now (core/reactor/reactor_closed.c). */
  if (!more) taxi__closed_claim_end_locked(r, ev->handler);
  release_dispatch_locked(r, ev->handler, move_to);
  return more;
}

/* Run ev, or drop it if it is no longer live; 1 if it ran.  If its
 * handler has an event set aside, that event replaces *ev and *more is
 * set. */
static unsigned run_one_locked(taxi_reactor_t *r, taxi__event_t *ev,
                               int (*hook)(taxi_handler_t *h,
                                           taxi_handle_t handle,
                                           unsigned events, void *arg),
                               void *arg, bool *more) {
  int rc = 0;
  taxi__event_t next;
  *more = false;
  if (!still_live_locked(r, ev)) {
    taxi_reactor_t *move_to = NULL;
    if (ev->kind == TAXI__EV_IO) {
      r->stats.stale++;
      move_to = io_done_locked(r, ev);
    }
    if (finish_locked(r, ev, move_to, &next)) {
      *ev = next;
      *more = true;
    }
    return 0;
  }
  taxi__mutex_unlock(&r->lock);
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
      ev->note.fn(ev->note.arg);
      break;
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      break;
    case TAXI__EV_IO:
      rc = hook ? hook(ev->handler, ev->handle, ev->events, arg)
                : run_io_hooks(ev);
      break;
    case TAXI__EV_TIMER:
      rc = ev->handler->ops->timeout(ev->handler, ev->timer, ev->act);
      break;
    case TAXI__EV_SIGNAL:
      rc = ev->handler->ops->signal(ev->handler, ev->signo);
      break;
  }
  taxi__mutex_lock(&r->lock);
  taxi_reactor_t *move_to = NULL;
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
      r->stats.notifications++;
      taxi__notify_queue_done(&r->notes);
      return 1;
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      return 0;
    case TAXI__EV_IO:
      r->stats.events++;
      /* A hook that asked for removal is removed, closed handle or not. */
      if (rc >= 0) taxi__closed_hooks_ran_locked(r, ev);
      move_to = io_done_locked(r, ev);
      break;
    case TAXI__EV_TIMER:
      r->stats.timers++;
      timer_fired_locked(r, ev->timer, ev->timer_seq, rc);
      rc = 0; /* a timer hook's refusal cancels only that timer */
      break;
    case TAXI__EV_SIGNAL:
      r->stats.signals++;
      break;
  }
  if (rc < 0) taxi__reactor_detach_locked(r, ev->handler);
  if (finish_locked(r, ev, move_to, &next)) {
    *ev = next;
    *more = true;
  }
  return 1;
}

unsigned taxi__reactor_run_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  return taxi__reactor_run_hook_locked(r, ev, NULL, NULL);
}

unsigned taxi__reactor_run_hook_locked(taxi_reactor_t *r, taxi__event_t *ev,
                                       int (*hook)(taxi_handler_t *h,
                                                   taxi_handle_t handle,
                                                   unsigned events, void *arg),
                                       void *arg) {
  bool more;
  unsigned ran = run_one_locked(r, ev, hook, arg, &more);
  /* The handler's events that came while it ran
   * (core/reactor/reactor_serial.c): this thread runs them now, with the
   * handler's own hooks. */
  while (more) ran += run_one_locked(r, ev, NULL, NULL, &more);
  return ran;
}

/* ---- waiting ------------------------------------------------------------- */

static void untake_one_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
      taxi__notify_queue_unpop(&r->notes, ev->note);
      return;
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      return;
    case TAXI__EV_IO:
      release_dispatch_locked(r, ev->handler, io_done_locked(r, ev));
      return;
    case TAXI__EV_TIMER:
      /* Its heap room was reserved when it was armed and freed when taken;
       * if another timer took that room meanwhile, drop this firing. */
      if (timer_firing(ev->timer, ev->timer_seq)) {
        if (taxi__timer_heap_reserve(&r->timers) == 0)
          timer_arm_locked(r, ev->timer, ev->timer->internal_.deadline);
        else
          timer_cancel_locked(r, ev->timer);
      }
      break;
    case TAXI__EV_SIGNAL:
      if (ev->signo < r->sig_limit &&
          r->sig_handlers[ev->signo] == ev->handler) {
        r->sig_pending[ev->signo] = 1;
        r->sig_any_pending = true;
      }
      break;
  }
  release_dispatch_locked(r, ev->handler, NULL);
}

void taxi__reactor_untake_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  /* The events of its handler set aside meanwhile go back too, each as if
   * never taken; then the claim is released. */
  taxi__event_t aside;
  while (ev->handler && taxi__serial_next_locked(r, ev->handler, &aside))
    untake_one_locked(r, &aside);
  if (ev->handler) taxi__closed_claim_end_locked(r, ev->handler);
  untake_one_locked(r, ev);
}

bool taxi__reactor_has_work_locked(const taxi_reactor_t *r, taxi_time_t now) {
  if (r->pending_count || r->notes.count || r->sig_any_pending) return true;
  taxi_timer_t *t = taxi__timer_heap_top(&r->timers);
  return t && t->internal_.deadline <= now;
}

/* Append what a wait reported to the pending ring.  In pool mode a handle
 * must not be reported to another waiter before its event is dispatched:
 * one-shot backends deactivated it already; the others are told now. */
static void push_ready_locked(taxi_reactor_t *r, const taxi__ready_t *rd) {
  if (r->pool) {
    taxi__slot_t *s = slot_for_token(r, rd->token);
    if (s && (s->flags & TAXI__S_ARMED)) {
      /* If the backend refuses, the handle stays armed (and says so): its
       * events are dropped as stale while its hooks run (TAXI__S_BUSY),
       * and the re-arm after them is then a no-op. */
      if ((r->ops->caps & TAXI_CAP_ONESHOT) ||
          r->ops->modify(r->backend, s->handle, rd->token, 0, 0) == 0)
        s->flags &= ~TAXI__S_ARMED;
      else
        r->stats.transient_errors++;
    }
  }
  size_t tail = (r->pending_head + r->pending_count) % r->pending_cap;
  r->pending[tail] = *rd;
  r->pending_count++;
}

/* Remove the handler of s, whose handle cannot be re-armed (`code`): it
 * would never hear of its handle again.  It is told through its error hook,
 * then the reactor's error callback, and closed when the last of its
 * dispatches is over.  The lock is released around the application's
 * code. */
static void remove_deaf_locked(taxi_reactor_t *r, taxi__slot_t *s, int code,
                               unsigned attempt) {
  taxi_handler_t *h = s->handler;
  taxi_handle_t handle = s->handle;
  r->stats.rearm_removed++;
  h->internal_.refs++; /* keeps h, and its close hook, for after the calls */
  taxi__reactor_detach_locked(r, h);
  taxi__mutex_unlock(&r->lock);
  if (h->ops->error) h->ops->error(h, handle, code);
  taxi__report_error(r->on_error, r->on_error_arg, code, "rearm", handle,
                     attempt, false);
  taxi__mutex_lock(&r->lock);
  taxi__handler_release_locked(r, h);
}

/* Retry the re-arms that failed (rearm_later_locked) once they are due.
 * A failure that is not transient, or transient failures that go on past
 * the back-off's limit, remove the handler (remove_deaf_locked); the others
 * are retried after the next pause. */
static void retry_rearms_locked(taxi_reactor_t *r, taxi_time_t now) {
  if (!r->rearm_pending || now < r->rearm_due) return;
  int still = 0; /* the code of a re-arm still failing, 0 if none */
  /* Rows are looked up again after each removal: the lock was released. */
  for (uint32_t row = 0; row < r->nslots && r->rearm_pending; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (!s->handler || !(s->flags & TAXI__S_REARM)) continue;
    int rc = arm_locked(r, s);
    if (rc == 0) continue;
    /* Refused twice, after its hooks or a change of mode: an application's
     * handle closed under the reactor (a number not open; or another
     * file's now, where the backend can tell) is that, not a handle the
     * backend will not watch. */
    if (!(s->flags & TAXI__S_OWNED) &&
        (rc == TAXI_EBADF ||
         (rc == TAXI_ENOENT && !taxi__closed_by_identity(r)))) {
      taxi__closed_remove_locked(r, s, TAXI__FOUND_BY_REARM);
      continue;
    }
    if (!taxi__error_transient(rc))
      remove_deaf_locked(r, s, rc, r->rearm_backoff.failures + 1);
    else
      still = rc;
  }
  if (!still) {
    taxi__backoff_reset(&r->rearm_backoff);
    return;
  }
  taxi_time_t pause = taxi__backoff_failed(&r->rearm_backoff);
  if (pause >= 0) {
    r->rearm_due = taxi__time_add(now, pause);
    unsigned attempt = r->rearm_backoff.failures;
    taxi__mutex_unlock(&r->lock);
    taxi__report_error(r->on_error, r->on_error_arg, still, "rearm",
                       TAXI_INVALID_HANDLE, attempt, false);
    taxi__mutex_lock(&r->lock);
    return;
  }
  /* The failures went on too long: those handlers are deaf for good. */
  for (uint32_t row = 0; row < r->nslots && r->rearm_pending; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (s->handler && (s->flags & TAXI__S_REARM))
      remove_deaf_locked(r, s, still, r->rearm_backoff.failures);
  }
  taxi__backoff_reset(&r->rearm_backoff);
}

int taxi__reactor_wait_locked(taxi_reactor_t *r, taxi__ready_t *buf, size_t cap,
                              taxi_time_t deadline, taxi_time_t *now) {
  retry_rearms_locked(r, *now);
  if (r->rearm_pending && r->rearm_due < deadline) deadline = r->rearm_due;
  taxi_time_t check_due = taxi__closed_check_locked(r, *now);
  if (check_due < deadline) deadline = check_due;
  taxi_timer_t *t = taxi__timer_heap_top(&r->timers);
  if (t && t->internal_.deadline < deadline) deadline = t->internal_.deadline;
  if (r->notes.count || r->sig_any_pending) deadline = *now;
  /* Never ask for more than the ring can take once waits in progress have
   * appended what they were promised. */
  size_t room = r->pending_cap - r->pending_count - r->pending_reserved;
  if (cap > room) cap = room;
  if (cap == 0) return 0;
  r->pending_reserved += cap;
  if (r->waiters++ == 0 || deadline > r->waiters_deadline)
    r->waiters_deadline = deadline;
  taxi__mutex_unlock(&r->lock);

  int n = r->ops->wait(r->backend, buf, cap, taxi__deadline_ms(*now, deadline));

  taxi__mutex_lock(&r->lock);
  r->waiters--;
  r->pending_reserved -= cap;
  r->stats.waits++;
  *now = taxi_now();
  if (n < 0) return n;
  for (int i = 0; i < n; i++) push_ready_locked(r, &buf[i]);
  r->notes_budget = r->notes.count;
  return n;
}

/* ---- the public dispatch calls ------------------------------------------- */

/* The reactor's own wait failed with `code`: reported, and paused for if
 * it may pass (core/common/backoff.h).  Returns 0 to go on, or the code. */
static int wait_failed_locked(taxi_reactor_t *r, int code, taxi_time_t deadline,
                              taxi_time_t *now) {
  taxi__mutex_unlock(&r->lock);
  int rc =
      taxi__backoff_wait_failed(&r->wait_backoff, r->on_error, r->on_error_arg,
                                code, deadline, &r->stopped);
  taxi__mutex_lock(&r->lock);
  *now = taxi_now();
  if (rc == 0) r->stats.transient_errors++;
  return rc;
}

static int begin_dispatch_locked(taxi_reactor_t *r, const char *fn) {
  if (r->pool)
    return taxi__refuse(TAXI_EBUSY,
                        "%s: r: a thread pool dispatches it (taxi_lf_create, "
                        "taxi_hsha_create)",
                        fn);
  if (r->has_owner)
    return taxi__refuse(TAXI_EBUSY,
                        "%s: r: another thread is dispatching it (or this "
                        "is one of its hooks)",
                        fn);
  if (atomic_load(&r->stopped)) return TAXI_ESTOPPED;
  r->has_owner = true;
  r->owner = taxi__thread_self();
  return 0;
}

/* Dispatch at most `limit` events within timeout_ms.  Returns how many, or
 * a negative code. */
static int dispatch_loop(taxi_reactor_t *r, int timeout_ms, int limit,
                         const char *fn) {
  if (!r) return taxi__refuse(TAXI_EINVAL, "%s: r: NULL", fn);
  taxi__mutex_lock(&r->lock);
  int rc = begin_dispatch_locked(r, fn);
  if (rc < 0) {
    taxi__mutex_unlock(&r->lock);
    return rc;
  }
  taxi_time_t now = taxi_now();
  taxi_time_t deadline = taxi__deadline_after_ms(now, timeout_ms);
  int dispatched = 0;
  bool waited = false;
  taxi__event_t ev;
  for (;;) {
    if (atomic_load(&r->stopped)) {
      rc = TAXI_ESTOPPED;
      break;
    }
    if (dispatched < limit && taxi__reactor_take_locked(r, now, &ev)) {
      /* Before this call's first wait, I/O can only come from an earlier
       * wait: that is an event taken without a system call. */
      if (!waited && ev.kind == TAXI__EV_IO) r->stats.pending_taken++;
      taxi__reactor_run_locked(r, &ev);
      dispatched++;
      continue;
    }
    if (dispatched > 0 || (waited && now >= deadline)) break;
    if (atomic_exchange(&r->interrupted, false)) break;
    /* The take may have drained the wake-up of a stop made since the
     * check above: look again, or the wait would sleep through it. */
    if (atomic_load(&r->stopped)) continue;
    rc = taxi__reactor_wait_locked(r, r->wait_buf, r->max_events, deadline,
                                   &now);
    waited = true;
    if (rc >= 0) {
      taxi__backoff_reset(&r->wait_backoff);
    } else if (r->wait_errors_out) {
      break;
    } else if ((rc = wait_failed_locked(r, rc, deadline, &now)) < 0) {
      break;
    }
  }
  r->has_owner = false;
  /* Stopped, whenever it was: one answer, whatever ran before. */
  if (rc >= 0 && atomic_load(&r->stopped)) rc = TAXI_ESTOPPED;
  taxi__mutex_unlock(&r->lock);
  return rc < 0 ? rc : dispatched;
}

void taxi__reactor_pass_wait_errors(taxi_reactor_t *r) {
  taxi__mutex_lock(&r->lock);
  r->wait_errors_out = true;
  taxi__mutex_unlock(&r->lock);
}

int taxi_reactor_handle_events(taxi_reactor_t *r, int timeout_ms) {
  return dispatch_loop(r, timeout_ms, INT32_MAX, "taxi_reactor_handle_events");
}

int taxi_reactor_handle_one(taxi_reactor_t *r, int timeout_ms) {
  return dispatch_loop(r, timeout_ms, 1, "taxi_reactor_handle_one");
}

int taxi_reactor_run(taxi_reactor_t *r) {
  if (!r) return taxi__refuse(TAXI_EINVAL, "taxi_reactor_run: r: NULL");
  for (;;) {
    int rc = dispatch_loop(r, -1, INT32_MAX, "taxi_reactor_run");
    if (rc < 0) return rc; /* TAXI_ESTOPPED once stopped */
  }
}

/* ---- pool mode ----------------------------------------------------------- */

/* Re-arm every live handle for the current mode. */
static void rearm_all_locked(taxi_reactor_t *r) {
  for (uint32_t row = 0; row < r->nslots; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (s->handler) arm_or_retry_locked(r, s);
  }
}

int taxi__reactor_attach_pool_locked(taxi_reactor_t *r, void *pool,
                                     size_t max_waiters, const char *fn) {
  if (r->pool)
    return taxi__refuse(
        TAXI_EBUSY, "%s: r: another thread pool dispatches this reactor", fn);
  if (r->has_owner)
    return taxi__refuse(TAXI_EBUSY,
                        "%s: r: a thread is dispatching this reactor "
                        "(taxi_reactor_run, _handle_events, _handle_one)",
                        fn);
  if (max_waiters == 0) max_waiters = 1;
  size_t cap = r->max_events * max_waiters;
  if (cap > r->pending_cap) {
    /* Unwrap into a larger ring. */
    taxi__ready_t *ring = taxi__calloc(cap, sizeof *ring);
    if (!ring) return TAXI_ENOMEM;
    for (size_t i = 0; i < r->pending_count; i++)
      ring[i] = r->pending[(r->pending_head + i) % r->pending_cap];
    taxi__free(r->pending);
    r->pending = ring;
    r->pending_head = 0;
    r->pending_cap = cap;
  }
  r->pool = pool;
  rearm_all_locked(r);
  return 0;
}

void taxi__reactor_detach_pool_locked(taxi_reactor_t *r) {
  r->pool = NULL;
  r->wake_sticky = false;
  taxi__rwake_drain(r);
  rearm_all_locked(r);
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
    rc = r->ops->add(r->backend, s->handle, make_token(row, s->generation),
                     s->interest, 0);
    if (rc == 0 && (s->flags & TAXI__S_SUSPENDED)) rc = arm_locked(r, s);
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
      unlink_attached_locked(r, h);
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
  taxi__free(r);
  return 0;
}
