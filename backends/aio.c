/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/aio.c - the POSIX aio completion backend: socket and file data
 * move with aio_read(3)/aio_write(3); accept, connect and the readiness
 * that gates socket transfers come from an internal Reactor.
 *
 * What runs where.
 *  - READ_FILE / WRITE_FILE: aio_read/aio_write at aio_offset, at once.
 *  - READ: wait for readability in the internal reactor, then aio_read.
 *    glibc performs a socket request on a helper thread with a plain
 *    read(2); on a socket left blocking that thread would sit in read()
 *    until data came, and aio_cancel() cannot stop a running request
 *    (AIO_NOTCANCELED).  Waiting for readiness first, on a socket attach()
 *    made non-blocking, keeps every request short; a request that still
 *    finds nothing (EAGAIN) goes back to waiting for readiness.
 *  - WRITE: aio_write of the buffer when one is left.  aio has no
 *    gathering write (lio_listio() queues several requests but promises no
 *    order among them on one descriptor), and an aio_write per buffer
 *    sends each buffer as its own small segment: on TCP without
 *    TCP_NODELAY, Nagle's algorithm then holds the second one until the
 *    peer's delayed ACK, about 40 ms (measured: 90 ms per echo round trip
 *    of a 3-buffer message, against 0.7 ms with TCP_NODELAY).  So while
 *    several buffers are left the step is the gathering sendmsg of
 *    backends/nbio.c, performed by this thread, and aio_write takes over
 *    when one is left.  Tried at once (a socket usually has room; a full
 *    one costs one EAGAIN), then after writability.
 *  - TRANSMIT_FILE: the header and the trailer are aio_writes to the
 *    socket like WRITE.  The file range is sent with the sendfile step of
 *    backends/nbio.c when the socket is writable: aio offers no
 *    file-to-socket transfer, and copying through memory would need a
 *    buffer the operation record does not have.  That part is therefore
 *    performed by the thread running wait() (or submit()), not by aio.
 *  - ACCEPT / CONNECT: the non-blocking steps of backends/nbio.c, driven
 *    by the internal reactor's readiness.
 *
 * Completion notification.  Requests carry SIGEV_NONE.  A reaper thread
 * of this backend waits in aio_suspend(3) over every request in flight
 * plus a doorbell: an aio_read of one byte from a pipe of our own, which
 * submit() writes to when a new request must join the reaper's list.  The
 * reaper lists finished requests for wait() and wakes it through the
 * internal reactor (a taxi__wakeup_t registered there).
 * SIGEV_THREAD, the obvious choice, is not used, for three reasons found
 * with glibc 2.36: it creates a thread and mallocs for every completion
 * (rt/aio_notify.c); when that creation fails glibc records EAGAIN in the
 * aiocb but never notifies, so the operation would never complete; and
 * under ThreadSanitizer the helper thread glibc creates internally (TSan
 * cannot intercept it) crashes in TSan's malloc.  SIGEV_SIGNAL would need
 * a process-wide signal blocked in every thread of the application.
 *
 * glibc details this file relies on (rt/aio_misc.c, aio_cancel.c,
 * aio_suspend.c; checked against 2.36):
 *  - A worker sets __error_code and finishes with the aiocb under the
 *    library's __aio_requests_mutex; aio_error() reads without it.  Once
 *    the reaper has seen requests finish it calls aio_suspend() (which
 *    takes that mutex) before letting them go, so no worker still touches
 *    an aiocb whose record the application may reuse.
 *  - aio_cancel() of a request still queued marks it ECANCELED and wakes
 *    aio_suspend() callers; a running one is AIO_NOTCANCELED and completes
 *    with its own result.  Either way the reaper reports it exactly once.
 *  - Requests on one descriptor run one after another; helper threads
 *    have every signal blocked, so a write to a reset socket returns EPIPE
 *    and the SIGPIPE stays pending on that helper instead of killing the
 *    process.
 *
 * ThreadSanitizer builds.  glibc creates its helper threads with an
 * internal pthread_create() TSan cannot see, and a helper that starts
 * another helper allocates in TSan's malloc from a thread TSan does not
 * know: a crash.  Under TSan this file therefore limits glibc to one
 * helper (aio_init(), aio_threads = 1: a helper then never starts
 * another), which a permanently pending doorbell read would occupy; so
 * under TSan there is no doorbell and the reaper re-reads its list every
 * millisecond instead.  Everything else is the same code.
 *
 * The internal reactor is taxi_reactor_create()'s: "aio:<reactor
 * backend>" picks its backend, "aio" the default (TAXI_BACKEND, or best).
 *
 * Limits.  Each instance keeps one glibc helper blocked in its doorbell
 * read, so at most AIO_MAX_INSTANCES are open at once.  After fork() the
 * child inherits glibc's count of idle helpers but not the helpers, so
 * aio in the child of a process that used it can hang: a forked child
 * should use another backend.
 *
 * Detach does not wait for the requests in flight on the handle: it only
 * asks for their cancellation, and the core closes a closed handle's
 * descriptor once their completions have come (core/proactor/proactor_impl.h),
 * so the number is never reused while a glibc helper may still read or write
 * it, and no thread blocks with a lock held.
 *
 * Counters: every aio_* call made for an operation (submit, cancel, the
 * aio_error + aio_return that reap it, the aio_suspend calls), every nbio
 * system call, each reactor change of a handle's readiness interest (one
 * epoll_ctl or kevent with epoll and kqueue; with poll and select no
 * system call, counted all the same) and each reactor wait count as
 * syscalls; reactor waits and the reaper's aio_suspend as waits.  An
 * aio_error() that finds a request still running is a memory load in
 * glibc and is not counted.  glibc's helper threads make further system
 * calls (pread, then read on ESPIPE for a socket; futex; clone) that this
 * file cannot see or count.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POSIX aio, pipe2(), signal masks under -std=c11 */
#endif
#include "config.h"

#ifdef TAXI_HAVE_AIO

#include "backends/completion.h"
#include "backends/nbio.h"
#include "core/common/alloc.h"
#include "core/common/backoff.h"
#include "core/proactor/proactor_op.h"
#include "core/reactor/reactor_closing.h"
#include "ports/port.h"
#include "taxi/reactor.h"

