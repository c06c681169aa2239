/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/handler.h - event handlers and timer records.
 *
 * An event handler is a struct the application embeds in its own object (a
 * connection, an acceptor, ...) and recovers with a container-of cast in its
 * hooks.  Its hooks are reached through a table of functions shared by every
 * handler of the same kind:
 *
 *     struct conn { taxi_handler_t h; int fd; char buf[4096]; };
 *     static int conn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
 *         struct conn *c = (struct conn *)((char *)h - offsetof(struct conn,
 * h));
 *         ...
 *         return 0;            // keep going; negative asks for removal
 *     }
 *     static const taxi_handler_ops_t conn_ops = { .input = conn_input,
 *                                                  .close = conn_close };
 *     taxi_handler_init(&c->h, &conn_ops);
 *
 * Lifetime.  A handler becomes attached to a reactor when it is registered
 * for a handle, given a timer or given a signal.  It stays attached until it
 * is removed: by taxi_reactor_remove() from any thread, or by one of its own
 * hooks returning a negative value.  Removal stops every future dispatch at
 * once, but a hook already running in another thread is not interrupted; the
 * close hook runs exactly once, after the last running hook has returned and
 * the last reference taken with taxi_handler_ref() has been dropped, in
 * whichever thread drops it.  The close hook is the place to close the
 * handle and free the memory: taxi touches the handler no more after calling
 * it, and the handler may be initialised and attached again afterwards.
 *
 * One hook at a time.  Under every dispatcher - a reactor's own dispatch,
 * the Leader/Followers pool, the half-sync/half-async pool - the hooks a
 * handler's events run never overlap: its handle's input, output and
 * exception hooks, its timers' timeout hook and its signals' signal hook
 * run one after the other, in whichever threads, each seeing what the
 * previous one wrote, so they may share the handler's state without a
 * lock (an idle timeout may close the connection its input hook reads).
 * An event of the handler that comes while one of its hooks runs in
 * another thread - a timer falling due, a signal, its handle reported -
 * is set aside and run by that thread as soon as the hook returns: once,
 * neither dropped nor run twice, later than it would have run.  Removing
 * the handler, cancelling the timer or removing the signal meanwhile
 * forgets it, as for an event not yet dispatched.  So a hook must not wait
 * for another hook of its own handler: that one would run only after it.
 * The error hook (below) runs when the handler is removed and may overlap
 * a hook already running; the close hook runs after them all.
 */
#ifndef TAXI_HANDLER_H
#define TAXI_HANDLER_H

#include "platform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Event bits.  READ, WRITE and EXCEPT may be asked for; HUP and ERR are only
 * reported (they are always watched). */
#define TAXI_EV_READ 0x01u   /* data (or a connection, or EOF) to read */
#define TAXI_EV_WRITE 0x02u  /* room to write; a connect finished */
#define TAXI_EV_EXCEPT 0x04u /* out-of-band data */
#define TAXI_EV_HUP 0x08u    /* the peer hung up (reported only) */
#define TAXI_EV_ERR 0x10u    /* an error is pending on the handle (reported) */
/* The bits that may be asked for. */
#define TAXI_EV_INTEREST (TAXI_EV_READ | TAXI_EV_WRITE | TAXI_EV_EXCEPT)

/*
 * TAXI_CONTAINER_OF - the object of type `type` whose member `member` is at
 * `ptr`: how a hook recovers the application's object from its embedded
 * taxi_handler_t (or a timer from its taxi_timer_t).
 */
#define TAXI_CONTAINER_OF(ptr, type, member) \
  ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

typedef struct taxi_handler taxi_handler_t; /* an event handler */
typedef struct taxi_timer taxi_timer_t;     /* a timer record */

/*
 * The hooks.  Any may be NULL (the event is then ignored; a NULL close hook
 * means nothing needs doing at close).  `events` is the set of TAXI_EV_* bits
 * reported for the handle; HUP and ERR are delivered to the input hook when
 * READ is watched, otherwise to the output hook.
 *
 * A hook returning a negative value asks for the handler to be removed, as
 * taxi_reactor_remove() would; for the timeout hook it cancels that timer
 * only.  Hooks may call any taxi function, including removing, suspending
 * or re-registering their own handler.  Under a pool the handle is
 * deactivated while its hooks run and watched again after them, as it is
 * then: a taxi_reactor_suspend() or taxi_reactor_modify() made by a hook
 * (or by another thread meanwhile) is what that re-arm applies, so a
 * suspension survives it; once the handler is removed they return
 * TAXI_ENOENT, in its hooks too (taxi/reactor.h).
 */
