/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring.c - the Linux io_uring completion backend, over liburing:
 * its table (taxi__completion_uring) and the contract of
 * backends/completion.h.
 *
 * One ring per proactor.  submit() turns one step of an operation into
 * one or two SQEs whose user_data is the operation record; wait() hands
 * the prepared SQEs to the kernel in the same io_uring_enter(2) that
 * waits, and reaps CQEs into {op, result}.  The kernel moves the data.
 * Every touch of the SQ and the CQ, and of the backend's part of the
 * records, is made under the backend's mutex, never held across a
 * blocking enter.  Linux 5.11 at least; refused (ENOSYS, EPERM), open
 * fails so that the automatic choice moves on.
 *
 * How it works, and why (batching, threads, each operation, wake-ups,
 * transmit-file, one-thread rings, pooled reads, registered files,
 * refusals, kernel requirements): docs/backends/uring.md.  The other
 * files: uring_ring.c (the ring, its set-up, wake-ups), uring_prep.c
 * (requests), uring_pipe.c (transmit-file's pipes), uring_queue.c (the
 * backlog, deferred completions), uring_reap.c (completions),
 * uring_owner.c (one-thread rings, orphans), uring_bufring.c (provided
 * buffers), uring_files.c (registered files).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* syscall(2) */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include "core/common/alloc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define URING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define URING_ASAN 1
#endif
#endif
#ifdef URING_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* The slots of the table of registered files (docs/backends/uring.md,
 * "Registered files"): URING_FILES_SLOTS, or what TAXI_URING_FILES says (a
 * test's knob; 0: no table), at most IORING_MAX_FIXED_FILES of 5.11 and
 * RLIMIT_NOFILE. */
static unsigned files_slots(uring_state_t *s) {
  const char *env = getenv("TAXI_URING_FILES");
  unsigned long n = URING_FILES_SLOTS;
  struct rlimit rl;
  if (env && *env) {
    char *end;
    errno = 0;
    n = strtoul(env, &end, 10);
    if (*end || errno) n = URING_FILES_SLOTS;
  }
  if (n > 32768) n = 32768;
  count_syscall(s);
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < n)
    n = (unsigned long)rl.rlim_cur;
  return (unsigned)n;
}

static int uring_open(void **state, const char *variant,
                      const taxi_proactor_options_t *opts,
                      taxi__completion_counters_t *counters) {
  uring_state_t *s;
  unsigned depth =
      opts && opts->queue_depth ? opts->queue_depth : URING_DEFAULT_DEPTH;
  bool compat = false, has_socket = false, has_update = false;
  long page;
  int r;
  if (!state || !counters) return TAXI_EINVAL;
  if (variant) {
    /* "compat": only what Linux 5.11 has (tests the fallbacks). */
    if (strcmp(variant, "compat") != 0) return TAXI_ENOBACKEND;
    compat = true;
  }
  /* A transmit-file step is two linked SQEs, and so is cancelling one:
   * the SQ must hold them at once. */
  if (depth < 4) depth = 4;
  if (depth > 32768) depth = 32768; /* IORING_MAX_ENTRIES */
  s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  r = taxi__mutex_init(&s->lock);
  if (r < 0) {
    taxi__free(s);
    return r;
  }
  s->counters = counters;
  r = uring_ring_setup(s, depth, compat,
                       opts && (opts->flags & TAXI_PROACTOR_ONE_THREAD),
                       opts && (opts->flags & TAXI_PROACTOR_NO_DEFER_TASKRUN));
  if (r == 0) {
    int err = uring_check_ops(&s->ring, &has_socket, &s->has_recv_multishot,
                              &has_update);
    if (err) {
      io_uring_queue_exit(&s->ring);
      r = uring_open_error(err);
    }
  }
  if (r == 0) {
    count_syscall(s);
    r = taxi__wakeup_open(&s->wakeup);
    if (r < 0) io_uring_queue_exit(&s->ring);
  }
  if (r == 0) {
    /* Now, before a one-thread ring is enabled (docs/backends/uring.md,
     * "Registered files"). Refused (memory, a limit), every handle stays on its
     * fd. */
    bool on = has_update &&
              !(opts && (opts->flags & TAXI_PROACTOR_NO_REGISTERED_FILES));
    (void)uring_files_open(&s->files, s->ring.ring_fd, on ? files_slots(s) : 0,
                           (s->ring_features & IORING_FEAT_CQE_SKIP) != 0,
                           counters);
  }
  if (r < 0) {
    taxi__mutex_destroy(&s->lock);
    taxi__free(s);
    return r;
  }
  /* IORING_OP_SOCKET and multishot accept both came with 5.19; a kernel
   * that has the one has the other (EINVAL is handled anyway). */
  s->native_multishot = !compat && has_socket;
  if (compat) s->has_recv_multishot = false;
  atomic_init(&s->wake_asked, 0);
  atomic_init(&s->wake_broken, 0);
  page = sysconf(_SC_PAGESIZE);
  s->page_size = page > 0 ? (size_t)page : 4096;
  *state = s;
  return 0;
}