#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define AIO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AIO_TSAN 1
#endif
#endif
#ifndef AIO_TSAN
#define AIO_TSAN 0
#endif

/* Most entries one aio_suspend() is given.  glibc builds two arrays of
 * that many entries on the caller's stack (about 40 bytes each) and walks
 * them twice per call; beyond it the reaper lists a rotating window and
 * polls the rest. */
#define AIO_SUSPEND_MAX 1024

/* Most aio proactors open at once in a process.  Each keeps one glibc
 * helper thread blocked on its doorbell, and glibc runs at most
 * aio_threads helpers (20 unless aio_init() said otherwise before the
 * first request): with a helper per proactor taken, requests would wait
 * for a helper that never frees up.  Past the limit open() refuses with
 * TAXI_ENOTSUP, so the automatic choice moves on to "emulated". */
#define AIO_MAX_INSTANCES 8

/* How often the reaper re-reads its list when it cannot be woken (no
 * doorbell: TSan builds, or the doorbell failed; or too many requests to
 * list at once). */
#define AIO_POLL_NSEC (1000 * 1000)

/* Where an operation is, in this backend (aio_op_t.state). */
enum {
  OP_IDLE = 0, /* not with the backend (or its completion was reported) */
  OP_ARMED,    /* waiting for readiness in the internal reactor */
  OP_AIO,      /* an aio request is in flight */
  OP_DONE,     /* on the completion list, result known */
  OP_BACKOFF   /* aio_read/aio_write refused it: on the retry list */
};

/* What the reaper is doing (aio_state_t.reaper_mode). */
enum { REAPER_BUSY, REAPER_IDLE, REAPER_SUSPENDED };

typedef struct aio_handle aio_handle_t;
typedef struct aio_state aio_state_t;

/* The backend's room in each operation record. */
typedef struct aio_op {
  struct aiocb cb;  /* first: the reaper finds the record from it */
  taxi_op_t *next;  /* completion list */
  aio_handle_t *ah; /* NULL once the handle is detached */
  int64_t result;   /* OP_DONE */
  unsigned state;   /* OP_* */
  unsigned wants;   /* OP_ARMED: TAXI_EV_READ or TAXI_EV_WRITE */
  bool cancel;      /* cancellation asked: an EAGAIN is not retried */
  bool connecting;  /* CONNECT: started, the next step checks it */
  bool refused;     /* the last aio_read/aio_write was refused for now */
  bool gave_up;     /* ... refused too long: its EAGAIN is final */
} aio_op_t;

_Static_assert(sizeof(aio_op_t) <= TAXI_OP_BACKEND_SIZE,
               "struct aiocb and its bookkeeping must fit in a taxi_op_t");
_Static_assert(offsetof(aio_op_t, cb) == 0, "the aiocb comes first");

/* An attached handle. */
struct aio_handle {
  taxi_handler_t h; /* in the internal reactor, once it has waited */
  aio_state_t *s;
  taxi_handle_t fd;
  bool file;       /* regular file: file operations only, never watched */
  bool registered; /* h is registered with the reactor */
  bool suspended;  /* ... and suspended: nothing waits for readiness */
  bool detached;
  unsigned interest; /* the events registered */
  taxi_op_t *dir[2]; /* the op with the backend: [0] input, [1] output */
};

struct aio_state {
  taxi__completion_counters_t *counters;
  taxi_reactor_t *reactor;
  taxi__mutex_t lock; /* everything below */
  taxi__cond_t cond;  /* the reaper waits here while nothing is in flight */

  aio_handle_t **handles; /* by descriptor */
  size_t handles_cap, nhandles;

  taxi_op_t *done_head, *done_tail; /* completions for wait() */

  struct aiocb **flight; /* requests in flight (the reaper's to watch) */
  size_t nflight, flight_cap;

  /* The reaper. */
  taxi__thread_t reaper;
  bool reaper_started;
  bool stopping;
  int reaper_mode;           /* REAPER_* */
  const struct aiocb **snap; /* its aio_suspend list; its own */
  size_t snap_cap, rotate;
  const struct aiocb **spare; /* a bigger list attach() hands over */
  size_t spare_cap;

  /* The doorbell: bell[0] is read by a pending aio_read, bell[1] rung. */
  int bell[2];
  struct aiocb bell_cb;
  unsigned char bell_buf[16];
  bool bell_armed, bell_rung, bell_broken;

  /* Waking wait() from the reactor it blocks in. */
  taxi__wakeup_t wakeup;
  bool wakeup_open;
  taxi_handler_t wake_h;
  bool waiting;           /* a thread is in wait()'s reactor call */
  atomic_bool wake_asked; /* wake() was called: the wait returns */

  /* Socket operations whose aio_read/aio_write the system refused for
   * want of resources (EAGAIN), tried again when retry_timer fires on
   * wake_h (see refused_locked). */
  taxi_op_t *retry_head; /* linked through aio_op_t.next */
  taxi_timer_t retry_timer;
  bool retry_armed;
  taxi__backoff_t refusals; /* rounds refused in a row */
  unsigned refused_unreported;
  int refused_code;
  taxi_error_fn on_error;
  void *on_error_arg;
};

static inline aio_op_t *room(taxi_op_t *op) { return taxi__op_backend(op); }

static taxi_op_t *op_of_cb(struct aiocb *cb) {
  return (taxi_op_t *)(void *)((char *)cb -
                               offsetof(taxi_op_t, internal_.backend));
}

static void count(aio_state_t *s, uint64_t n) {
  atomic_fetch_add_explicit(&s->counters->syscalls, n, memory_order_relaxed);
}

static void count_wait(aio_state_t *s, uint64_t n) {
  count(s, n);
  atomic_fetch_add_explicit(&s->counters->waits, n, memory_order_relaxed);
}

/* Per-handle queue of an operation kind: 0 input, 1 output, -1 none. */
static int dir_of(taxi_op_kind_t kind) {
  switch (kind) {
    case TAXI_OP_ACCEPT:
    case TAXI_OP_READ:
    case TAXI_OP_READ_FILE:
      return 0;
    case TAXI_OP_CONNECT:
    case TAXI_OP_WRITE:
    case TAXI_OP_WRITE_FILE:
    case TAXI_OP_TRANSMIT_FILE:
      return 1;
    default:
      return -1;
  }
}

