/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_ring.c - the io_uring ring itself: entering the
 * kernel (every enter counted), the submission queue and who may enter
 * it, registered-file slots in requests, the wake-up poll, and making the
 * ring with the best flags the kernel takes (docs/backends/uring.md,
 * "Batching", "Waking a wait", "Ring set-up").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* syscall(2) */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the rings ----------------------------------------------------------- */

int uring_ring_enter(uring_state_t *s, unsigned to_submit,
                     unsigned min_complete, unsigned flags, const void *arg,
                     size_t argsz, bool is_wait) {
  long r;
  count_syscall(s);
  if (is_wait)
    atomic_fetch_add_explicit(&s->counters->waits, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->counters->enters, 1, memory_order_relaxed);
  r = syscall(__NR_io_uring_enter, s->ring.ring_fd, to_submit, min_complete,
              flags, arg, argsz);
  if (r < 0) return -errno;
  /* What it returns is the number of SQEs the kernel consumed. */
  if (to_submit && r > 0)
    atomic_fetch_add_explicit(&s->counters->sqes, (uint64_t)r,
                              memory_order_relaxed);
  return (int)r;
}

/*
 * Publish the SQEs prepared since the last call to the kernel's SQ tail and
 * return what the next io_uring_enter should pass as to_submit: 0 when the
 * kernel has consumed everything, else the size of the SQ.  liburing keeps
 * this step private (__io_uring_flush_sq); it is repeated here so that it
 * runs under the mutex while the enter that follows may run without it.
 *
 * Why not the exact count: by the time a waiter's enter runs without the
 * mutex, another thread may have published more entries and submitted some
 * of them, and a stale count could then end the kernel's batch between the
 * two linked SQEs of a transmit-file step (the kernel would run them
 * unlinked).  The kernel submits min(to_submit, entries published), and
 * the tail is only ever published after whole steps, so asking for "all"
 * always stops at a step boundary.  Entries the kernel did not take last
 * time (it refused the batch) are submitted again.
 */
unsigned uring_sq_flush(uring_state_t *s) {
  struct io_uring_sq *sq = &s->ring.sq;
  unsigned tail = sq->sqe_tail;
  if (sq->sqe_head != tail) {
    sq->sqe_head = tail;
    /* Release: the kernel must see the SQE contents before the tail. */
    io_uring_smp_store_release(sq->ktail, tail);
  }
  return tail != io_uring_smp_load_acquire(sq->khead) ? sq->ring_entries : 0;
}

/* Completions wait in the kernel's overflow list (IORING_FEAT_NODROP);
 * an io_uring_enter with IORING_ENTER_GETEVENTS moves them to the CQ.
 * The same enter runs the task work of a one-thread ring. */
/* Completions that only an io_uring_enter with IORING_ENTER_GETEVENTS
 * brings into the CQ: an overflow, or (COOP_TASKRUN, DEFER_TASKRUN) task
 * work waiting for this ring's thread, which IORING_SETUP_TASKRUN_FLAG
 * makes the kernel tell with IORING_SQ_TASKRUN. */
bool uring_cq_needs_enter(uring_state_t *s) {
  return IO_URING_READ_ONCE(*s->ring.sq.kflags) &
         (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN);
}

/* Hand every prepared SQE to the kernel now (lock held).  Refused (EAGAIN,
 * EBUSY, ENOMEM: the kernel short of resources), they stay in the SQ, and
 * a thread blocked in wait() is woken to submit them with its next wait,
 * which reports a refusal that lasts (see uring_wait). */
static bool may_enter(uring_state_t *s) {
  return !s->single ||
         (s->enabled && pthread_equal(s->owner, pthread_self()) != 0);
}

void uring_sq_submit_now(uring_state_t *s) {
  unsigned n = uring_sq_flush(s);
  int r = 0;
  if (n == 0) return;
  if (!may_enter(s)) {
    /* A one-thread ring: its thread submits them with its next wait,
     * woken now if it is blocked in one.  (The SQ full, the caller finds
     * no room and puts its operation on the backlog.) */
    if (s->in_wait > 0) uring_wake_now(s);
    return;
  }
  for (int i = 0; i < URING_WAKE_TRIES; i++) {
    r = uring_ring_enter(s, n, 0, 0, NULL, 0, false);
    if (r != -EINTR) break;
  }
  if (r < 0 && s->in_wait > 0) uring_wake_now(s);
}

