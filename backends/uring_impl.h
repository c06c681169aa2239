/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_impl.h - what the files of the io_uring completion backend
 * share (private to backends/uring*.c): the backend's state, its part of
 * an operation record, and the functions one file calls in another.  How
 * the backend works is told in docs/backends/uring.md.
 *
 * The files call one way: uring.c -> uring_owner.c -> uring_reap.c ->
 * uring_prep.c -> uring_queue.c, uring_pipe.c -> uring_ring.c ->
 * uring_files.c.
 *
 * Every function declared here runs with the backend's mutex held
 * (uring_state_t.lock), or while the state is not shared (open, close),
 * unless its comment says otherwise; "lock held" below means that mutex.
 */
#ifndef TAXI_BACKENDS_URING_IMPL_H
#define TAXI_BACKENDS_URING_IMPL_H

#include "completion.h"
#include "uring_files.h"

#include "core/proactor/proactor_op.h"
#include "ports/port.h"

#include <liburing.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Older liburing headers lack the newer flags; the kernel ABI is fixed. */
#ifndef IORING_ACCEPT_MULTISHOT
#define IORING_ACCEPT_MULTISHOT (1U << 0)
#endif
#ifndef IORING_SETUP_SUBMIT_ALL
#define IORING_SETUP_SUBMIT_ALL (1U << 7)
#endif
#ifndef IORING_OP_SOCKET
#define IORING_OP_SOCKET 45
#endif
#ifndef IORING_SETUP_R_DISABLED
#define IORING_SETUP_R_DISABLED (1U << 6)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN (1U << 2)
#endif
/* IORING_OP_SEND_ZC (6.0) in the kernel's numbering: older liburing
 * headers lack the name; only its presence in the probe is asked. */
#define URING_OP_SEND_ZC 47
/* Provided-buffer rings and multishot receive need liburing 2.3's
 * helpers, whose headers are the first to name IORING_RECV_MULTISHOT (a
 * macro; IORING_CQE_BUFFER_SHIFT is an enumerator, invisible to #if);
 * without them pooled reads are chosen by the core. */
#if defined(IORING_RECV_MULTISHOT)
#define URING_HAVE_BUF_RING 1
#endif
#ifndef IORING_FEAT_CQE_SKIP
#define IORING_FEAT_CQE_SKIP (1U << 11)
#endif
#ifndef IORING_SQ_CQ_OVERFLOW
#define IORING_SQ_CQ_OVERFLOW (1U << 1)
#endif

#define URING_DEFAULT_DEPTH 256
/* CQ entries per SQ entry: room for completions of operations that wait
 * long (reads on idle connections) plus a burst of new ones. */
#define URING_CQ_FACTOR 4
/* The fewest CQ entries a ring asks for, whatever its depth: a multishot
 * read's completion that finds the CQ ring full goes to the kernel's
 * overflow list and ends the read, to be submitted again - per message,
 * for a server whose connections' arrivals outnumber the ring (10,000
 * connections on 1,024 entries did).  32,768 entries are 512 KiB; a
 * kernel that cannot lock that much gets the depth's share. */
#define URING_CQ_MIN 32768u
/* MAX_RW_COUNT on 4 KiB pages: the most one read or write moves. */
#define URING_MAX_LEN 0x7ffff000u
/* The largest pipe asked for with F_SETPIPE_SZ (the default is 64 KiB):
 * one transmit-file step moves about this much, in two io-wq splices.
 * 1 MiB, Linux's default fs.pipe-max-size, the most an unprivileged
 * process may ask for: a 5 MB file in 5 steps where 256 KiB took 20 (5
 * MB responses over loopback: 10-16 context switches each instead of
 * 18-33).  A pipe holds references to the file's pages, not copies; but
 * the kernel counts its capacity against the user's
 * fs.pipe-user-pages-soft (64 MiB) whether it holds data or not, so a
 * pipe grows only as far as its range needs (pipe_get). */
#define URING_PIPE_SIZE (1024 * 1024)
/* Clean pipes kept for reuse. */
#define URING_PIPES_KEPT 16
/* While operations wait on the backlog, a wait blocks at most this long
 * (ns) before it tries them again. */
#define URING_BACKLOG_RETRY_NS (10 * TAXI_NSEC_PER_MSEC)
/* Unrequested cancellations resubmitted in a row before one is reported. */
#define URING_MAX_RETRIES 8
/* Slots of the table of registered files (docs/backends/uring.md, "Registered
 * files"): the kernel keeps 8 bytes for each, 32 KiB per ring; handles beyond
 * it (per ring: a group has a table per thread) stay on their fds. */