static bool is_file_op(taxi_op_kind_t kind) {
  return kind == TAXI_OP_READ_FILE || kind == TAXI_OP_WRITE_FILE;
}

/* An aio_error() value as a completion result. */
static int64_t aio_status(int err) {
  return err == ECANCELED ? TAXI_ECANCELED : taxi__error_from_os(err);
}

/* ---- waking wait() ------------------------------------------------------ */

/* Something was listed by a thread other than the one in wait(): make the
 * reactor call it blocks in return.  Coalesced by the wake-up channel. */
static void kick_locked(aio_state_t *s) {
  if (s->waiting && taxi__wakeup_signal(&s->wakeup) > 0) count(s, 1);
}

/* Move op to the completion list.  The caller kicks unless it is the
 * thread in wait() (a reactor hook), which looks at the list next. */
static void push_done_locked(aio_state_t *s, taxi_op_t *op, int64_t result) {
  aio_op_t *ao = room(op);
  ao->state = OP_DONE;
  ao->result = result;
  ao->next = NULL;
  if (s->done_tail)
    room(s->done_tail)->next = op;
  else
    s->done_head = op;
  s->done_tail = op;
}

/* The result of op's step, or the error the internal reactor reported
 * with its handle's event where the step cannot see it (nbio.h). */
static int64_t settle_locked(aio_state_t *s, taxi_op_t *op, int64_t r) {
  aio_op_t *ao = room(op);
  int pending = 0;
  if (ao->ah && ao->ah->registered &&
      taxi__nbio_may_hide_error(op, ao->connecting, r) &&
      taxi_reactor_pending_error(s->reactor, &ao->ah->h, &pending) == 0 &&
      pending)
    return pending;
  return r;
}

static int wake_input(taxi_handler_t *h, taxi_handle_t fd, unsigned events) {
  aio_state_t *s = TAXI_CONTAINER_OF(h, aio_state_t, wake_h);
  (void)fd;
  (void)events;
  taxi__wakeup_drain(&s->wakeup);
  count(s, 1);
  return 0;
}

static bool advance_locked(aio_state_t *s, taxi_op_t *op);
static int rearm_locked(aio_state_t *s, aio_handle_t *ah);
static unsigned wants_of(const taxi_op_t *op);

/* retry_timer: try the refused operations again (see refused_locked);
 * runs in the thread inside wait(), which looks at the completion list
 * next.  The refusals are reported here, once per round, with no lock
 * held. */
static int retry_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  aio_state_t *s = TAXI_CONTAINER_OF(h, aio_state_t, wake_h);
  (void)t;
  (void)act;
  taxi__mutex_lock(&s->lock);
  s->retry_armed = false;
  unsigned refused = s->refused_unreported;
  int code = s->refused_code;
  unsigned attempt = s->refusals.failures;
  s->refused_unreported = 0;
  taxi_op_t *list = s->retry_head;
  s->retry_head = NULL;
  while (list) {
    taxi_op_t *op = list;
    aio_op_t *ao = room(op);
    list = ao->next;
    aio_handle_t *ah = ao->ah;
    if (ao->cancel || !ah || ah->detached) {
      push_done_locked(s, op, TAXI_ECANCELED);
      continue;
    }
    ao->state = OP_ARMED;
    ao->wants = wants_of(op);
    advance_locked(s, op);
    int rc = rearm_locked(s, ah);
    if (rc < 0 && ao->state == OP_ARMED) push_done_locked(s, op, rc);
  }
  taxi__mutex_unlock(&s->lock);
  if (refused)
    taxi__report_error(s->on_error, s->on_error_arg, code, "aio_read/aio_write",
                       TAXI_INVALID_HANDLE, attempt, false);
  return 0;
}

static const taxi_handler_ops_t wake_ops = {.input = wake_input,
                                            .timeout = retry_timeout};

/* ---- readiness interest ------------------------------------------------- */

static unsigned wanted(aio_handle_t *ah) {
  unsigned ev = 0;
  for (int d = 0; d < 2; d++) {
    taxi_op_t *op = ah->dir[d];
    if (op && room(op)->state == OP_ARMED) ev |= room(op)->wants;
  }
  return ev;
}

/* Make the reactor watch ah for what its armed operations wait for:
 * registered on first need, then suspended while nothing waits (an aio
 * request in flight must not keep a readable socket reported). */
static int rearm_locked(aio_state_t *s, aio_handle_t *ah) {
  unsigned want = wanted(ah);
  int rc = 0;
  if (!ah->registered) {
    if (!want) return 0;
    rc = taxi__reactor_register_own(s->reactor, ah->fd, &ah->h, want);
    if (rc < 0) return rc;
    count(s, 1);
    ah->registered = true;
    ah->suspended = false;
    ah->interest = want;
    return 0;
  }
  if (!want) {
    if (ah->suspended) return 0;
    rc = taxi_reactor_suspend(s->reactor, &ah->h);
    if (rc < 0) return rc;
    count(s, 1);
    ah->suspended = true;
    return 0;
  }
  if (want != ah->interest) {
    rc = taxi_reactor_modify(s->reactor, &ah->h, want);
    if (rc < 0) return rc;
    count(s, 1);
    ah->interest = want;
  }
  if (ah->suspended) {
    rc = taxi_reactor_resume(s->reactor, &ah->h);
    if (rc < 0) return rc;
    count(s, 1);
    ah->suspended = false;
  }
  return 0;
}

/* ---- aio requests ------------------------------------------------------- */

static int reserve_flight_locked(aio_state_t *s, size_t need) {
  if (need <= s->flight_cap) return 0;
  size_t cap = s->flight_cap ? s->flight_cap : 16;
  while (cap < need) cap *= 2;
  struct aiocb **f = taxi__reallocarray(s->flight, cap, sizeof *f);
  if (!f) return TAXI_ENOMEM;
  s->flight = f;
  s->flight_cap = cap;
  return 0;
}