static void uring_close(void *state) {
  uring_state_t *s = state;
  if (!s) return;
  /* Every operation has completed (the core's promise), so the kernel
   * holds no request that points into a record; pipes are all free. */
  if (!s->closed) io_uring_queue_exit(&s->ring);
  uring_files_close(&s->files); /* the kernel's table went with the ring */
  /* The kernel let go of the groups' rings with the ring. */
  for (unsigned g = 0; g < TAXI__BUF_GROUPS; g++)
    if (s->br[g].ring) munmap(s->br[g].ring, s->br[g].bytes);
  taxi__wakeup_close(&s->wakeup);
  count_syscall(s);
  while (s->free_pipes) {
    uring_pipe_t *p = s->free_pipes;
    s->free_pipes = p->next;
    uring_pipe_destroy(s, p);
  }
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
}

/*
 * io_uring needs nothing set up: a request names its descriptor, and
 * requests in flight hold their own reference to the file, so closing one
 * cancels nothing (the core cancels first).  Sockets are made non-blocking
 * all the same, as taxi_proactor_attach() promises; io_uring retries a
 * would-block send or receive by polling, whatever the flag.  Regular
 * files are left alone: for them io_uring honours O_NONBLOCK and would
 * answer a read that misses the page cache with EAGAIN.  An accepted
 * connection is non-blocking already (SOCK_NONBLOCK): one fcntl tells.
 */
static int uring_attach(void *state, taxi_handle_t h) {
  uring_state_t *s = state;
  struct stat st;
  int fl, r;
  count_syscall(s);
  fl = fcntl(h, F_GETFL);
  if (fl < 0) return taxi__last_error(); /* EBADF: not open */
  if (!(fl & O_NONBLOCK)) {
    count_syscall(s);
    if (fstat(h, &st) < 0) return taxi__last_error();
    if (S_ISSOCK(st.st_mode)) {
      count_syscall(s);
      if (fcntl(h, F_SETFL, fl | O_NONBLOCK) < 0) return taxi__last_error();
    }
  }
  /* Adopted, its slot comes with its first request (docs/backends/uring.md,
   * "Registered files"). */
  taxi__mutex_lock(&s->lock);
  r = uring_files_attach(&s->files, h);
  taxi__mutex_unlock(&s->lock);
  return r;
}

/* h is the proactor's own (docs/backends/uring.md, "Registered files"): its
 * first request gives it a slot. */
static void uring_adopt(void *state, taxi_handle_t h) {
  uring_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  uring_files_adopt(&s->files, h);
  taxi__mutex_unlock(&s->lock);
}

static struct io_uring_sqe *no_sqe(void *ctx) {
  (void)ctx;
  return NULL;
}