#define URING_FILES_SLOTS 4096u
/* Attempts at a submission that EINTR cuts. */
#define URING_WAKE_TRIES 8

/*
 * user_data: the operation record with a tag in its two low bits (a record
 * is aligned at least to 4), naming which request of the step completed.
 * A NULL record marks the backend's own requests.
 */

enum {
  UD_MAIN = 0, /* the step's request (the pipe -> socket splice of a
                  transmit-file step) */
  UD_FILL = 1, /* transmit-file: file -> pipe splice */
  UD_POLL = 2, /* transmit-file, or a step after EAGAIN (UOP_POLL_FIRST):
                  wait for room in the socket, or for data */
  UD_TAG_MASK = 3
};
#define UD_WAKE ((uint64_t)0)       /* the poll on the wake-up channel */
#define UD_CANCEL_ACK ((uint64_t)1) /* an IORING_OP_ASYNC_CANCEL */

_Static_assert(_Alignof(taxi_op_t) >= 4, "user_data tags need 2 low bits");

/* uring_state_t.wake_poll */
enum {
  WAKE_POLL_OFF,      /* not in the kernel: wait() prepares it again */
  WAKE_POLL_PREPARED, /* its SQE is in the SQ, perhaps not submitted */
  WAKE_POLL_ARMED     /* the kernel has it: a signal of `wakeup` wakes */
};

/* uring_op_t.state */
#define UOP_INFLIGHT 0x01u    /* submitted; final completion not produced */
#define UOP_CANCEL 0x02u      /* cancel() was called for this step */
#define UOP_MULTISHOT 0x04u   /* TAXI_ACCEPT_MULTISHOT */
#define UOP_NATIVE 0x08u      /* the accept in flight is a kernel multishot */
#define UOP_MS_WORKED 0x10u   /* a native multishot produced a connection */
#define UOP_DRAIN 0x20u       /* transmit: the next request drains the pipe */
#define UOP_NEED_STEP 0x40u   /* on the backlog: (re)queue its request */
#define UOP_NEED_CANCEL 0x80u /* on the backlog: queue its cancel requests */
#define UOP_DEFERRED 0x100u   /* on the deferred list */
#define UOP_MS_SINGLE 0x200u  /* multishot by re-armed single accepts */
#define UOP_MS_PROBE 0x400u   /* ... after EINVAL from a kernel multishot */
#define UOP_POLL_FIRST 0x800u /* the step waits behind a poll (EAGAIN) */

typedef struct uring_pipe {
  int fd[2];
  unsigned cap; /* bytes the pipe holds */
  struct uring_pipe *next;
} uring_pipe_t;

/* The backend's part of an operation record (taxi_op_t.internal_.backend).
 * Written by submit and cancel (the proactor's lock held) and by wait, all
 * under the backend's mutex. */
typedef struct uring_op {
  struct msghdr msg; /* WRITE with several buffers */
  struct iovec iov[TAXI_OP_MAX_BUFS];
  socklen_t peer_len; /* ACCEPT: the kernel writes the address length */
  unsigned state;     /* UOP_* */
  unsigned parts;     /* bit per UD_* tag whose CQE is still due */
  unsigned retries;   /* unrequested cancellations resubmitted in a row */
  int fixed;          /* the slot the step's request names, plus 1 (0: fd) */
  /* TRANSMIT_FILE, file part */
  uring_pipe_t *pipe;
  uint32_t in_pipe;     /* bytes spliced into the pipe, not yet sent */
  uint64_t sent;        /* bytes that reached the socket in this step */
  int fill_res;         /* result of the file -> pipe splice */
  int err;              /* the first real error of this step */
  unsigned splice_more; /* SPLICE_F_MORE: more data follows this step */
  /* UOP_POLL_FIRST (a send or receive): the request's result once its CQE
   * is in, and the poll's error in `err` */
  int main_res;
  /* Lists.  A record may be on both at once (a connection of a multishot
   * accept deferred while its re-arm waits for an SQE). */
  taxi_op_t *bl_next;  /* the backlog */
  taxi_op_t *def_next; /* the deferred list */
  /* Deferred completions: two at most, a connection of a multishot accept
   * and its final completion. */
  unsigned ndef;
  unsigned def_flags[2];
  int64_t def_result[2];
} uring_op_t;

_Static_assert(sizeof(uring_op_t) <= TAXI_OP_BACKEND_SIZE,
               "uring_op_t must fit in taxi_op_t.internal_.backend");