/* A new request must join the reaper's aio_suspend() list (or the reaper
 * must stop).  Without a doorbell it sees it within AIO_POLL_NSEC. */
static void ring_reaper_locked(aio_state_t *s) {
  if (s->reaper_mode == REAPER_IDLE) {
    s->reaper_mode = REAPER_BUSY;
    taxi__cond_signal(&s->cond);
  } else if (s->reaper_mode == REAPER_SUSPENDED && s->bell_armed &&
             !s->bell_rung) {
    static const unsigned char one = 1;
    if (write(s->bell[1], &one, 1) == 1) s->bell_rung = true;
    count(s, 1);
  }
}

/* Start the aio request for op's next step: its first buffer left (the
 * header or trailer of a transmit-file), at the file offset for file
 * operations.  0 (OP_AIO), or the error that kept it from starting. */
static int aio_start_locked(aio_state_t *s, taxi_op_t *op) {
  aio_op_t *ao = room(op);
  taxi_buf_t b;
  if (taxi__op_remaining_bufs(op, &b, 1) != 1) return TAXI_EINVAL;
  int rc = reserve_flight_locked(s, s->nflight + 1);
  if (rc < 0) return rc;
  struct aiocb *cb = &ao->cb;
  memset(cb, 0, sizeof *cb);
  cb->aio_fildes = op->handle;
  cb->aio_buf = b.base;
  cb->aio_nbytes = b.len;
  if (is_file_op(op->kind)) {
    int64_t off = taxi__op_file_offset(op);
    if ((int64_t)(off_t)off != off) return TAXI_EINVAL;
    cb->aio_offset = (off_t)off;
  }
  cb->aio_sigevent.sigev_notify = SIGEV_NONE;
  bool input = op->kind == TAXI_OP_READ || op->kind == TAXI_OP_READ_FILE;
  int r = input ? aio_read(cb) : aio_write(cb);
  count(s, 1);
  if (r < 0) {
    /* EAGAIN: out of resources (glibc could not queue the request or
     * start a helper thread) - for now. */
    int err = taxi__last_error();
    ao->refused = err == TAXI_EAGAIN || err == TAXI_ENOMEM;
    return err;
  }
  taxi__backoff_reset(&s->refusals);
  ao->state = OP_AIO;
  s->flight[s->nflight++] = cb;
  ring_reaper_locked(s);
  return 0;
}

/* ---- steps -------------------------------------------------------------- */

/* The readiness op waits for when its step would block. */
static unsigned wants_of(const taxi_op_t *op) {
  return dir_of(op->kind) == 0 ? TAXI_EV_READ : TAXI_EV_WRITE;
}

/* Perform op's next step now that its handle is ready (or optimistically,
 * from submit).  Returns the step's result or TAXI_EAGAIN (wait for
 * readiness); *started when an aio request was started instead (OP_AIO),
 * whose result the reaper will list. */
static int64_t step_locked(aio_state_t *s, taxi_op_t *op, bool *started) {
  taxi__completion_counters_t *c = s->counters;
  aio_op_t *ao = room(op);
  *started = false;
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      return taxi__nbio_accept(op, c);
    case TAXI_OP_CONNECT:
      if (ao->connecting) return taxi__nbio_connect_check(op, c);
      ao->connecting = true;
      return taxi__nbio_connect_start(op, c);
    case TAXI_OP_TRANSMIT_FILE:
      if (taxi__op_tx_part(op) == TAXI__TX_FILE)
        return taxi__nbio_transmit(op, c);
      break;
    case TAXI_OP_WRITE: {
      /* Several buffers left: one gathering sendmsg, not an aio_write per
       * buffer (see WRITE at the top of the file). */
      taxi_buf_t left[2];
      if (taxi__op_remaining_bufs(op, left, 2) > 1)
        return taxi__nbio_write(op, c);
      break;
    }
    case TAXI_OP_READ:
      break;
    default:
      return TAXI_EINVAL;
  }
  int rc = aio_start_locked(s, op);
  if (rc < 0) return rc;
  *started = true;
  return 0;
}

/*
 * op's aio_read or aio_write was refused for want of resources: retrying
 * at once would be refused again, and waiting for readiness would not help
 * either (the socket is ready: that is why the request was made), so it
 * would spin.  Instead op waits on the retry list, and one timer of the
 * internal reactor tries the whole list again after a pause that grows
 * with each round refused in a row (core/common/backoff.h).  When the refusals
 * last too long, op completes with the error.  Returns true if it listed
 * a completion.
 */
static bool refused_locked(aio_state_t *s, taxi_op_t *op, int64_t r) {
  aio_op_t *ao = room(op);
  ao->refused = false;
  s->refused_unreported++;
  s->refused_code = (int)r;
  if (!s->retry_armed) {
    taxi_time_t pause = taxi__backoff_failed(&s->refusals);
    if (pause < 0 || taxi_reactor_schedule(s->reactor, &s->retry_timer,
                                           &s->wake_h, pause, 0, NULL) < 0) {
      taxi__backoff_reset(&s->refusals);
      ao->gave_up = true;
      push_done_locked(s, op, r);
      return true;
    }
    count(s, 1);
    s->retry_armed = true;
  }
  ao->state = OP_BACKOFF;
  ao->next = s->retry_head;
  s->retry_head = op;
  return false;
}

/* Take op off the retry list. */
static void unlist_retry_locked(aio_state_t *s, taxi_op_t *op) {
  taxi_op_t **at = &s->retry_head;
  while (*at && *at != op) at = &room(*at)->next;
  if (*at) *at = room(op)->next;
  room(op)->next = NULL;
}

/* Run op's step and file the outcome: armed again on EAGAIN, in flight,
 * or listed as done.  Returns true if it listed a completion. */
static bool advance_locked(aio_state_t *s, taxi_op_t *op) {
  bool started;
  int64_t r = step_locked(s, op, &started);
  if (started) return false;
  if (room(op)->refused) return refused_locked(s, op, r);
  r = settle_locked(s, op, r);
  if (r == TAXI_EAGAIN) {
    room(op)->state = OP_ARMED;
    room(op)->wants = wants_of(op);
    return false;
  }
  push_done_locked(s, op, r);
  return true;
}