/* Every request on h has completed: empty its slot, at once where this
 * thread may enter the ring, so that a closed socket goes (the slot holds
 * a reference to it) as soon as the core closes its fd. */
static void uring_release(void *state, taxi_handle_t h) {
  uring_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  /* A ring closed by orphan_wait takes no SQE (its table went with it). */
  if (uring_files_release(&s->files, h,
                          s->closed ? no_sqe : uring_sqe_for_files, s))
    uring_sq_submit_now(s);
  taxi__mutex_unlock(&s->lock);
}

/*
 * The core has just prepared the cancels of h's requests; hand them, and
 * any request of h still only prepared, to the kernel now rather than at
 * the next wait, so that the descriptor given back by a detach is soon
 * free of them.  (A closed descriptor is closed by the core only once
 * those requests have completed: see core/proactor_impl.h.)
 */
static void uring_detach(void *state, taxi_handle_t h) {
  uring_state_t *s = state;
  (void)h;
  taxi__mutex_lock(&s->lock);
  if (!s->closed) uring_sq_submit_now(s);
  taxi__mutex_unlock(&s->lock);
}

#ifdef URING_ASAN
/* ASan cannot see the kernel write into a buffer: refuse one it knows to
 * be freed or out of bounds before the kernel does the damage. */
static int check_buffers(taxi_op_t *op) {
  taxi_buf_t b[TAXI_OP_MAX_BUFS];
  size_t k = taxi__op_remaining_bufs(op, b, TAXI_OP_MAX_BUFS);
  for (size_t i = 0; i < k; i++)
    if (__asan_region_is_poisoned(b[i].base, b[i].len)) return TAXI_EINVAL;
  return 0;
}
#else
static int check_buffers(taxi_op_t *op) {
  (void)op;
  return 0;
}
#endif

static int uring_submit(void *state, taxi_op_t *op) {
  uring_state_t *s = state;
  uring_op_t *u;
  int r;
  if (!s || !op) return TAXI_EINVAL;
  r = check_buffers(op);
  if (r < 0) return r;
  u = uop(op);
  taxi__mutex_lock(&s->lock);
  if (s->closed) { /* see orphan_wait */
    taxi__mutex_unlock(&s->lock);
    return TAXI_ECANCELED;
  }
  u->state = UOP_INFLIGHT;
  if (op->kind == TAXI_OP_ACCEPT &&
      (op->internal_.flags & TAXI_ACCEPT_MULTISHOT))
    u->state |= UOP_MULTISHOT;
  u->parts = 0;
  u->retries = 0;
  u->fixed = 0;
  u->pipe = NULL;
  u->bl_next = u->def_next = NULL;
  u->ndef = 0;
  if (u->state & UOP_MULTISHOT) op->peer_len = 0;
  if (op->kind == TAXI_OP_TRANSMIT_FILE &&
      taxi__op_tx_part(op) == TAXI__TX_FILE) {
    r = uring_pipe_get(s, taxi__op_tx_file_remaining(op), &u->pipe);
    if (r < 0) goto fail;
  }
  r = uring_prep_op(s, op);
  if (r == TAXI_EAGAIN) {
    uring_backlog_add_kick(s, op, UOP_NEED_STEP);
    r = 0;
  }
  if (r < 0) {
    if (u->pipe) uring_pipe_put(s, u->pipe, true);
    u->pipe = NULL;
    goto fail;
  }
  uring_sq_kick(s);
  taxi__mutex_unlock(&s->lock);
  return 0;
fail:
  u->state = 0;
  taxi__mutex_unlock(&s->lock);
  return r;
}

