/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_impl.h - the reactor wing: the Reactor over one
 * readiness backend, and this header, its private state, shared by the
 * files that implement it and by the thread pools built on it
 * (core/pools/).
 *
 * Dispatch is split in three steps so that thread pools can interleave
 * their own protocol between them: wait (backend call, lock released),
 * take (under the lock: pick one ready event, reference its handler) and
 * dispatch (lock released: run the hook, then release the reference).
 *
 * The files, each calling only those listed below it (never one above:
 * a lower file hands work back up through a hook or a returned value):
 *   reactor.c          create, destroy, fork, statistics
 *   reactor_run.c      the reactor's own loop (run, handle_events,
 *                      handle_one) and a pool's attaching
 *   reactor_dispatch.c the take order, running hooks, giving events back
 *   reactor_wait.c     the backend's wait, retrying failed re-arms
 *   reactor_move.c     moving a handler to another reactor
 *   reactor_register.c registration, modify, suspend, resume
 *   reactor_closed.c   handles closed under the reactor
 *   reactor_table.c    the demultiplexing table's rows and removal
 *   reactor_timers.c   timers
 *   reactor_signal.c   signals
 *   reactor_serial.c   one hook of a handler at a time (events set aside)
 *   handler.c          handlers: init, attachment, references
 *   reactor_notify.c   notify, stop, restart, interrupt
 *   reactor_wakeup.c   the wake-up channel
 * and beside them reactor_backends.c (the backends' list), reactor_pending.c
 * (taxi_reactor_pending_error) and mqueue.c (message queues, over the
 * public calls).  The wing calls core/common/, ports/ and backends/ only.
 *
 * Locking: `lock` protects everything here except what the comments mark
 * as owned by the dispatching thread.  The lock is never held while a
 * backend waits or while user code (hooks, notifications) runs.
 */
#ifndef TAXI_CORE_REACTOR_IMPL_H
#define TAXI_CORE_REACTOR_IMPL_H

#include "taxi/reactor.h"
#include "backends/readiness.h"
#include "core/common/backoff.h"
#include "core/common/handle_map.h"
#include "core/common/notify_queue.h"
#include "core/common/registry.h"
#include "core/reactor/reactor_interrupt.h"
#include "core/common/timer_heap.h"
#include "ports/port.h"

#include <stdbool.h>

/* Handler flags (taxi_handler_t.internal_.flags). */
#define TAXI__H_ATTACHED 0x1u   /* attached to internal_.reactor */
#define TAXI__H_HAS_HANDLE 0x2u /* registered for internal_.handle */
#define TAXI__H_CLOSING 0x4u    /* removed; close hook runs at refs == 0 */
/* Its handle was found closed while it was claimed (one of its hooks ran,
 * or an event of it was taken): removed already, its error hook is called
 * when the claim ends (see core/reactor/reactor_closed.c); the bits
 * TAXI__H_LOST_STEP say which step found it. */
#define TAXI__H_LOST 0x8u
#define TAXI__H_LOST_STEP 0x30u
#define TAXI__H_LOST_STEP_SHIFT 4

/* One hook at a time (taxi_handler_t.internal_.serial,
 * core/reactor/reactor_serial.c; apart from `flags`, which calls given another
 * reactor read under that reactor's lock).  OWNED: an event of it was taken and
 * is not done, its hooks run or are about to.  DEFERRED: events of it came
 * while it was owned and were set aside for the owning thread to run next. */
#define TAXI__SER_OWNED 0x1u
#define TAXI__SER_DEFERRED 0x2u

/* Timer states (taxi_timer_t.internal_.state). */
#define TAXI__T_IDLE 0u
#define TAXI__T_ARMED 1u  /* in the heap */
#define TAXI__T_FIRING 2u /* taken from the heap, hook running */
/* Due while its handler was owned: out of the heap, set aside for the
 * owning thread. */
#define TAXI__T_DEFERRED 3u

/* Slot flags. */
#define TAXI__S_SUSPENDED 0x1u /* the application deactivated it */
#define TAXI__S_BUSY 0x2u      /* its hooks are running */
#define TAXI__S_ARMED 0x4u     /* the backend reports its events */
/* Re-arming it failed for a reason that may pass: retried before the next
 * wait (see retry_rearms_locked in reactor_wait.c). */
#define TAXI__S_REARM 0x8u
/* Reported while its handler was owned: kept deactivated (with BUSY), its
 * events in `deferred`, for the owning thread to run next. */
#define TAXI__S_DEFERRED 0x10u
/* The library serves the handle with hooks of its own, which never close
 * it (taxi__reactor_register_own, _open): not checked for being closed
 * under the reactor (core/reactor/reactor_closed.c). */
#define TAXI__S_OWNED 0x20u
/* An application's I/O hooks ran since the handle was last checked for
 * being closed under the reactor: the next check looks at it. */
#define TAXI__S_UNCHECKED 0x40u
/* `ident` says which open object the handle named at registration. */
#define TAXI__S_IDENT 0x80u
/* The library's hooks of the handle read (or accept) until the OS says
 * EAGAIN (taxi__reactor_register_drains): under a pool that asked for it
 * (taxi_reactor_t.edge) it is armed edge-triggered once, and stays armed
 * while its hooks run.  Who processes it is decided in user space: the
 * handler's claim (TAXI__SER_OWNED, taken under the lock with the event)
 * is the busy bit, and a report that comes while it is claimed is set
 * aside (TAXI__S_DEFERRED, the pending bit) for the owning thread, which
 * runs the hooks again - no system call either way. */
#define TAXI__S_DRAINS 0x100u

/*
 * A row of the demultiplexing table.  The token handed to the backend is
 * (generation << 32 | row); the generation changes whenever the row is
 * freed, so an event reported for a handle removed in the meantime (and
 * perhaps reused for another handler) is recognised and dropped.
 */
typedef struct taxi__slot {
  taxi_handler_t *handler; /* NULL when the row is free */
  taxi_handle_t handle;
  uint32_t generation;
  uint32_t interest;       /* TAXI_EV_* asked for */
  uint32_t flags;          /* TAXI__S_* */
  uint32_t deferred;       /* the events set aside (TAXI__S_DEFERRED) */
  uint32_t next_free;      /* free-list link while free */
  taxi_reactor_t *move_to; /* taxi_reactor_move() once its hooks return */
  /* The error the backend reported with the handle's last event
   * (TAXI__EXT_EVENT_ERROR), until taxi_reactor_pending_error() reads it. */
  int error;
  /* With TAXI__S_IDENT: what the handle named when it was registered
   * (taxi__handle_identity), for backends whose re-arm cannot tell a
   * closed or reused handle (core/reactor/reactor_closed.c). */
  uint64_t ident;
} taxi__slot_t;

/* sig_pending[signo]: arrived and not taken; set aside (see above). */
#define TAXI__SIG_PENDING 1u
#define TAXI__SIG_DEFERRED 2u

/* Rows that are not in the table: the reactor's own handles. */
#define TAXI__ROW_WAKEUP 0xffffffffu
#define TAXI__ROW_SIGNALS 0xfffffffeu
#define TAXI__ROW_NONE 0xfffffffdu

/* What one dispatch runs. */
typedef enum taxi__event_kind {
  TAXI__EV_IO,
  TAXI__EV_TIMER,
  TAXI__EV_SIGNAL,
  TAXI__EV_NOTIFY,
  TAXI__EV_COMPLETION /* a proactor's: op, result, cflags */
} taxi__event_kind_t;

typedef struct taxi__event {
  taxi__event_kind_t kind;
  taxi_handler_t *handler; /* referenced for the dispatch (IO, TIMER, SIGNAL) */
  taxi_handle_t handle;
  uint32_t events;   /* IO: reported bits, filtered by interest */
  uint32_t interest; /* IO: what was asked for when it was taken */
  /* IO, TIMER: the handle (the timer's handler's) is the library's, armed
   * edge-triggered, and its hooks drain it without blocking
   * (TAXI__S_DRAINS): a pool need not hand the handle set to another
   * thread while they run. */
  bool drains;
  uint32_t row, generation;
  taxi_timer_t *timer;
  /* TIMER: the firing taken (the timer's seq then).  The timer may be
   * scheduled again, and that firing taken too, while this one waits in a
   * pool's queue or its hook runs: each firing ends only itself. */
  uint64_t timer_seq;
  void *act;
  int signo;
  taxi__notification_t note;
  struct taxi_op *op; /* COMPLETION: the operation, what the backend said */
  int64_t result;
  unsigned cflags;
} taxi__event_t;

struct taxi_reactor {
  /* In the registry of live reactors from create to destroy, so that
   * taxi_handler_init can tell a reactor a handler names from leftover
   * bytes (core/reactor/handler.c).  First: its address is the reactor's. */
  taxi__registered_t reg;
  taxi__mutex_t lock;
  const taxi__readiness_ops_t *ops;
  void *backend;

  /* Every attached handler, whatever attaches it (handle, timers,
   * signals), so that destroy can close each. */
  taxi_handler_t *attached;

  /* The demultiplexing table. */
  taxi__slot_t *slots;
  uint32_t nslots, slots_cap, free_head;
  taxi__handle_map_t map;

  /* Events reported by waits and not yet taken: a ring, consumed under
   * the lock.  Each waiter waits into a buffer of its own and appends what
   * it got; `pending_reserved` is the room promised to waits in progress,
   * so appending never overflows. */
  taxi__ready_t *pending;
  size_t pending_cap, pending_head, pending_count, pending_reserved;
  /* The clock read after the latest wait (0 before the first): the time
   * of the batch the events taken are dispatched in
   * (core/common/batch_clock.h). */
  taxi_time_t batch_now;
  /* The buffer of the reactor's own dispatch calls (one thread at a time). */
  taxi__ready_t *wait_buf;
  /* Lent to the events the reactor's own loop runs
   * (taxi__batch_scratch): TAXI__SCRATCH_BYTES, made at the first
   * dispatch, or NULL. */
  unsigned char *scratch;
  size_t max_events;

  taxi__timer_heap_t timers;
  uint64_t timer_seq;

  taxi__notify_queue_t notes;
  size_t notes_budget; /* notifications this round may still run */
  size_t notes_limit;  /* the most queued at once (notify_capacity) */
  taxi__wakeup_t wakeup;
  /* The backend's own wake-up is used instead (TAXI__EXT_WAKEUP), with
   * wake_pending coalescing as the port's channel does. */
  bool wake_in_backend;
  atomic_int wake_pending;

  /* Signals: opened on first use. */
  bool sig_open;
  /* The backend reports signals itself (TAXI__EXT_SIGNAL); sig unused. */
  bool sig_in_backend;
  taxi__sigsrc_t sig;
  int sig_limit;
  taxi_handler_t **sig_handlers; /* [sig_limit] */
  /* [sig_limit]: 1 arrived and not taken, 2 set aside for the thread that
   * owns its handler (TAXI__SIG_DEFERRED). */
  unsigned char *sig_pending;
  bool sig_any_pending;

  /* Dispatching. */
  bool has_owner; /* a thread is inside handle_events/one/run */
  taxi__thread_id_t owner;
  unsigned waiters;             /* threads blocked in the backend's wait */
  taxi_time_t waiters_deadline; /* the latest deadline among them */
  atomic_bool stopped;
  atomic_bool interrupted; /* taxi__reactor_interrupt() since the last return */

  /* Pool dispatch (taxi__reactor_attach_pool_locked): handles are
   * deactivated when their event is taken and reactivated after its hooks
   * ran. */
  void *pool;
  /* Leave the wake-up channel readable when seen, and pass it on, so that
   * every waiter returns (used to shut a pool down). */
  bool wake_sticky;
  /* The pool arms the handles whose hooks drain (TAXI__S_DRAINS)
   * edge-triggered: it asked for it and the backend has TAXI_CAP_EDGE.
   * Atomic: the stream driver reads it without the lock
   * (taxi__reactor_drains_edge), to know whether it must read until
   * EAGAIN. */
  atomic_bool edge;

  /* Failures (core/common/backoff.h).  The reactor's own dispatch loop backs
   * its waits off with wait_backoff; re-arms that failed transiently are kept
   * flagged TAXI__S_REARM (rearm_pending of them) and retried by the next
   * wait once rearm_due has come. */
  taxi_error_fn on_error;
  void *on_error_arg;
  taxi__backoff_t wait_backoff;
  /* A completion backend's internal reactor: its handle_events returns a
   * failed wait at once, for the proactor (or the pool dispatching it) to
   * back off from, rather than backing off inside a wait of the outer
   * dispatcher (two nested back-offs would multiply their limits). */
  bool wait_errors_out;
  taxi__backoff_t rearm_backoff;
  size_t rearm_pending;
  taxi_time_t rearm_due;

  /* Handles whose application hooks ran since they were last checked for
   * being closed under the reactor (TAXI__S_UNCHECKED), and when the next
   * check of them is due (core/reactor/reactor_closed.c). */
  size_t unchecked;
  taxi_time_t check_due;

  taxi_reactor_stats_t stats;
};

/* The reactor h is attached to.  Written under that reactor's lock (both
 * locks for a move), but read without a lock by taxi_handler_ref/unref to
 * find which lock to take: hence atomic accesses. */
static inline taxi_reactor_t *taxi__handler_reactor(const taxi_handler_t *h) {
#if defined(__GNUC__) || defined(__clang__)
  return (taxi_reactor_t *)__atomic_load_n(&h->internal_.reactor,
                                           __ATOMIC_ACQUIRE);
#else
  return (taxi_reactor_t *)*(void *const volatile *)&h->internal_.reactor;
#endif
}

static inline void taxi__handler_set_reactor(taxi_handler_t *h,
                                             taxi_reactor_t *r) {
#if defined(__GNUC__) || defined(__clang__)
  __atomic_store_n(&h->internal_.reactor, (void *)r, __ATOMIC_RELEASE);
#else
  *(void *volatile *)&h->internal_.reactor = r;
#endif
}

/* The token a backend is given for the row `row` in its `generation`. */
static inline uint64_t taxi__reactor_token(uint32_t row, uint32_t generation) {
  return ((uint64_t)generation << 32) | row;
}

/* In pool mode handles are armed one-shot where the backend can, so the
 * kernel deactivates a handle as it reports it. */
static inline unsigned taxi__reactor_arm_flags(const taxi_reactor_t *r) {
  return r->pool && (r->ops->caps & TAXI_CAP_ONESHOT) ? TAXI__ARM_ONESHOT : 0;
}

/* Whether a handle with slot flags `flags` is armed edge-triggered. */
static inline bool taxi__reactor_edge_flags(const taxi_reactor_t *r,
                                            uint32_t flags) {
  return r->pool && (flags & TAXI__S_DRAINS) &&
         atomic_load_explicit(&r->edge, memory_order_relaxed);
}

/* How a handle with slot flags `flags` is armed: edge-triggered
 * (TAXI__S_DRAINS under a pool that asked for it), else as
 * taxi__reactor_arm_flags says. */
static inline unsigned taxi__reactor_arm_flags_for(const taxi_reactor_t *r,
                                                   uint32_t flags) {
  return taxi__reactor_edge_flags(r, flags) ? TAXI__ARM_EDGE
                                            : taxi__reactor_arm_flags(r);
}

/* The handler is attached to r and not closing. */
static inline bool taxi__reactor_attached_here(const taxi_reactor_t *r,
                                               const taxi_handler_t *h) {
  return (h->internal_.flags & TAXI__H_ATTACHED) &&
         !(h->internal_.flags & TAXI__H_CLOSING) && h->internal_.reactor == r;
}

/* The slot of h's registered handle in r, or NULL. */
static inline taxi__slot_t *taxi__reactor_slot_of(taxi_reactor_t *r,
                                                  taxi_handler_t *h) {
  if (!taxi__reactor_attached_here(r, h) ||
      !(h->internal_.flags & TAXI__H_HAS_HANDLE))
    return NULL;
  return &r->slots[h->internal_.slot];
}

/* The live row a token names, or NULL if the handle was removed since. */
static inline taxi__slot_t *taxi__reactor_slot_for_token(taxi_reactor_t *r,
                                                         uint64_t token) {
  uint32_t row = (uint32_t)token;
  taxi__slot_t *s = row < r->nslots ? &r->slots[row] : NULL;
  if (!s || !s->handler || s->generation != (uint32_t)(token >> 32))
    return NULL;
  return s;
}

/* Whether t is still in the firing `seq` that was taken for dispatch.  A
 * timer scheduled again while that firing waited or ran is armed anew
 * (another seq), and may have been taken again already: FIRING then
 * belongs to the newer firing, which the older must neither cancel nor
 * drop, or the schedule made meanwhile would be lost. */
static inline bool taxi__timer_firing(const taxi_timer_t *t, uint64_t seq) {
  return t->internal_.state == TAXI__T_FIRING && t->internal_.seq == seq;
}

/* ---- the dispatch steps, for the reactor's own loop and for pools ------- */

/* Take the next event that is ready without waiting (see the take order in
 * reactor_dispatch.c); in pool mode its handle is deactivated.  r->lock
 * held.  The loops call it through taxi__reactor_take_locked
 * (core/reactor/reactor_take.h), which answers without a call when
 * nothing is ready. */
bool taxi__reactor_take_any_locked(taxi_reactor_t *r, taxi_time_t now,
                                   taxi__event_t *ev);
/* Run what was taken: r->lock is released while hooks run; afterwards the
 * handle is reactivated (pool mode) and the handler released.  An event
 * whose handle was removed or suspended, timer cancelled or rescheduled,
 * or signal removed since it was taken is dropped instead (the handle is
 * reactivated all the same).  Then the events of the same handler set
 * aside meanwhile run too (core/reactor/reactor_serial.c).  Returns how many
 * ran: 0 when the event was dropped and nothing was set aside. */
unsigned taxi__reactor_run_locked(taxi_reactor_t *r, taxi__event_t *ev);
/* The same, but a handle event is given to `hook` instead of the
 * handler's I/O hooks (the half-sync/half-async pool's busy path); other
 * events run as taxi__reactor_run_locked runs them. */
unsigned taxi__reactor_run_hook_locked(taxi_reactor_t *r, taxi__event_t *ev,
                                       int (*hook)(taxi_handler_t *h,
                                                   taxi_handle_t handle,
                                                   unsigned events, void *arg),
                                       void *arg);
/* Give back an event taken but never run (a pool shutting down with
 * events queued): the handle is reactivated, a timer re-armed at its
 * deadline, a signal marked pending again, a notification put back at the
 * head of the queue; the handler reference is released.  r->lock held. */
void taxi__reactor_untake_locked(taxi_reactor_t *r, taxi__event_t *ev);
/* Wait on the backend until `deadline` (INT64_MAX: none) or the next timer,
 * with r->lock released, into `buf` (room for `cap`), then append what was
 * reported to the pending ring (deactivating handles in pool mode on
 * backends without one-shot arming).  *now is updated.  Returns how many
 * were reported, or a negative TAXI_E* code. */
int taxi__reactor_wait_locked(taxi_reactor_t *r, taxi__ready_t *buf, size_t cap,
                              taxi_time_t deadline, taxi_time_t *now);
/* Whether something is ready to take without waiting. */
bool taxi__reactor_has_work_locked(const taxi_reactor_t *r, taxi_time_t now);
/* Enter or leave pool mode.  attach: TAXI_EBUSY if r has a pool or a
 * dispatching thread (the detail names `fn`, the pool's create); grows
 * the pending ring for `max_waiters` concurrent waits (TAXI_ENOMEM) and
 * re-arms every handle one-shot where the backend can - or, with `edge`
 * where the backend has TAXI_CAP_EDGE, the handles whose hooks drain
 * (TAXI__S_DRAINS) edge-triggered.  r->lock held. */
int taxi__reactor_attach_pool_locked(taxi_reactor_t *r, void *pool,
                                     size_t max_waiters, bool edge,
                                     const char *fn);
void taxi__reactor_detach_pool_locked(taxi_reactor_t *r);
/* Make every waiter return (and keep the channel readable while
 * r->wake_sticky), e.g. to shut a pool down.  r->lock held. */
void taxi__reactor_wake_all_locked(taxi_reactor_t *r);

/* Drop one reference to h; if it was the last of a removed handler, the
 * close hook runs before this returns, with r->lock released during it
 * (core/reactor/handler.c).  Called with r->lock held; returns with it
 * held. */
void taxi__handler_release_locked(taxi_reactor_t *r, taxi_handler_t *h);

/* Detach h from r: deregister its handle, cancel its timers and signals,
 * drop the attachment reference (core/reactor/reactor_table.c).  r->lock
 * held.  0 or TAXI_ENOENT. */
int taxi__reactor_detach_locked(taxi_reactor_t *r, taxi_handler_t *h);

/* Attach h to r if it is not attached yet (taking the attachment
 * reference; core/reactor/handler.c).  r->lock held.  0, TAXI_EINVAL (another
 * reactor), TAXI_EBUSY (closing). */
int taxi__reactor_attach_locked(taxi_reactor_t *r, taxi_handler_t *h);

/* Link h into, or unlink it from, r's list of attached handlers, and
 * nothing else (core/reactor/handler.c): a move carries the references
 * over as they are.  r->lock held. */
void taxi__reactor_link_locked(taxi_reactor_t *r, taxi_handler_t *h);
void taxi__reactor_unlink_locked(taxi_reactor_t *r, taxi_handler_t *h);

/* ---- the demultiplexing table (core/reactor/reactor_table.c) ------------ */

/* How a handle is registered, beside its interest. */
typedef struct taxi__reg_how {
  unsigned add_flags;  /* TAXI__ARM_OPEN or 0 */
  unsigned slot_flags; /* TAXI__S_OWNED, TAXI__S_IDENT or 0 */
  uint64_t ident;      /* with TAXI__S_IDENT */
} taxi__reg_how_t;

/* The table part of registration (arguments checked): a row, the handle
 * map, the backend's add, the attachment.  r->lock held.  0, TAXI_EBUSY
 * (h closing), TAXI_EINVAL (h attached elsewhere), TAXI_EEXIST (h has a
 * handle, or the handle a handler), TAXI_ETOOMANY, TAXI_ENOMEM, or the
 * backend's error. */
int taxi__reactor_register_locked(taxi_reactor_t *r, taxi_handle_t handle,
                                  taxi_handler_t *h, unsigned events,
                                  const taxi__reg_how_t *how);
/* Tell the backend what s should report now (its interest, or nothing
 * while suspended; left alone while its hooks run in pool mode).  r->lock
 * held.  0 or the backend's error, the slot unchanged then. */
int taxi__reactor_arm_locked(taxi_reactor_t *r, taxi__slot_t *s);
/* The same for callers that cannot give the failure back: a failed re-arm
 * is flagged TAXI__S_REARM and retried before the next wait
 * (core/reactor/reactor_wait.c). */
void taxi__reactor_arm_or_retry_locked(taxi_reactor_t *r, taxi__slot_t *s);
/* Stop watching h's handle and free its row; `closing`: the caller closes
 * the handle next (taxi__reactor_remove_closing).  r->lock held. */
void taxi__reactor_deregister_locked(taxi_reactor_t *r, taxi_handler_t *h,
                                     bool closing);

/* ---- timers (core/reactor/reactor_timers.c) ----------------------------- */

/* The timer heap ordered as the reactor orders timers (at create). */
void taxi__timers_init(taxi_reactor_t *r);
/* Disarm t: out of the heap and its handler's list.  r->lock held. */
void taxi__timer_cancel_locked(taxi_reactor_t *r, taxi_timer_t *t);
/* Take the timer due first (by `now`) into *ev, claiming its handler, or
 * set it aside if its handler is claimed; false when none is due. */
bool taxi__timer_take_locked(taxi_reactor_t *r, taxi_time_t now,
                             taxi__event_t *ev);
/* Whether a timer is due by `now`.  Inline, in front of
 * taxi__timer_take_locked: the take asks before every event, and the
 * answer is nearly always no. */
static inline bool taxi__timer_due_locked(const taxi_reactor_t *r,
                                          taxi_time_t now) {
  const taxi_timer_t *t = taxi__timer_heap_top(&r->timers);
  return t && t->internal_.deadline <= now;
}
/* After the firing `seq` of t ran with result rc: re-arm a periodic timer
 * unless cancelled or rescheduled meanwhile (or rc < 0). */
void taxi__timer_fired_locked(taxi_reactor_t *r, taxi_timer_t *t, uint64_t seq,
                              int rc);
/* Give back a timer event taken and never run: re-armed at its deadline. */
void taxi__timer_untake_locked(taxi_reactor_t *r, const taxi__event_t *ev);

/* ---- moving (core/reactor/reactor_move.c) -------------------------------- */

/* Move h from r to `to`, consuming a reference to h the caller holds.
 * r->lock held on entry and on return (released meanwhile).  0,
 * TAXI_ENOENT, TAXI_EBUSY (timers or signals), or the registration's
 * error in `to` (h is removed then). */
int taxi__reactor_move_locked(taxi_reactor_t *r, taxi_handler_t *h,
                              taxi_reactor_t *to);

/* The wake-up channel (core/reactor/reactor_wakeup.c): the backend's own where
 * it has one, else the port's; as taxi__wakeup_* in ports/port.h. */
int taxi__rwake_open(taxi_reactor_t *r, uint64_t token);
void taxi__rwake_close(taxi_reactor_t *r);
int taxi__rwake_signal(taxi_reactor_t *r);
int taxi__rwake_force(taxi_reactor_t *r);
void taxi__rwake_drain(taxi_reactor_t *r);

/* Wake the waiting thread, if any (core/reactor/reactor_wakeup.c).
 * r->lock held. */
void taxi__reactor_wake_locked(taxi_reactor_t *r);

/* One hook of a handler at a time (core/reactor/reactor_serial.c).  Each take
 * claims the handler of the event it takes; an event of a handler claimed
 * already is set aside instead (with the defer calls below), and the
 * thread that claimed it runs such events once its own is done. */

/* Claim h for an event about to be taken: false if it is claimed already
 * (the caller sets the event aside).  r->lock held. */
static inline bool taxi__serial_claim_locked(taxi_handler_t *h) {
  if (h->internal_.serial & TAXI__SER_OWNED) return false;
  h->internal_.serial |= TAXI__SER_OWNED;
  return true;
}
/* Set aside a due timer, taken out of the heap, whose handler is claimed. */
void taxi__serial_defer_timer_locked(taxi_timer_t *t);
/* Set aside `events` reported for the handle of slot s (kept deactivated,
 * as a taken handle is) whose handler is claimed. */
void taxi__serial_defer_io_locked(taxi__slot_t *s, uint32_t events);
/* The event of kind `done` (TAXI__EV_*) h's claim is done with (run,
 * dropped or given back): if events of h were set aside meanwhile, take
 * the next of them into *ev, h staying claimed, and return true; otherwise
 * release the claim and return false.  The next is of the first kind
 * after `done`, in turn: signal, then the timer due first, then the
 * handle's.  The caller still holds its reference to h.  r->lock held. */
bool taxi__serial_next_deferred_locked(taxi_reactor_t *r, taxi_handler_t *h,
                                       int done, taxi__event_t *ev);
/* Inline: asked after every event, and nearly always nothing was set
 * aside (the call is for that case only). */
static inline bool taxi__serial_next_locked(taxi_reactor_t *r,
                                            taxi_handler_t *h, int done,
                                            taxi__event_t *ev) {
  if (h->internal_.serial & TAXI__SER_DEFERRED)
    return taxi__serial_next_deferred_locked(r, h, done, ev);
  h->internal_.serial = 0;
  return false;
}

/* Signals (core/reactor/reactor_signal.c). */
void taxi__signals_detach_handler_locked(taxi_reactor_t *r, taxi_handler_t *h);
/* A wait reported the signal row: read the signal source (or, where the
 * backend reports signals itself, take the number from the token) and
 * mark signals pending. */
void taxi__signals_read_locked(taxi_reactor_t *r, uint64_t token);
/* Take one pending signal for dispatch; false if none. */
bool taxi__signals_take_locked(taxi_reactor_t *r, taxi__event_t *ev);
/* Release everything at destroy, and reopen in a forked child. */
void taxi__signals_destroy(taxi_reactor_t *r);
int taxi__signals_reinit_locked(taxi_reactor_t *r);

/* Handles closed under the reactor (core/reactor/reactor_closed.c): a hook that
 * closed its own handle and returned 0, or another thread that closed a
 * registered handle.  All with r->lock held; those that tell a handler
 * release it around the handler's error hook. */
/* Whether r tells such handles by what they name (taxi__handle_identity,
 * recorded at registration) rather than by a failed re-arm. */
bool taxi__closed_by_identity(const taxi_reactor_t *r);
/* Whether s's handle no longer names what was registered: closed, or its
 * number taken by another open since.  One system call. */
bool taxi__closed_probe_locked(taxi_reactor_t *r, taxi__slot_t *s);
/* The step that found a handle closed, as the error callback names it:
 * "wait", "rearm", "register", "check". */
typedef enum taxi__closed_step {
  TAXI__FOUND_BY_WAIT,
  TAXI__FOUND_BY_REARM,
  TAXI__FOUND_BY_REGISTER,
  TAXI__FOUND_BY_CHECK
} taxi__closed_step_t;
/* Remove the handler of s, whose handle was found closed by `step`: its
 * error hook is told TAXI_EBADF, then its close hook runs with
 * TAXI_INVALID_HANDLE (the number may be another's by then).  If the
 * handler is claimed (one of its hooks runs, or an event of it was taken:
 * core/reactor/reactor_serial.c), it is removed at once and its error hook
 * called when the claim ends (taxi__closed_claim_end_locked). */
void taxi__closed_remove_locked(taxi_reactor_t *r, taxi__slot_t *s,
                                taxi__closed_step_t step);
/* h's claim ended (its events run, dropped or given back): call the error
 * hook a removal made meanwhile put off. */
void taxi__closed_claim_end_locked(taxi_reactor_t *r, taxi_handler_t *h);
/* The I/O hooks of ev's handle returned and did not ask for removal: its
 * handle is checked at the next check where nothing else would tell that
 * a hook closed it. */
void taxi__closed_hooks_ran_locked(taxi_reactor_t *r, const taxi__event_t *ev);
/* Before a wait: check the handles marked since the last check, if it is
 * due, removing those found closed.  Returns the time the next check is
 * due, or INT64_MAX when none is. */
taxi_time_t taxi__closed_check_locked(taxi_reactor_t *r, taxi_time_t now);
/* A wait reported s's handle closed (TAXI__EV_CLOSED): *consumed says
 * whether it was so and its handler removed; if so and the handler was
 * not claimed, *ev is taken (claiming it) for the dispatch that tells it
 * (that finds the handler removed: see taxi__closed_claim_end_locked) and
 * true returned.  Not consumed: dispatch the report as an error (the
 * library's own handles, a handle being dispatched, or one still open and
 * the same).  The lock is held throughout. */
bool taxi__closed_reported_locked(taxi_reactor_t *r, taxi__slot_t *s,
                                  taxi__event_t *ev, bool *consumed);
/* Registering `handle` found it taken by another handler than h: if that
 * handler's handle was closed under the reactor, remove it and return
 * true (r->lock may have been released meanwhile: look again). */
bool taxi__closed_evict_locked(taxi_reactor_t *r, taxi_handle_t handle,
                               const taxi_handler_t *h);

#endif /* TAXI_CORE_REACTOR_IMPL_H */