typedef struct uring_state {
  struct io_uring ring;
  taxi__mutex_t lock; /* the SQ, the CQ, every uring_op_t */
  taxi__completion_counters_t *counters;
  unsigned in_wait;      /* threads blocked in io_uring_enter (lock) */
  bool native_multishot; /* the kernel has multishot accept (lock) */
  /* One-thread rings (docs/backends/uring.md, "One thread, one ring"). */
  unsigned setup_flags;   /* the IORING_SETUP_* the ring was made with */
  bool single;            /* only `owner` may enter the ring */
  bool enabled;           /* owner set, ring enabled (lock) */
  pthread_t owner;        /* the thread that enabled it (lock) */
  pid_t owner_tid;        /* its kernel thread id, to tell whether it lives */
  bool closed;            /* the ring closed by orphan_wait (lock) */
  unsigned ring_features; /* IORING_FEAT_* the kernel told at setup */
  uring_files_t files;    /* registered files (lock) */
  /* Provided buffers (docs/backends/uring.md, "Pooled reads"). */
  bool has_recv_multishot; /* Linux 6.0 (IORING_OP_SEND_ZC tells) */
  /* The rings of the groups (backends/completion.h's buf_open), each
   * NULL until registered: [0] the pool, the others datagram sizes. */
  struct uring_bufring {
    struct io_uring_buf_ring *ring;
    unsigned entries;
    size_t bytes, buf_size;
  } br[TAXI__BUF_GROUPS];
  /* Wake-ups (docs/backends/uring.md, "Waking a wait"). */
  taxi__wakeup_t wakeup;  /* what wake() signals */
  int wake_poll;          /* WAKE_POLL_*: its poll request (lock) */
  unsigned wake_poll_pos; /* SQ tail just after the poll's SQE (lock) */
  atomic_int wake_asked;  /* wake() was called since the last wait */
  atomic_int wake_broken; /* a write to it failed: waits poll instead */
  /* Operations whose request could not get an SQE (the kernel refused a
   * submission, the SQ stayed full); wait retries them.  FIFO. */
  taxi_op_t *backlog, *backlog_tail;
  /* Completions produced when there was no room to return them. FIFO. */
  taxi_op_t *deferred, *deferred_tail;
  uring_pipe_t *free_pipes;
  unsigned nfree_pipes;
  size_t page_size;
} uring_state_t;

/* Where completions go while wait() fills its array. */
typedef struct sink {
  taxi__completion_t *out;
  size_t n, max;
} sink_t;

static inline uring_op_t *uop(taxi_op_t *op) { return taxi__op_backend(op); }

static inline uint64_t ud_make(taxi_op_t *op, unsigned tag) {
  return (uint64_t)(uintptr_t)op | tag;
}

static inline void count_syscall(uring_state_t *s) {
  atomic_fetch_add_explicit(&s->counters->syscalls, 1, memory_order_relaxed);
}

static inline unsigned clamp_len(size_t len) {
  return len > URING_MAX_LEN ? URING_MAX_LEN : (unsigned)len;
}

static inline int64_t os_result(int res) {
  return res < 0 ? taxi__error_from_os(-res) : res;
}

/* ---- the ring and its wake-ups (backends/uring_ring.c) ------------------- */

/* One io_uring_enter(2), counted; the kernel's result, or -errno. */
int uring_ring_enter(uring_state_t *s, unsigned to_submit,
                     unsigned min_complete, unsigned flags, const void *arg,
                     size_t argsz, bool is_wait);
/* Publish the prepared SQEs; what the next enter should submit. */
unsigned uring_sq_flush(uring_state_t *s);
/* Completions wait that only an enter with GETEVENTS brings in. */
bool uring_cq_needs_enter(uring_state_t *s);
/* Hand every prepared SQE to the kernel now (or to the ring's owner). */
void uring_sq_submit_now(uring_state_t *s);
/* Submit now if a thread is blocked in wait(). */
void uring_sq_kick(uring_state_t *s);
/* Room for `n` SQEs, submitting what is prepared to make it. */
bool uring_sq_reserve(uring_state_t *s, unsigned n);
/* One free SQE, or NULL. */
struct io_uring_sqe *uring_sqe_get(uring_state_t *s);
/* uring_sqe_get() in the shape backends/uring_files.h asks for. */
struct io_uring_sqe *uring_sqe_for_files(void *ctx);
/* The registered-file slot a request on op's handle names, or -1. */
int uring_handle_slot(uring_state_t *s, taxi_op_t *op);
/* Make sqe name `slot` (-1: keep the descriptor). */
void uring_sqe_slot(struct io_uring_sqe *sqe, taxi_op_t *op, int slot);
/* Make the wait in progress, or the next, return.  Any thread, with or
 * without the lock. */