/* A hook of the internal reactor: the handle became ready for direction
 * d; runs in the thread inside wait(). */
static void ready_locked(aio_state_t *s, aio_handle_t *ah, int d) {
  taxi_op_t *op = ah->dir[d];
  if (!op || room(op)->state != OP_ARMED) return;
  advance_locked(s, op);
}

static int handle_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  aio_handle_t *ah = TAXI_CONTAINER_OF(h, aio_handle_t, h);
  aio_state_t *s = ah->s;
  (void)fd;
  taxi__mutex_lock(&s->lock);
  if (!ah->detached) {
    ready_locked(s, ah, 0);
    /* A hang-up or an error goes to the input hook when READ is watched;
     * a writer waiting on the same handle learns of it from its step. */
    if (ev & (TAXI_EV_HUP | TAXI_EV_ERR)) ready_locked(s, ah, 1);
    rearm_locked(s, ah);
  }
  taxi__mutex_unlock(&s->lock);
  return 0;
}

static int handle_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  aio_handle_t *ah = TAXI_CONTAINER_OF(h, aio_handle_t, h);
  aio_state_t *s = ah->s;
  (void)fd;
  (void)ev;
  taxi__mutex_lock(&s->lock);
  if (!ah->detached) {
    ready_locked(s, ah, 1);
    rearm_locked(s, ah);
  }
  taxi__mutex_unlock(&s->lock);
  return 0;
}

/* The reactor is done with a removed handle (possibly inside
 * taxi_reactor_remove(), with our lock held: take no lock here). */
static void handle_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  taxi__free(TAXI_CONTAINER_OF(h, aio_handle_t, h));
}

static const taxi_handler_ops_t handle_ops = {
    .input = handle_input, .output = handle_output, .close = handle_close};

/* ---- the reaper --------------------------------------------------------- */

/* Keep a one-byte read of the doorbell pending, so that ringing it ends
 * the reaper's aio_suspend(). */
static void arm_bell_locked(aio_state_t *s) {
  struct aiocb *cb = &s->bell_cb;
  memset(cb, 0, sizeof *cb);
  cb->aio_fildes = s->bell[0];
  cb->aio_buf = s->bell_buf;
  cb->aio_nbytes = sizeof s->bell_buf;
  cb->aio_sigevent.sigev_notify = SIGEV_NONE;
  count(s, 1);
  if (aio_read(cb) == 0) {
    s->bell_armed = true;
    s->bell_rung = false;
  } else {
    s->bell_broken = true; /* poll instead */
  }
}

/* Take the requests that finished off the list and list their
 * completions; notice a doorbell that rang. */
static void harvest_locked(aio_state_t *s) {
  bool bell = s->bell_armed && aio_error(&s->bell_cb) != EINPROGRESS;
  /* Move the finished requests to the end of the list... */
  size_t n = s->nflight, done = 0;
  for (size_t i = 0; i < n - done;) {
    struct aiocb *cb = s->flight[i];
    if (aio_error(cb) == EINPROGRESS) {
      i++;
      continue;
    }
    done++;
    s->flight[i] = s->flight[n - done];
    s->flight[n - done] = cb;
  }
  if (!bell && !done) return;
  /* ...then take glibc's request lock once (aio_suspend() does, and
   * returns at once for a finished request): every helper that marked one
   * of them finished has left the critical section in which it still
   * reads the aiocb, which may be reused as soon as it is reported. */
  const struct aiocb *first[1] = {bell ? &s->bell_cb : s->flight[n - done]};
  struct timespec zero = {0, 0};
  aio_suspend(first, 1, &zero);
  count(s, 1);
  if (bell) {
    count(s, 2);
    if (aio_return(&s->bell_cb) <= 0) s->bell_broken = true;
    s->bell_armed = false;
    s->bell_rung = false;
  }
  for (size_t i = n - done; i < n; i++) {
    struct aiocb *cb = s->flight[i];
    int err = aio_error(cb);
    ssize_t r = aio_return(cb);
    count(s, 2);
    push_done_locked(
        s, op_of_cb(cb),
        settle_locked(s, op_of_cb(cb), err ? aio_status(err) : (int64_t)r));
  }
  s->nflight = n - done;
  if (done) kick_locked(s);
}

/* Fill the reaper's aio_suspend() list: the doorbell, then the requests
 * in flight (a rotating window of them if there are too many).  *poll is
 * set when something in flight is not covered by a wake-up. */
static size_t snapshot_locked(aio_state_t *s, bool *poll) {
  if (s->spare) {
    taxi__free(s->snap);
    s->snap = s->spare;
    s->snap_cap = s->spare_cap;
    s->spare = NULL;
  }
  size_t want = s->nflight + 1;
  if (want > AIO_SUSPEND_MAX) want = AIO_SUSPEND_MAX;
  if (s->snap_cap < want) { /* only if attach() could not make room */
    const struct aiocb **a = taxi__reallocarray(s->snap, want, sizeof *a);
    if (a) {
      s->snap = a;
      s->snap_cap = want;
    }
  }
  *poll = false;
  if (!AIO_TSAN && !s->bell_armed && !s->bell_broken) arm_bell_locked(s);
  size_t k = 0;
  if (s->bell_armed && s->snap_cap > 0)
    s->snap[k++] = &s->bell_cb;
  else
    *poll = true;
  size_t room_left = s->snap_cap - k;
  size_t take = s->nflight < room_left ? s->nflight : room_left;
  if (take < s->nflight) *poll = true;
  for (size_t i = 0; i < take; i++)
    s->snap[k++] = s->flight[(s->rotate + i) % s->nflight];
  s->rotate = take < s->nflight ? s->rotate + take : 0;
  return k;
}

/* Stop the doorbell before the pipe is closed: ring it and wait for the
 * pending read to finish. */