static int uring_cancel(void *state, taxi_op_t *op) {
  uring_state_t *s = state;
  uring_op_t *u;
  if (!s || !op) return TAXI_EINVAL;
  u = uop(op);
  taxi__mutex_lock(&s->lock);
  if (s->closed || !(u->state & UOP_INFLIGHT)) {
    taxi__mutex_unlock(&s->lock);
    return TAXI_ENOENT;
  }
  if (!(u->state & UOP_CANCEL)) {
    u->state |= UOP_CANCEL;
    if (u->state & UOP_NEED_STEP) {
      /* Never reached the kernel (or is between two requests): complete
       * it here, through the deferred list, and make the wait look. */
      uring_backlog_remove(s, op);
      if (op->kind == TAXI_OP_TRANSMIT_FILE && u->pipe)
        uring_tx_step_done(s, NULL, op);
      else
        uring_emit(s, NULL, op, TAXI_ECANCELED, 0);
      uring_wake_now(s);
    } else if (u->parts) {
      /* Submitted at once, not with the next wait: a cancel is asked for
       * to take effect now (a throttled multishot accept must stop before
       * more connections come). */
      if (uring_prep_cancels(s, op) == TAXI_EAGAIN)
        uring_backlog_add_kick(s, op, UOP_NEED_CANCEL);
      uring_sq_submit_now(s);
    }
  }
  taxi__mutex_unlock(&s->lock);
  return 0;
}

static void uring_wake(void *state, int all) {
  uring_state_t *s = state;
  (void)all; /* one waiter at most: no TAXI__PCAP_MULTI_WAIT */
  if (!s) return;
  uring_wake_now(s);
}

/* Block in the kernel until a CQE arrives or the time is up, submitting
 * `to_submit` on the way.  Called with the lock held; drops it meanwhile.
 * With operations on the backlog, or while a wake-up could not reach it
 * (the wake-up poll not in the kernel), it blocks URING_BACKLOG_RETRY_NS
 * at most and reports that shorter timeout as 0, not -ETIME.  A refused
 * submission is returned, not waited past: the SQEs it left would wait
 * with it, unseen (uring_wait reports it). */
static int enter_and_wait(uring_state_t *s, unsigned to_submit,
                          taxi_time_t deadline) {
  struct __kernel_timespec ts;
  struct io_uring_getevents_arg arg;
  unsigned flags = IORING_ENTER_GETEVENTS;
  const void *argp = NULL;
  size_t argsz = 0;
  bool capped = false;
  int r;
  if (s->backlog || s->wake_poll != WAKE_POLL_ARMED ||
      atomic_load_explicit(&s->wake_broken, memory_order_relaxed)) {
    taxi_time_t retry = taxi_now() + URING_BACKLOG_RETRY_NS;
    if (deadline < 0 || retry < deadline) {
      deadline = retry;
      capped = true;
    }
  }
  if (deadline >= 0) {
    taxi_time_t left = deadline - taxi_now();
    if (left < 0) left = 0;
    ts.tv_sec = left / TAXI_NSEC_PER_SEC;
    ts.tv_nsec = left % TAXI_NSEC_PER_SEC;
    memset(&arg, 0, sizeof arg);
    arg.sigmask_sz = _NSIG / 8;
    arg.ts = (uint64_t)(uintptr_t)&ts;
    flags |= IORING_ENTER_EXT_ARG;
    argp = &arg;
    argsz = sizeof arg;
  }
  s->in_wait++;
  taxi__mutex_unlock(&s->lock);
  r = uring_ring_enter(s, to_submit, 1, flags, argp, argsz, true);
  taxi__mutex_lock(&s->lock);
  s->in_wait--;
  return capped && r == -ETIME ? 0 : r;
}

