/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/aio_impl.h - what the files of the POSIX aio completion backend
 * share (private to backends/aio*.c): its state, its part of an operation
 * record, and the functions one file calls in another.  How the backend
 * works is told in docs/backends/aio.md.
 *
 * A function whose name ends in _locked runs with the backend's mutex
 * (aio_state_t.lock) held.
 */
#ifndef TAXI_BACKENDS_AIO_IMPL_H
#define TAXI_BACKENDS_AIO_IMPL_H

#include "backends/completion.h"
#include "core/common/backoff.h"
#include "core/common/spares.h"
#include "core/proactor/proactor_op.h"
#include "ports/port.h"
#include "taxi/reactor.h"

#include <aio.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

  /* Records of detached handles, kept for the next attach (a connection
   * per request attaches and detaches one each); their own lock, as the
   * reactor's close hook returns them, maybe with `lock` held. */
  taxi__spares_t idle;
};

static inline aio_op_t *room(taxi_op_t *op) { return taxi__op_backend(op); }

static inline taxi_op_t *op_of_cb(struct aiocb *cb) {
  return (taxi_op_t *)(void *)((char *)cb -
                               offsetof(taxi_op_t, internal_.backend));
}

static inline void count(aio_state_t *s, uint64_t n) {
  atomic_fetch_add_explicit(&s->counters->syscalls, n, memory_order_relaxed);
}

static inline void count_wait(aio_state_t *s, uint64_t n) {
  count(s, n);
  atomic_fetch_add_explicit(&s->counters->waits, n, memory_order_relaxed);
}

/* Per-handle queue of an operation kind: 0 input, 1 output, -1 none. */
static inline int dir_of(taxi_op_kind_t kind) {
  switch (kind) {
    case TAXI_OP_ACCEPT:
    case TAXI_OP_READ:
    case TAXI_OP_READ_FILE:
    case TAXI_OP_RECVFROM:
      return 0;
    case TAXI_OP_CONNECT:
    case TAXI_OP_WRITE:
    case TAXI_OP_WRITE_FILE:
    case TAXI_OP_TRANSMIT_FILE:
    case TAXI_OP_SENDTO:
      return 1;
    default:
      return -1;
  }
}

static inline bool is_file_op(taxi_op_kind_t kind) {
  return kind == TAXI_OP_READ_FILE || kind == TAXI_OP_WRITE_FILE;
}

/* An aio_error() value as a completion result. */
static inline int64_t aio_status(int err) {
  return err == ECANCELED ? TAXI_ECANCELED : taxi__error_from_os(err);
}

/* The readiness op waits for when its step would block. */
static inline unsigned wants_of(const taxi_op_t *op) {
  return dir_of(op->kind) == 0 ? TAXI_EV_READ : TAXI_EV_WRITE;
}

/* ---- steps (backends/aio_steps.c) ---------------------------------------- */

/* The hooks of the handler that wakes wait() (its wake-up channel) and
 * retries refused requests (its timer). */
extern const taxi_handler_ops_t taxi__aio_wake_ops;
/* The hooks of an attached handle in the internal reactor. */
extern const taxi_handler_ops_t taxi__aio_handle_ops;

/* Wake the thread in wait(), if any, to look at the completion list. */
void taxi__aio_kick_locked(aio_state_t *s);
/* Put op on the completion list with `result`. */
void taxi__aio_push_done_locked(aio_state_t *s, taxi_op_t *op, int64_t result);
/* op's result r, or the error the internal reactor saw on its handle. */
int64_t taxi__aio_settle_locked(aio_state_t *s, taxi_op_t *op, int64_t r);
/* Make the reactor watch ah for what its armed operations wait for. */
int taxi__aio_rearm_locked(aio_state_t *s, aio_handle_t *ah);
/* Room for `need` requests in flight: 0 or TAXI_ENOMEM. */
int taxi__aio_reserve_flight_locked(aio_state_t *s, size_t need);
/* Tell the reaper that its list changed (or that it must stop). */
void taxi__aio_ring_reaper_locked(aio_state_t *s);
/* Start the aio request of op's next step: 0, or the error. */
int taxi__aio_start_locked(aio_state_t *s, taxi_op_t *op);
/* Take op off the list of refused requests. */
void taxi__aio_unlist_retry_locked(aio_state_t *s, taxi_op_t *op);
/* Run op's step and file the outcome; true if it listed a completion. */
bool taxi__aio_advance_locked(aio_state_t *s, taxi_op_t *op);

/* ---- the reaper (backends/aio_reaper.c) ---------------------------------- */

/* Start the reaper thread: 0, or the error (no lock). */
int taxi__aio_start_reaper(aio_state_t *s);
/* Make the doorbell's pipe (none under TSan): 0, or the error (no lock). */
int taxi__aio_open_bell(aio_state_t *s);
/* Make the reaper's list long enough for `want` requests and the bell. */
int taxi__aio_reserve_snap_locked(aio_state_t *s, size_t want);
/* Under TSan, limit glibc to one aio helper (once per process; no lock). */
void taxi__aio_tsan_init(void);

#endif /* TAXI_BACKENDS_AIO_IMPL_H */