static void retire_bell_locked(aio_state_t *s) {
  if (!s->bell_armed) return;
  static const unsigned char one = 1;
  if (!s->bell_rung && write(s->bell[1], &one, 1) == 1) s->bell_rung = true;
  /* At least one aio_suspend(), also for a read found finished: it waits
   * for the helper to be done with the aiocb, which is freed next. */
  const struct aiocb *list[1] = {&s->bell_cb};
  do {
    taxi__mutex_unlock(&s->lock);
    aio_suspend(list, 1, NULL);
    taxi__mutex_lock(&s->lock);
  } while (aio_error(&s->bell_cb) == EINPROGRESS);
  aio_return(&s->bell_cb);
  s->bell_armed = false;
}

static void *reaper_main(void *arg) {
  aio_state_t *s = arg;
  const struct timespec poll_ts = {0, AIO_POLL_NSEC};
  taxi__mutex_lock(&s->lock);
  for (;;) {
    harvest_locked(s);
    if (s->nflight == 0) {
      if (s->stopping) break;
      s->reaper_mode = REAPER_IDLE;
      taxi__cond_wait(&s->cond, &s->lock);
      s->reaper_mode = REAPER_BUSY;
      continue;
    }
    bool poll;
    size_t n = snapshot_locked(s, &poll);
    s->reaper_mode = REAPER_SUSPENDED;
    taxi__mutex_unlock(&s->lock);
    /* Returns when one of them finished, on a signal, or after poll_ts;
     * the harvest looks at every request either way. */
    if (n > 0)
      aio_suspend(s->snap, (int)n, poll ? &poll_ts : NULL);
    else
      nanosleep(&poll_ts, NULL);
    taxi__mutex_lock(&s->lock);
    s->reaper_mode = REAPER_BUSY;
    if (n > 0) count_wait(s, 1);
  }
  retire_bell_locked(s);
  taxi__mutex_unlock(&s->lock);
  return NULL;
}

#if AIO_TSAN && defined(__GLIBC__)
static pthread_once_t tsan_once = PTHREAD_ONCE_INIT;

/* One glibc helper: it never starts another (see the top of the file).
 * Ignored by glibc if the process used aio before. */
static void tsan_one_helper(void) {
  struct aioinit init;
  memset(&init, 0, sizeof init);
  init.aio_threads = 1;
  init.aio_num = 32;
  aio_init(&init);
}
#endif

/* Start the reaper with every signal blocked, so that it never takes a
 * signal the application expects elsewhere (a reactor's signalfd needs
 * its signals blocked in all threads). */
static int start_reaper(aio_state_t *s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = taxi__thread_create(&s->reaper, reaper_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) s->reaper_started = true;
  return rc;
}

/* ---- the table ---------------------------------------------------------- */

static void aio_close(void *state);

static int open_bell(aio_state_t *s) {
  if (AIO_TSAN) return 0;
  /* The read end stays blocking: the pending aio_read must wait for a
   * ring, not return EAGAIN at once. */
  if (pipe2(s->bell, O_CLOEXEC) < 0) return taxi__last_error();
  return taxi__set_nonblocking(s->bell[1]);
}

static atomic_int instances;

/* The state with its lock and condition; nothing else yet. */
static int new_state(aio_state_t **out, taxi__completion_counters_t *c) {
  aio_state_t *s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  s->counters = c;
  s->bell[0] = s->bell[1] = -1;
  int rc = taxi__mutex_init(&s->lock);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  rc = taxi__cond_init(&s->cond);
  if (rc < 0) {
    taxi__mutex_destroy(&s->lock);
    taxi__free(s);
    return rc;
  }
  *out = s;
  return 0;
}

static int aio_open(void **state, const char *variant,
                    const taxi_proactor_options_t *opts,
                    taxi__completion_counters_t *counters) {
  if (atomic_fetch_add(&instances, 1) >= AIO_MAX_INSTANCES) {
    atomic_fetch_sub(&instances, 1);
    taxi__set_os_error(EAGAIN);
    return TAXI_ENOTSUP;
  }
  aio_state_t *s;
  int rc = new_state(&s, counters);
  if (rc < 0) {
    atomic_fetch_sub(&instances, 1);
    return rc;
  }
#if AIO_TSAN && defined(__GLIBC__)
  pthread_once(&tsan_once, tsan_one_helper);
#endif
  /* From here aio_close() undoes whatever was done. */
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = variant && *variant ? variant : NULL;
  rc = taxi_reactor_create(&s->reactor, &ro);
  if (rc == 0) {
    /* A failed wait of the internal reactor comes out of wait() at once,
     * for the proactor (or the pool dispatching it) to back off from,
     * count, report and, if it lasts, stop on; backing off inside as well
     * would hide it, and make the outer backoff count one failure per
     * inner series of pauses. */
    taxi__reactor_pass_wait_errors(s->reactor);
    rc = taxi__wakeup_open(&s->wakeup);
    s->wakeup_open = rc == 0;
  }
  if (opts) {
    s->on_error = opts->on_error;
    s->on_error_arg = opts->on_error_arg;
  }
  if (rc == 0) rc = taxi_timer_init(&s->retry_timer);
  if (rc == 0) rc = taxi_handler_init(&s->wake_h, &wake_ops);
  if (rc == 0)
    rc = taxi__reactor_register_own(s->reactor, taxi__wakeup_handle(&s->wakeup),
                                    &s->wake_h, TAXI_EV_READ);
  if (rc == 0) rc = open_bell(s);
  if (rc == 0) rc = start_reaper(s);
  if (rc < 0) {
    aio_close(s);
    return rc;
  }
  *state = s;
  return 0;
}

static void aio_close(void *state) {
  aio_state_t *s = state;
  if (!s) return;
  if (s->reaper_started) {
    taxi__mutex_lock(&s->lock);
    s->stopping = true;
    ring_reaper_locked(s);
    taxi__mutex_unlock(&s->lock);
    taxi__thread_join(s->reaper);
  }
  /* Handles the core did not detach: those in the reactor are freed by
   * its destruction (their close hook), the others here. */
  for (size_t i = 0; i < s->handles_cap; i++)
    if (s->handles[i] && !s->handles[i]->registered) taxi__free(s->handles[i]);
  if (s->reactor) taxi_reactor_destroy(s->reactor);
  if (s->wakeup_open) taxi__wakeup_close(&s->wakeup);
  for (int i = 0; i < 2; i++)
    if (s->bell[i] >= 0) close(s->bell[i]);
  taxi__free(s->handles);
  taxi__free(s->flight);
  taxi__free(s->snap);
  taxi__free(s->spare);
  taxi__cond_destroy(&s->cond);
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
  atomic_fetch_sub(&instances, 1);
}