static int uring_wait(void *state, taxi__completion_t *out, size_t max,
                      int timeout_ms) {
  uring_state_t *s = state;
  sink_t k = {out, 0, max};
  taxi_time_t deadline = -1;
  bool woken = false;
  int r = 0;
  if (!s || !out || max == 0) return TAXI_EINVAL;
  if (timeout_ms > 0)
    deadline = taxi_now() + (taxi_time_t)timeout_ms * TAXI_NSEC_PER_MSEC;
  taxi__mutex_lock(&s->lock);
  r = uring_own_ring(s);
  if (r <= 0) {
    if (r == 0) r = uring_orphan_wait(s, &k);
    taxi__mutex_unlock(&s->lock);
    return r;
  }
  for (;;) {
    unsigned to_submit;
    r = 0;
    uring_files_flush(&s->files, uring_sqe_for_files, s);
    uring_backlog_run(s, &k);
    uring_wake_poll_arm(s);
    to_submit = uring_sq_flush(s);
    if (s->deferred || io_uring_cq_ready(&s->ring) > 0 || timeout_ms == 0 ||
        atomic_load(&s->wake_asked)) {
      /* Submit what is prepared and pick up completions the kernel kept
       * back (CQ overflow), without blocking. */
      if (to_submit > 0 || uring_cq_needs_enter(s))
        r = uring_ring_enter(s, to_submit, 0, IORING_ENTER_GETEVENTS, NULL, 0,
                             true);
    } else {
      r = enter_and_wait(s, to_submit, deadline);
    }
    uring_deferred_drain(s, &k);
    uring_reap(s, &k, &woken);
    if (atomic_exchange(&s->wake_asked, 0)) woken = true;
    /* EINTR (a signal), ETIME (the timeout): return what there is.  Any
     * other failure with nothing to report is the caller's to back off
     * from and report; the kernel refusing the batch (EBUSY: completions
     * it cannot post yet, reaping makes room; EAGAIN, ENOMEM: no memory
     * for requests) is transient, TAXI_EAGAIN or TAXI_ENOMEM, and the
     * SQEs go again with the next wait.  With completions to report they
     * are returned and the next wait retries. */
    if (r < 0 && r != -EINTR && r != -ETIME && k.n == 0) {
      taxi__mutex_unlock(&s->lock);
      taxi__set_os_error(-r);
      return r == -EBUSY ? TAXI_EAGAIN : taxi__error_from_os(-r);
    }
    if (k.n > 0 || woken || r < 0 || timeout_ms == 0) break;
    if (deadline >= 0 && taxi_now() >= deadline) break;
    /* Only the backend's own CQEs (a cancel's, a transmit step going on):
     * nothing for the caller yet, so wait again. */
  }
  taxi__mutex_unlock(&s->lock);
  return (int)k.n;
}

static unsigned uring_features(void *state) {
  uring_state_t *s = state;
  unsigned f = 0;
  if (!s) return 0;
  if (s->native_multishot) f |= TAXI_PFEAT_MULTISHOT_ACCEPT;
  if (s->setup_flags & IORING_SETUP_SUBMIT_ALL) f |= TAXI_PFEAT_SUBMIT_ALL;
  if (s->setup_flags & IORING_SETUP_SINGLE_ISSUER)
    f |= TAXI_PFEAT_SINGLE_ISSUER;
  if (s->setup_flags & IORING_SETUP_DEFER_TASKRUN)
    f |= TAXI_PFEAT_DEFER_TASKRUN;
  if (s->setup_flags & IORING_SETUP_COOP_TASKRUN) f |= TAXI_PFEAT_COOP_TASKRUN;
  if (s->br[0].ring) f |= TAXI_PFEAT_PROVIDED_BUFFERS;
  if (s->files.size) f |= TAXI_PFEAT_REGISTERED_FILES;
  return f;
}

const taxi__completion_ops_t taxi__completion_uring = {
    .name = "uring",
    .caps = TAXI__PCAP_MULTISHOT_ACCEPT,
    .open = uring_open,
    .close = uring_close,
    .attach = uring_attach,
    .detach = uring_detach,
    .adopt = uring_adopt,
    .release = uring_release,
    .submit = uring_submit,
    .cancel = uring_cancel,
    .wait = uring_wait,
    .wake = uring_wake,
    .features = uring_features,
    .buf_open = uring_buf_open,
    .buf_give = uring_buf_give,
    .dgram_unpack = uring_dgram_unpack,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__completion_uring_absent;
#endif /* TAXI_HAVE_URING */
