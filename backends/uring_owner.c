/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_owner.c - the io_uring backend's one-thread rings
 * (docs/backends/uring.md, "One thread, one ring"): the first thread that
 * waits enables the ring and owns it; a wait from any other thread (a
 * destroy after the owner has gone) completes what it can without
 * entering the ring, and closes the ring once the owner has exited.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* syscall(2), SYS_gettid */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A one-thread ring: the first thread that waits enables it and becomes
 * its issuer.  1 when the calling thread is that thread, 0 when not, or
 * the error enabling it (cannot happen to a ring made disabled; should
 * it, the wait reports it and the proactor backs off). */
int uring_own_ring(uring_state_t *s) {
  if (!s->single) return 1;
  if (s->enabled) return pthread_equal(s->owner, pthread_self()) != 0;
  /* The system call itself: not every liburing exports the wrapper. */
  count_syscall(s);
  if (syscall(__NR_io_uring_register, s->ring.ring_fd,
              IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0) {
    int err = errno;
    taxi__set_os_error(err);
    return taxi__error_from_os(err);
  }
  s->enabled = true;
  s->owner = pthread_self();
  s->owner_tid = (pid_t)syscall(SYS_gettid);
  return 1;
}

/* Complete, as cancelled, the requests still in the SQ: a ring whose
 * thread has gone can submit nothing more.  The wake-up poll and cancel
 * requests among them are just dropped. */
static void orphan_cancel_sq(uring_state_t *s, sink_t *k, bool *woken) {
  struct io_uring_sq *sq = &s->ring.sq;
  unsigned head = io_uring_smp_load_acquire(sq->khead);
  for (; head != sq->sqe_tail && k->n < k->max; head++) {
    const struct io_uring_sqe *e = &sq->sqes[head & *sq->kring_mask];
    struct io_uring_cqe c;
    memset(&c, 0, sizeof c);
    c.user_data = e->user_data;
    c.res = -ECANCELED;
    if (e->user_data == UD_WAKE) s->wake_poll = WAKE_POLL_OFF;
    if (e->user_data == UD_WAKE || e->user_data == UD_CANCEL_ACK ||
        (e->user_data & URING_FILES_UD))
      continue;
    uring_on_cqe(s, k, &c, woken);
  }
  /* Marked consumed for this file; the kernel never looks again. */
  io_uring_smp_store_release(sq->khead, head);
  sq->sqe_head = head;
}

/*
 * wait() in a thread that does not own the one-thread ring: taxi_proactor
 * _destroy run by another thread than the one that dispatched, which the
 * kernel does not let enter the ring (EEXIST).  What the CQ holds is read
 * without a system call, and what is only in the SQ never reached the
 * kernel: completed here as cancelled.  While the owner lives nothing more
 * can be done from here: TAXI_EBUSY, which the proactor reports and backs
 * off from.  Once it has exited, requests it left in the kernel (a receive
 * waiting for data) would wait for good, since only the owner could
 * cancel them: the ring is closed, which makes the kernel cancel them, and
 * TAXI_ESTOPPED tells the proactor to complete them as cancelled.  (A
 * cancelled socket request never touches its buffer; a regular-file read
 * that an io-wq worker has already started may still finish after that,
 * which is why taxi/proactor.h asks for the destroy in the owning thread.)
 */
int uring_orphan_wait(uring_state_t *s, sink_t *k) {
  bool woken = false;
  if (s->closed) return TAXI_ESTOPPED;
  uring_deferred_drain(s, k);
  uring_reap(s, k, &woken);
  orphan_cancel_sq(s, k, &woken);
  uring_backlog_run(s, k);
  orphan_cancel_sq(s, k, &woken);
  if (k->n > 0) return (int)k->n;
  if (s->owner_tid > 0 && syscall(SYS_tgkill, getpid(), s->owner_tid, 0) == 0) {
    taxi__set_os_error(EEXIST);
    return TAXI_EBUSY;
  }
  io_uring_queue_exit(&s->ring);
  count_syscall(s);
  s->closed = true;
  return TAXI_ESTOPPED;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_owner_absent;
#endif /* TAXI_HAVE_URING */