static aio_handle_t *handle_of(aio_state_t *s, taxi_handle_t h) {
  return h >= 0 && (size_t)h < s->handles_cap ? s->handles[h] : NULL;
}

static int grow_handles_locked(aio_state_t *s, taxi_handle_t h) {
  if ((size_t)h < s->handles_cap) return 0;
  size_t cap = s->handles_cap ? s->handles_cap : 64;
  while (cap <= (size_t)h) cap *= 2;
  aio_handle_t **a = taxi__reallocarray(s->handles, cap, sizeof *a);
  if (!a) return TAXI_ENOMEM;
  memset(a + s->handles_cap, 0, (cap - s->handles_cap) * sizeof *a);
  s->handles = a;
  s->handles_cap = cap;
  return 0;
}

/* Make the reaper's aio_suspend() list long enough for `want` requests
 * and the doorbell.  The reaper reads it without the lock while it waits:
 * then a new list is left for it to take up before its next wait. */
static int reserve_snap_locked(aio_state_t *s, size_t want) {
  want = want + 1 < AIO_SUSPEND_MAX ? want + 1 : AIO_SUSPEND_MAX;
  if (s->snap_cap >= want || (s->spare && s->spare_cap >= want)) return 0;
  if (s->reaper_mode != REAPER_SUSPENDED) {
    const struct aiocb **a = taxi__reallocarray(s->snap, want, sizeof *a);
    if (!a) return TAXI_ENOMEM;
    s->snap = a;
    s->snap_cap = want;
    return 0;
  }
  const struct aiocb **a = taxi__reallocarray(NULL, want, sizeof *a);
  if (!a) return TAXI_ENOMEM;
  taxi__free(s->spare);
  s->spare = a;
  s->spare_cap = want;
  return 0;
}

static int attach_locked(aio_state_t *s, aio_handle_t *ah) {
  int rc = grow_handles_locked(s, ah->fd);
  if (rc < 0) return rc;
  if (s->handles[ah->fd]) return TAXI_EEXIST;
  /* Room for a request per direction of every handle (and for those of
   * detached handles not yet reaped), in the list of requests in flight
   * and in the reaper's: starting and waiting then never allocate. */
  size_t most = s->nflight + 2 * (s->nhandles + 1);
  rc = reserve_flight_locked(s, most);
  if (rc == 0) rc = reserve_snap_locked(s, most);
  if (rc < 0) return rc;
  s->handles[ah->fd] = ah;
  s->nhandles++;
  return 0;
}

static int aio_attach(void *state, taxi_handle_t h) {
  aio_state_t *s = state;
  if (h < 0) return TAXI_EBADF;
  int rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  bool file = taxi__nbio_is_file(h) == 1;
  /* A request on a socket must never block a glibc helper (see READ). */
  if (!file && (rc = taxi__set_nonblocking(h)) < 0) return rc;
  aio_handle_t *ah = taxi__calloc(1, sizeof *ah);
  if (!ah) return TAXI_ENOMEM;
  taxi_handler_init(&ah->h, &handle_ops);
  ah->s = s;
  ah->fd = h;
  ah->file = file;
  taxi__mutex_lock(&s->lock);
  rc = attach_locked(s, ah);
  taxi__mutex_unlock(&s->lock);
  if (rc < 0) taxi__free(ah);
  return rc;
}

static void aio_detach(void *state, taxi_handle_t h) {
  aio_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  aio_handle_t *ah = handle_of(s, h);
  if (!ah) {
    taxi__mutex_unlock(&s->lock);
    return;
  }
  s->handles[h] = NULL;
  s->nhandles--;
  ah->detached = true;
  /* The core cancelled everything first; an operation still waiting for
   * readiness is finished here all the same. */
  for (int d = 0; d < 2; d++) {
    taxi_op_t *op = ah->dir[d];
    if (op && room(op)->state == OP_BACKOFF) unlist_retry_locked(s, op);
    if (op && (room(op)->state == OP_ARMED || room(op)->state == OP_BACKOFF)) {
      push_done_locked(s, op, TAXI_ECANCELED);
      kick_locked(s);
    }
  }
  /* Requests still running finish by themselves (cancelled or with their
   * own result) and are reaped as usual; their completions no longer
   * refer to the handle. */
  for (int d = 0; d < 2; d++) {
    if (ah->dir[d]) room(ah->dir[d])->ah = NULL;
    ah->dir[d] = NULL;
  }
  if (ah->registered) {
    taxi_reactor_remove(s->reactor, &ah->h); /* frees ah, now or later */
    count(s, 1);
  } else {
    taxi__free(ah);
  }
  taxi__mutex_unlock(&s->lock);
}

/* Start op (see the top of the file for what each kind does). */
static int submit_locked(aio_state_t *s, aio_handle_t *ah, taxi_op_t *op) {
  int d = dir_of(op->kind);
  if (d < 0) return TAXI_EINVAL;
  if (is_file_op(op->kind) != ah->file) return TAXI_ENOTSUP;
  if (ah->dir[d]) return TAXI_EBUSY; /* the core submits one at a time */
  aio_op_t *ao = room(op);
  memset(ao, 0, sizeof *ao);
  ao->ah = ah;
  if (is_file_op(op->kind)) {
    int rc = aio_start_locked(s, op);
    if (rc < 0) return rc;
  } else if (op->kind == TAXI_OP_READ || op->kind == TAXI_OP_ACCEPT) {
    ao->state = OP_ARMED; /* data is seldom there yet: wait for it */
    ao->wants = TAXI_EV_READ;
  } else if (advance_locked(s, op)) {
    kick_locked(s);
  }
  ah->dir[d] = op;
  if (ao->state == OP_ARMED) {
    int rc = rearm_locked(s, ah);
    if (rc < 0) {
      ah->dir[d] = NULL;
      ao->state = OP_IDLE;
      return rc;
    }
  }
  return 0;
}