/* After preparing SQEs (lock held): a thread blocked in wait() would not
 * submit them before it returns, so do it here. */
void uring_sq_kick(uring_state_t *s) {
  if (s->in_wait > 0) uring_sq_submit_now(s);
}

/* `n` free SQEs, submitting what is prepared if the SQ is full.  false when
 * the kernel did not make room (it refused the batch). */
bool uring_sq_reserve(uring_state_t *s, unsigned n) {
  if (io_uring_sq_space_left(&s->ring) >= n) return true;
  uring_sq_submit_now(s);
  return io_uring_sq_space_left(&s->ring) >= n;
}

struct io_uring_sqe *uring_sqe_get(uring_state_t *s) {
  return uring_sq_reserve(s, 1) ? io_uring_get_sqe(&s->ring) : NULL;
}

struct io_uring_sqe *uring_sqe_for_files(void *ctx) {
  return uring_sqe_get(ctx);
}

/* The slot a request on op's handle names, or -1 for its fd (see
 * "Registered files" in docs/backends/uring.md).  Called before the request's
 * SQEs are taken: an install it queues comes first. */
int uring_handle_slot(uring_state_t *s, taxi_op_t *op) {
  return uring_files_use(&s->files, op->handle, uring_sqe_for_files, s);
}

/* Make sqe, prepared on op->handle, name `slot` instead (-1: keep the
 * fd).  sqe->fd is the handle in every request this applies to (the
 * output end of a splice). */
void uring_sqe_slot(struct io_uring_sqe *sqe, taxi_op_t *op, int slot) {
  uop(op)->fixed = slot + 1;
  if (slot < 0) return;
  sqe->fd = slot;
  sqe->flags |= IOSQE_FIXED_FILE;
}

/* ---- wake-ups ------------------------------------------------------------ */

/* Make the wait in progress, or the next one, return: any thread, with or
 * without the lock; needs no SQE.  A write already made and not yet
 * drained will do: wake-ups coalesce. */
void uring_wake_now(uring_state_t *s) {
  atomic_store_explicit(&s->wake_asked, 1, memory_order_seq_cst);
  int r = taxi__wakeup_signal(&s->wakeup); /* EINTR retried there */
  if (r > 0) count_syscall(s);
  /* Cannot happen with a working channel; should it, waits stop blocking
   * for long (enter_and_wait) and see wake_asked within
   * URING_BACKLOG_RETRY_NS. */
  if (r < 0) atomic_store_explicit(&s->wake_broken, 1, memory_order_seq_cst);
}

/* The CQE of the wake-up poll: drain the eventfd, so that the next write
 * is a new event; a single-shot poll (or a multishot one the kernel
 * ended) is prepared again by the next wait.  Lock held. */
void uring_on_wake_cqe(uring_state_t *s, const struct io_uring_cqe *c) {
  /* A failed drain leaves the channel readable; the next signal still
   * wakes the poll. */
  count_syscall(s);
  taxi__wakeup_drain(&s->wakeup);
  if (!(c->flags & IORING_CQE_F_MORE)) s->wake_poll = WAKE_POLL_OFF;
}

/* Prepare the wake-up poll if it is not in the kernel (lock held):
 * multishot where the kernel has it (5.13; taken with multishot accept,
 * 5.19), else one shot prepared again after each wake-up. */
void uring_wake_poll_arm(uring_state_t *s) {
  struct io_uring_sqe *sqe;
  if (s->wake_poll == WAKE_POLL_PREPARED &&
      (int)(io_uring_smp_load_acquire(s->ring.sq.khead) - s->wake_poll_pos) >=
          0)
    s->wake_poll = WAKE_POLL_ARMED;
  if (s->wake_poll != WAKE_POLL_OFF) return;
  sqe = uring_sqe_get(s);
  if (!sqe) return; /* the next wait tries again; meanwhile it polls */
  if (s->native_multishot)
    io_uring_prep_poll_multishot(sqe, taxi__wakeup_handle(&s->wakeup), POLLIN);
  else
    io_uring_prep_poll_add(sqe, taxi__wakeup_handle(&s->wakeup), POLLIN);
  sqe->user_data = UD_WAKE;
  s->wake_poll = WAKE_POLL_PREPARED;
  s->wake_poll_pos = s->ring.sq.sqe_tail;
}