typedef struct taxi_handler_ops {
  /* The handle is readable (or a connection waits to be accepted). */
  int (*input)(taxi_handler_t *h, taxi_handle_t handle, unsigned events);
  /* The handle is writable (or a connect finished). */
  int (*output)(taxi_handler_t *h, taxi_handle_t handle, unsigned events);
  /* Urgent data or an error condition on the handle. */
  int (*exception)(taxi_handler_t *h, taxi_handle_t handle, unsigned events);
  /* A timer of the handler expired; act is what was scheduled with it. */
  int (*timeout)(taxi_handler_t *h, taxi_timer_t *timer, void *act);
  /* A signal the handler registered for arrived. */
  int (*signal)(taxi_handler_t *h, int signo);
  /* The handler left the reactor (removed, or the reactor destroyed). */
  void (*close)(taxi_handler_t *h, taxi_handle_t handle);
  /* The reactor could not go on watching the handle and removes the
   * handler because of `code`: this runs once, before the close hook, so
   * the application learns why its connection ends.  Optional.
   *   TAXI_EBADF: the handle was closed under the reactor - by a hook of
   *   the handler that closed it and returned 0 (a hook that means to end
   *   returns a negative value, and its close hook closes), or by another
   *   thread - whether or not another open took the number since.  The
   *   close hook then gets TAXI_INVALID_HANDLE: the number may name
   *   another descriptor by then, which closing would end (`handle` here
   *   is the number, for the record: do not close it either).  The
   *   dispatcher finds it out within about 100 ms of the hook's return
   *   (see taxi_reactor_register), or when another handler registers the
   *   number, which then succeeds.  This runs in a dispatching thread
   *   (where the dispatcher runs hooks when a wait reported the handle
   *   closed), or in the thread registering the number; never beside
   *   another hook of the handler (after the one running, if any).  Until
   *   then the handler may be given events of whatever descriptor took
   *   the number.  On Windows a socket closed and its handle's value
   *   taken by another socket at once is not told apart.
   *   Otherwise re-arming the handle after its hook failed for good
   *   (TAXI_ENOMEM after every retry, ...). */
  void (*error)(taxi_handler_t *h, taxi_handle_t handle, int code);
} taxi_handler_ops_t;

/*
 * The handler.  `ops` is the application's; `internal_` belongs to taxi and
 * is read and written only under the lock of the reactor it is attached to.
 */
struct taxi_handler {
  const taxi_handler_ops_t *ops; /* the hooks, the application's */
  /* Private to taxi. */
  struct {
    void *reactor;        /* the reactor it is attached to, or NULL */
    taxi_timer_t *timers; /* its scheduled timers */
    taxi_handle_t handle; /* its registered handle, or TAXI_INVALID_HANDLE */
    uint32_t slot;        /* its row in the demultiplexing table */
    uint32_t refs;        /* attachment + running hooks + user references */
    uint32_t flags;
    uint32_t signals;            /* how many signals it is registered for */
    uint32_t serial;             /* one hook at a time: who runs it */
    taxi_handler_t *prev, *next; /* in the reactor's list of attached */
  } internal_;
};

/*
 * A timer record, owned by the application (typically embedded next to the
 * handler it serves) so that scheduling allocates nothing.  Initialise it
 * once with taxi_timer_init(); it may be scheduled again after it fired or
 * was cancelled.  Keep its memory valid until the handler's close hook.
 */
struct taxi_timer {
  /* Private to taxi. */
  struct {
    taxi_handler_t *handler;
    void *act;
    taxi_time_t deadline;
    taxi_time_t period;
    uint64_t seq; /* tie-break: equal deadlines fire in order */
    size_t heap_index;
    taxi_timer_t *prev, *next; /* in the handler's list */
    uint32_t state;
  } internal_;
};

/*
 * taxi_handler_init - prepare a handler for use with `ops` (which must stay
 * valid while the handler is attached).  The handler's memory need not be
 * initialised before; a handler may be initialised again once its close
 * hook has run.
 * Returns 0, or TAXI_EINVAL if h or ops is NULL, or TAXI_EBUSY (h is left
 * as it was) if h is attached to a reactor - registered for a handle, or
 * with timers or signals - or was removed and its close hook has not run
 * yet: remove it (taxi_reactor_remove) and initialise it from its close
 * hook or after it.
 * Threads: the thread that owns the handler, any; it takes the lock of
 * the reactor the handler names, if that reactor exists.
 */
TAXI_EXTERN int taxi_handler_init(taxi_handler_t *h,
                                  const taxi_handler_ops_t *ops);

/*
 * taxi_handler_ref - take a reference that delays the close hook until the
 * matching taxi_handler_unref(), e.g. while another thread still uses the
 * object after it was removed.  Returns 0, or TAXI_EINVAL for NULL.
 * Threads: any; for an attached handler it takes the reactor's lock.
 */
TAXI_EXTERN int taxi_handler_ref(taxi_handler_t *h);

/*
 * taxi_handler_unref - drop a reference taken with taxi_handler_ref().  If
 * the handler was removed and this was the last reference, the close hook
 * runs now, in this thread, before the call returns.
 * Returns 0, TAXI_EINVAL for NULL or when no reference is held.
 * Threads: any.
 */
TAXI_EXTERN int taxi_handler_unref(taxi_handler_t *h);

/*
 * taxi_timer_init - prepare a timer record.  Must not be called on a
 * scheduled timer.  Returns 0, or TAXI_EINVAL for NULL.
 * Threads: the owner of the unscheduled timer.
 */
TAXI_EXTERN int taxi_timer_init(taxi_timer_t *t);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_HANDLER_H */