static int aio_submit(void *state, taxi_op_t *op) {
  aio_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  aio_handle_t *ah = handle_of(s, op->handle);
  int rc = ah ? submit_locked(s, ah, op) : TAXI_ENOENT;
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int aio_cancel_op(void *state, taxi_op_t *op) {
  aio_state_t *s = state;
  aio_op_t *ao = room(op);
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  switch (ao->state) {
    case OP_ARMED:
      push_done_locked(s, op, TAXI_ECANCELED);
      kick_locked(s);
      if (ao->ah) rearm_locked(s, ao->ah);
      break;
    case OP_AIO:
      /* AIO_CANCELED: the reaper finds it ECANCELED; AIO_NOTCANCELED:
       * running, it completes with its own result; AIO_ALLDONE: finished,
       * the reaper has yet to report it.  One completion in every case. */
      ao->cancel = true;
      aio_cancel(ao->cb.aio_fildes, &ao->cb);
      count(s, 1);
      break;
    case OP_DONE:
      ao->cancel = true; /* its completion is on the list already */
      break;
    case OP_BACKOFF:
      unlist_retry_locked(s, op);
      push_done_locked(s, op, TAXI_ECANCELED);
      kick_locked(s);
      break;
    default:
      rc = TAXI_ENOENT;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

/* A socket request that found nothing to do (EAGAIN: readiness reported
 * spuriously, or an optimistic write to a full socket) waits for
 * readiness again instead of completing.  Returns true if it does; else
 * *result is what op completes with. */
static bool retry_locked(aio_state_t *s, taxi_op_t *op, int64_t *result) {
  aio_op_t *ao = room(op);
  /* A detached handle had its operations cancelled by the core first. */
  if (ao->cancel || !ao->ah || ao->ah->detached) {
    *result = TAXI_ECANCELED;
    return false;
  }
  if (ao->ah->file) return false;
  ao->state = OP_ARMED;
  ao->wants = wants_of(op);
  int rc = rearm_locked(s, ao->ah);
  if (rc == 0) return true;
  ao->state = OP_DONE;
  *result = rc;
  return false;
}

/* Take up to max completions off the list. */
static int take_locked(aio_state_t *s, taxi__completion_t *out, size_t max) {
  size_t n = 0;
  while (n < max && s->done_head) {
    taxi_op_t *op = s->done_head;
    aio_op_t *ao = room(op);
    s->done_head = ao->next;
    if (!s->done_head) s->done_tail = NULL;
    int64_t result = ao->result;
    if (result == TAXI_EAGAIN && !ao->gave_up && retry_locked(s, op, &result))
      continue;
    int d = dir_of(op->kind);
    if (ao->ah && ao->ah->dir[d] == op) ao->ah->dir[d] = NULL;
    ao->ah = NULL;
    ao->state = OP_IDLE;
    out[n].op = op;
    out[n].result = result;
    out[n].flags = 0;
    n++;
  }
  return (int)n;
}

static uint64_t reactor_waits(aio_state_t *s) {
  taxi_reactor_stats_t st;
  return taxi_reactor_stats(s->reactor, &st) == 0 ? st.waits : 0;
}

static int wait_ms(taxi_time_t now, taxi_time_t deadline) {
  if (deadline == INT64_MAX) return -1;
  if (deadline <= now) return 0;
  taxi_time_t ms =
      (deadline - now + TAXI_NSEC_PER_MSEC - 1) / TAXI_NSEC_PER_MSEC;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Return listed completions at once; else let the internal reactor wait
 * (its hooks perform the readiness steps, the reaper wakes it) until
 * something is listed, wake() is called or the time is up. */
static int aio_wait(void *state, taxi__completion_t *out, size_t max,
                    int timeout_ms) {
  aio_state_t *s = state;
  if (!out || max == 0) return TAXI_EINVAL;
  taxi_time_t now = taxi_now();
  taxi_time_t deadline =
      timeout_ms < 0 ? INT64_MAX
                     : now + (taxi_time_t)timeout_ms * TAXI_NSEC_PER_MSEC;
  bool waited = false;
  for (;;) {
    taxi__mutex_lock(&s->lock);
    s->waiting = false;
    int n = take_locked(s, out, max);
    bool woken = atomic_exchange(&s->wake_asked, false);
    bool done = n > 0 || woken || (waited && now >= deadline);
    if (!done) s->waiting = true;
    taxi__mutex_unlock(&s->lock);
    if (done) return n;

    uint64_t before = reactor_waits(s);
    int rc = taxi_reactor_handle_events(s->reactor, wait_ms(now, deadline));
    count_wait(s, reactor_waits(s) - before);
    waited = true;
    now = taxi_now();
    if (rc < 0) {
      taxi__mutex_lock(&s->lock);
      s->waiting = false;
      n = take_locked(s, out, max);
      taxi__mutex_unlock(&s->lock);
      return n > 0 ? n : rc;
    }
  }
}

static void aio_wake(void *state, int all) {
  aio_state_t *s = state;
  (void)all; /* one waiter at a time: no TAXI__PCAP_MULTI_WAIT */
  /* No lock: callable from a signal handler (by taxi_proactor_stop).  The
   * channel is signalled whether or not a thread waits: a wait about to
   * start returns at once (it sees wake_asked); a stale signal costs the
   * next wait one empty turn. */
  atomic_store(&s->wake_asked, true);
  if (taxi__wakeup_signal(&s->wakeup) > 0) count(s, 1);
}

static const char *aio_reactor_backend(void *state) {
  const struct aio_state *s = state;
  return taxi_reactor_backend(s->reactor);
}

const taxi__completion_ops_t taxi__completion_aio = {
    .name = "aio",
    .caps = 0,
    .open = aio_open,
    .reactor_backend = aio_reactor_backend,
    .close = aio_close,
    .attach = aio_attach,
    .detach = aio_detach,
    .submit = aio_submit,
    .cancel = aio_cancel_op,
    .wait = aio_wait,
    .wake = aio_wake,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__completion_aio_absent;
#endif /* TAXI_HAVE_AIO */