int uring_open_error(int err) {
  taxi__set_os_error(err);
  switch (err) {
    case ENOSYS:
    case EINVAL: /* a kernel too old for the setup flags asked for */
      return TAXI_ENOTSUP;
    case EPERM:
    case EACCES:
      return TAXI_EPERM;
    case ENOMEM:
      /* Before 5.12 the rings count against RLIMIT_MEMLOCK, and a small
       * limit fails the setup with ENOMEM: a refusal to fall back from,
       * not a shortage to stop on. */
      return TAXI_ENOTSUP;
    default:
      return taxi__error_from_os(err);
  }
}

static const unsigned char uring_required_ops[] = {
    IORING_OP_NOP,      IORING_OP_ACCEPT,       IORING_OP_CONNECT,
    IORING_OP_RECV,     IORING_OP_SEND,         IORING_OP_SENDMSG,
    IORING_OP_READ,     IORING_OP_WRITE,        IORING_OP_SPLICE,
    IORING_OP_POLL_ADD, IORING_OP_ASYNC_CANCEL,
};

/* Check the opcodes this file uses; *has_socket tells a 5.19 kernel,
 * *has_update whether the table of registered files can be used. */
int uring_check_ops(struct io_uring *ring, bool *has_socket, bool *has_send_zc,
                    bool *has_update) {
  union {
    struct io_uring_probe p;
    unsigned char room[sizeof(struct io_uring_probe) +
                       256 * sizeof(struct io_uring_probe_op)];
  } u;
  memset(&u, 0, sizeof u);
  if (io_uring_register_probe(ring, &u.p, 256) < 0) return ENOSYS;
  for (size_t i = 0; i < sizeof uring_required_ops; i++)
    if (!io_uring_opcode_supported(&u.p, uring_required_ops[i])) return ENOSYS;
  *has_socket = io_uring_opcode_supported(&u.p, IORING_OP_SOCKET);
  *has_send_zc = io_uring_opcode_supported(&u.p, URING_OP_SEND_ZC);
  *has_update = io_uring_opcode_supported(&u.p, IORING_OP_FILES_UPDATE);
  return 0;
}

/* The setup flags to try, best first: each later entry drops what a
 * kernel may not know.  One-thread rings start disabled, so that the
 * thread that first waits becomes their issuer (io_uring_enable_rings). */
int uring_ring_setup(uring_state_t *s, unsigned depth, bool compat, bool single,
                     bool no_defer) {
  const unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
  const unsigned one = IORING_SETUP_R_DISABLED | IORING_SETUP_TASKRUN_FLAG;
  unsigned tries[5], n = 0;
  int r = -EINVAL;
  if (single && !compat) {
    if (!no_defer)
      tries[n++] = base | IORING_SETUP_SUBMIT_ALL | one |
                   IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    tries[n++] = base | IORING_SETUP_SUBMIT_ALL | one |
                 IORING_SETUP_COOP_TASKRUN; /* 5.19 */
  }
  if (single) tries[n++] = base | IORING_SETUP_R_DISABLED;
  if (!compat) tries[n++] = base | IORING_SETUP_SUBMIT_ALL; /* 5.18 */
  tries[n++] = base;
  unsigned cq = depth * URING_CQ_FACTOR;
  if (cq < URING_CQ_MIN) cq = URING_CQ_MIN;
  for (unsigned i = 0; i < n; i++) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = tries[i];
    p.cq_entries = cq;
    r = io_uring_queue_init_params(depth, &s->ring, &p);
    if (r == -ENOMEM && cq > depth * URING_CQ_FACTOR) {
      /* Locked memory short (RLIMIT_MEMLOCK before 5.12): the depth's
       * share, with the same flags, from here on. */
      cq = depth * URING_CQ_FACTOR;
      memset(&p, 0, sizeof p);
      p.flags = tries[i];
      p.cq_entries = cq;
      r = io_uring_queue_init_params(depth, &s->ring, &p);
    }
    if (r == -EINVAL) continue;
    if (r < 0) break;
    if (!(p.features & IORING_FEAT_NODROP) ||
        !(p.features & IORING_FEAT_EXT_ARG)) {
      io_uring_queue_exit(&s->ring);
      return uring_open_error(ENOSYS); /* before 5.11 */
    }
    s->setup_flags = tries[i];
    s->ring_features = p.features;
    s->single = (tries[i] & IORING_SETUP_R_DISABLED) != 0;
    return 0;
  }
  return uring_open_error(-r);
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_ring_absent;
#endif /* TAXI_HAVE_URING */