void uring_wake_now(uring_state_t *s);
/* The CQE of the wake-up poll. */
void uring_on_wake_cqe(uring_state_t *s, const struct io_uring_cqe *c);
/* Prepare the wake-up poll if the kernel does not hold it. */
void uring_wake_poll_arm(uring_state_t *s);
/* The TAXI_E* code open() returns for errno `err` (recorded). */
int uring_open_error(int err);
/* Check the opcodes the backend needs, and tell a few optional ones. */
int uring_check_ops(struct io_uring *ring, bool *has_socket, bool *has_send_zc,
                    bool *has_update);
/* Make the ring with the best setup flags the kernel takes.  No lock: the
 * state is not shared yet. */
int uring_ring_setup(uring_state_t *s, unsigned depth, bool compat, bool single,
                     bool no_defer);

/* ---- requests (backends/uring_prep.c) ------------------------------------ */

/* Prepare the request(s) of op's current step; TAXI_EAGAIN: no SQE. */
int uring_prep_op(uring_state_t *s, taxi_op_t *op);
/* Prepare a cancel of every request of op still due. */
int uring_prep_cancels(uring_state_t *s, taxi_op_t *op);
/* Queue op's step again (a retry, a re-armed accept, a pipe drain); on
 * the backlog without an SQE, ended when it cannot be queued at all. */
void uring_requeue(uring_state_t *s, sink_t *k, taxi_op_t *op);
/* Retry the backlog, oldest first, until the SQ is full. */
void uring_backlog_run(uring_state_t *s, sink_t *k);

/* ---- transmit-file's pipes (backends/uring_pipe.c) ----------------------- */

/* Close a pipe (not reused). */
void uring_pipe_destroy(uring_state_t *s, uring_pipe_t *p);
/* A clean pipe for `len` file bytes: 0, or a TAXI_E* code. */
int uring_pipe_get(uring_state_t *s, uint64_t len, uring_pipe_t **out);
/* Give a pipe back; one not `clean` is closed. */
void uring_pipe_put(uring_state_t *s, uring_pipe_t *p, bool clean);

/* ---- the backlog and deferred completions (backends/uring_queue.c) ------- */

/* Put op on the backlog, needing `need` (UOP_NEED_STEP, UOP_NEED_CANCEL). */
void uring_backlog_add(uring_state_t *s, taxi_op_t *op, unsigned need);
/* The same from submit or cancel: wake a blocked waiter. */
void uring_backlog_add_kick(uring_state_t *s, taxi_op_t *op, unsigned need);
/* Take op off the backlog. */
void uring_backlog_remove(uring_state_t *s, taxi_op_t *op);
/* Report a completion of op into k, or defer it (k NULL or full). */
void uring_emit(uring_state_t *s, sink_t *k, taxi_op_t *op, int64_t result,
                unsigned flags);
/* Move deferred completions into k while it has room. */
void uring_deferred_drain(uring_state_t *s, sink_t *k);

/* ---- completions (backends/uring_reap.c) --------------------------------- */

/* Handle one CQE. */
void uring_on_cqe(uring_state_t *s, sink_t *k, const struct io_uring_cqe *c,
                  bool *woken);
/* Handle the CQEs in the ring while k has room. */
void uring_reap(uring_state_t *s, sink_t *k, bool *woken);
/* A transmit-file's file part has no request left in its step: drain
 * the pipe, retry, or report. */
void uring_tx_step_done(uring_state_t *s, sink_t *k, taxi_op_t *op);

/* ---- one-thread rings (backends/uring_owner.c) --------------------------- */

/* 1 when the calling thread may enter the ring (enabling a one-thread ring
 * for it), 0 when another thread owns it, or a TAXI_E* code. */
int uring_own_ring(uring_state_t *s);
/* wait() in a thread that does not own the ring. */
int uring_orphan_wait(uring_state_t *s, sink_t *k);

/* ---- provided buffers (backends/uring_bufring.c) ------------------------- */

/* The table's buf_open and buf_give (backends/completion.h).  No lock:
 * they take it where they need it. */
int uring_buf_open(void *state, unsigned group, unsigned max, size_t size);
void uring_buf_give(void *state, unsigned group, unsigned id, void *addr);
/* The table's dgram_unpack: a multishot receive's datagram in its buffer
 * (struct io_uring_recvmsg_out, the name, the payload).  No lock. */
int uring_dgram_unpack(void *state, taxi_op_t *op, const unsigned char *buf,
                       size_t used, size_t *offset, size_t *len);

#endif /* TAXI_BACKENDS_URING_IMPL_H */
