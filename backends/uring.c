/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring.c - the Linux io_uring completion backend, over liburing.
 *
 * One ring per proactor (one ring per thread when the proactor has one
 * dispatching thread; a group of them: taxi/proactor_group.h).  submit()
 * turns one step of an operation into one
 * or two submission queue entries (SQEs) whose user_data is the operation
 * record, and wait() reaps completion queue entries (CQEs) into
 * {op, result}.  The kernel performs the operations; nothing here reads or
 * writes data itself.
 *
 * Batching.  An SQE prepared by submit() is not handed to the kernel at
 * once: the next wait() passes it to the io_uring_enter(2) that also waits
 * for completions, so under load one system call submits many requests
 * and reaps many completions.  The exception is a submission made while
 * another thread is blocked in wait(): that one is handed to the kernel by
 * the submitting thread (an io_uring_enter that only submits, safe next to
 * a waiter), else it would sit until the wait returns.
 *
 * Threads (backends/completion.h).  liburing's submission queue has one
 * producer, and submit/cancel run in whichever thread holds the proactor's
 * lock while wait runs in another, so every touch of the SQ - get an SQE,
 * fill it, publish the tail, enter - happens under this backend's own
 * mutex.  The completion queue has one consumer (no TAXI__PCAP_MULTI_WAIT),
 * but it is reaped under the same mutex too: the reaper updates the
 * per-operation state that cancel() reads, and taking the mutex after the
 * kernel returns also orders the submitter's writes to the record before
 * the reaper's reads for ThreadSanitizer, which cannot see the kernel.  The
 * mutex is never held across a blocking io_uring_enter.  The system calls
 * are made here (syscall(2)) rather than through liburing's submit/wait
 * helpers: those publish the SQ tail themselves, which must happen under
 * the mutex, and they may enter the kernel more than once or not at all,
 * which would make counters->syscalls a guess.  It is exact here: every
 * io_uring_enter, pipe2, fcntl and close this file makes is counted, and
 * each io_uring_enter made by wait() counts as a wait.
 *
 * Operations.
 *   ACCEPT         IORING_OP_ACCEPT with SOCK_NONBLOCK | SOCK_CLOEXEC; the
 *                  kernel writes the peer address into op->peer.  With
 *                  TAXI_ACCEPT_MULTISHOT, one multishot accept (Linux
 *                  5.19); each connection arrives flagged IORING_CQE_F_MORE
 *                  (TAXI__CQ_MORE).  Every connection of a multishot accept
 *                  would be written to the same address buffer, racing with
 *                  the handler reading the previous one, so none is asked
 *                  for: op->peer_len is 0 then (getpeername(2) tells it).
 *                  Where the kernel has no multishot accept (or with the
 *                  variant "uring:compat"), this file re-arms a single-shot
 *                  accept after each connection itself, so the capability
 *                  TAXI__PCAP_MULTISHOT_ACCEPT always holds.  A multishot
 *                  request the kernel ends with a connection (as it may
 *                  when the CQ overflows) is re-armed the same way: it ends
 *                  only on an error or a cancellation, as taxi/proactor.h
 *                  promises.
 *   CONNECT        IORING_OP_CONNECT to the address copied in the record.
 *   READ           IORING_OP_RECV into the remaining buffer; MSG_WAITALL
 *                  for TAXI_READ_EXACT, which the kernel honours by
 *                  retrying internally since 5.18 (before, the core resumes
 *                  the remainder).  0 at end of stream; the core says EEOF.
 *   WRITE          IORING_OP_SEND (one buffer) or IORING_OP_SENDMSG (a
 *                  gather list; its msghdr and iovecs live in the record's
 *                  backend area) with MSG_NOSIGNAL | MSG_WAITALL: the
 *                  kernel sends every byte in one request since 5.18.
 *                  Never READV/WRITEV on sockets: for those io_uring
 *                  honours O_NONBLOCK and returns EAGAIN instead of waiting.
 *                  A send may still end with EAGAIN: a request the kernel
 *                  has had to poll for too often is handed to its io-wq
 *                  workers, where a SENDMSG honours the socket's
 *                  O_NONBLOCK and ends with EAGAIN if the socket is full
 *                  then (seen on Linux 6.18: a gather write to a slow
 *                  reader, under load).  That is not the operation's
 *                  result: the step is submitted again behind an
 *                  IORING_OP_POLL_ADD for the readiness it lacked
 *                  (UOP_POLL_FIRST, see on_simple); a receive likewise.
 *   READ_FILE,     IORING_OP_READ / IORING_OP_WRITE at offset + done.
 *   WRITE_FILE
 *   TRANSMIT_FILE  header and trailer as a send (the header with MSG_MORE
 *                  when more follows); the file range through a pipe, one
 *                  pipe-full per step: IORING_OP_SPLICE file -> pipe linked
 *                  (IOSQE_IO_LINK) to IORING_OP_SPLICE pipe -> socket.  See
 *                  "Transmit-file" below.
 * Cancellation is IORING_OP_ASYNC_CANCEL by user_data: the cancelled
 * request's own CQE (-ECANCELED, or its result if it won the race) is the
 * operation's one completion; the cancel request's CQE is swallowed.
 *
 * Waking a wait.  wake() signals the wake-up channel of ports/ (an
 * eventfd, or a pipe where that fails) on which a poll request
 * (multishot where the kernel has it) stays in the kernel; its CQE ends a
 * thread's io_uring_enter, which drains the channel.  A wake-up therefore
 * needs no SQE: one that did (a NOP) was lost when the SQ was full or the
 * kernel refused the submission, with the waiter blocked for good.  While
 * the poll is not in the kernel (between a single-shot poll's CQE and the
 * submission of the next, or when that submission is refused) a wait
 * blocks URING_BACKLOG_RETRY_NS at most and then looks at wake_asked.
 *
 * Transmit-file.  Data goes file -> pipe -> socket without a copy to user
 * space.  The pipe comes from a small free list (created on demand, kept
 * for reuse, so a steady state creates none).  The socket is non-blocking,
 * and io_uring runs a splice in its worker threads (io-wq) without the
 * poll-and-retry it gives sends, so the pipe -> socket splice may move
 * only part of the pipe, or nothing (EAGAIN), when the socket buffer is
 * full; and a short file -> pipe splice counts as a failure that breaks
 * the link (the socket splice then completes with -ECANCELED).  Either way
 * bytes stay in the pipe, and this file drains them itself before reporting
 * anything: IORING_OP_POLL_ADD (POLLOUT) linked to another pipe -> socket
 * splice, until the pipe is empty.  The completion then reports the bytes
 * that reached the socket, and the pipe goes back to the free list clean.
 * A pipe still holding bytes when the operation ends (error, cancel) is
 * closed instead of reused.  sendfile(2) was the other choice: it would
 * have to run in the waiting thread (io_uring has no sendfile), blocking it
 * on disk reads, where a splice blocks only an io-wq worker.  Splicing to a
 * socket whose peer has gone may raise SIGPIPE in that io-wq worker, which
 * blocks every signal, so the process is not killed.
 *
 * Requests belong to the thread that submitted them.  When that thread
 * exits, io_uring may end its requests with -ECANCELED (the task work that
 * would finish them can no longer run in it): a Leader/Followers pool that
 * shrinks, or a helper thread that starts an operation and returns, would
 * see operations cancelled that nobody cancelled.  A -ECANCELED for an
 * operation whose cancellation was not asked for is therefore not reported
 * but resubmitted, by the reaping thread, up to URING_MAX_RETRIES times in
 * a row.  SQEs prepared by one thread and entered by another belong to the
 * one that entered them, often the waiter.
 *
 * Ring setup.  IORING_SETUP_CQSIZE gives a CQ of URING_CQ_FACTOR times the
 * SQ (the number of operations in flight is not bounded by the SQ), and
 * IORING_FEAT_NODROP (5.5) keeps completions beyond even that in the
 * kernel instead of dropping them.  IORING_SETUP_SUBMIT_ALL (5.18, used
 * where accepted) keeps submitting a batch past an SQE that fails.  Each
 * flag a kernel refuses (EINVAL) is dropped in turn (ring_setup), and
 * taxi_proactor_features() tells what was kept.  Not used: SQPOLL (a
 * kernel thread polling the SQ, a CPU busy for each ring).
 *
 * One thread, one ring (TAXI_PROACTOR_ONE_THREAD).  A ring shared by the
 * threads of a pool can use none of the flags that make io_uring cheap
 * per message, because each ties the ring to one task: with
 * IORING_SETUP_SINGLE_ISSUER only that task may enter it, and with
 * DEFER_TASKRUN (6.1) the work that turns a finished request into a CQE
 * waits until that task asks for completions, instead of interrupting
 * whatever thread submitted it; COOP_TASKRUN (5.19) is the older half-way
 * (no interrupt, but the work runs at any entry of that task).  A
 * proactor made for one dispatching thread gets them: the ring is made
 * disabled (IORING_SETUP_R_DISABLED) and enabled by the first thread that
 * waits, which becomes its only issuer (own_ring).  Another thread may
 * still prepare SQEs under the mutex (starting, cancelling, closing), but
 * never enters: it wakes the owner, whose next wait submits them
 * (sq_submit_now), so such a request costs one eventfd write and no lock
 * the owner waits on.  IORING_SETUP_TASKRUN_FLAG makes the kernel raise
 * IORING_SQ_TASKRUN when task work waits, and a wait that would not block
 * enters the kernel then (cq_needs_enter).  A destroy from another thread
 * (the owner gone) is handled by orphan_wait.
 *
 * Pooled reads (taxi_proactor_read_pooled).  The proactor's buffer pool is
 * registered as a ring of provided buffers, group 0
 * (io_uring_register_buf_ring, 5.19), at creation, while any thread may
 * still register; a pooled read is IORING_OP_RECV with IOSQE_BUFFER_SELECT
 * and, multishot, IORING_RECV_MULTISHOT (6.0; IORING_OP_SEND_ZC, which came
 * with it, tells the kernel has it), so one request receives every message
 * of a connection into buffers the kernel picks, each CQE naming its
 * buffer.  A buffer given back is published to the kernel again by
 * buf_give (memory only: any thread).  The group running empty ends the
 * request with -ENOBUFS, reported as TAXI__CQ_NOBUFS for the core to wait
 * for a buffer or grow the pool and read again.  On older kernels the
 * core picks the buffers and reads into them as ordinary receives.
 *
 * Registered files (backends/uring_files.c).  The ring gets a sparse table
 * of registered files when it is made (IORING_REGISTER_FILES with every
 * entry -1, which every kernel from 5.11 takes), before a one-thread ring
 * is enabled, while any thread may still register with it: afterwards a
 * SINGLE_ISSUER ring takes registrations from its owner only.  Its size
 * is URING_FILES_SLOTS, bounded by RLIMIT_NOFILE (the kernel refuses a
 * bigger table with EMFILE); the environment variable TAXI_URING_FILES
 * sets another (0: no table), for tests of a full table.  A table the
 * kernel refuses, a probe without IORING_OP_FILES_UPDATE (5.6; a
 * restricted ring may lack it), or TAXI_PROACTOR_NO_REGISTERED_FILES,
 * leaves every handle on its fd.  Which handles: those the proactor made, which
 * the core tells with adopt - connections its accepts made, sockets connected
 * through it (adopted before the connect is submitted), and those moved
 * from a proactor where they were either.  A handle the application
 * merely attaches (a listener, a socket it connected itself, a pipe, a
 * regular file) stays on its fd, so that what it does with its own
 * descriptor behind taxi's back (closing it while still attached, say)
 * has the effect it had without a table.  An adopted handle is installed
 * in a free slot when its first request is prepared: an
 * IORING_OP_FILES_UPDATE SQE just before that request's, entered with it,
 * so installing costs no system
 * call (IOSQE_CQE_SKIP_SUCCESS, 5.17, spares its CQE too), and the kernel,
 * which runs a FILES_UPDATE inline at submission, has installed it when
 * it reads the next SQE.  Installing at the first request rather than at
 * attach leaves out what never runs an operation here: a connection a
 * group accepts on one ring and moves to another at once, a handle closed
 * at once.  From then on every request on the handle names its slot
 * (IOSQE_FIXED_FILE; the socket end of a transmit-file's splices too), so
 * the kernel neither looks the descriptor up nor takes and drops a
 * reference to its file per request.  Accepted connections could be made
 * direct descriptors (slots with no fd at all) by the accept itself, but
 * the application is given a descriptor (op->accepted): each handle keeps
 * its fd, and the slot is an alias of it.  A handle that finds the table
 * full stays on its fd for its life, and an install the kernel refuses
 * (its fd closed before the submission) sends the handle back to its fd,
 * the requests that named the slot meanwhile failing with EBADF prepared
 * again on it; both are counted (register_failures).  Lifetime: the slot
 * holds a reference to the file, so it must be emptied for a closed
 * socket to go.  The core calls release once every request on the handle
 * has completed (after the cancels of a close or detach, with the row of
 * the handle: core/proactor/proactor_impl.h), just before it closes the fd; a
 * FILES_UPDATE of -1 then empties the slot and is entered at once where
 * this thread may enter the ring (else the owner of a one-thread ring is
 * woken to), so the peer sees the close as soon as without a table.  The
 * slot is free from then on: an install that reuses it is queued after
 * the removal, and the kernel runs them in SQ order, so no request ever
 * names a slot whose file changed under it.  Moving a handle to another
 * proactor releases it from the first ring's table; the other ring, told
 * the handle was made by a proactor, installs it at its first request.
 * A handle detached and attached again while the requests of the first
 * attachment still run shares its slot with them (the descriptor number
 * keys the entry), installed again first in case the number now names
 * another file.  The synchronous update (IORING_REGISTER_FILES_UPDATE) is
 * not used: it would overtake FILES_UPDATE SQEs still in the SQ for the
 * same slot.  When no SQE can be had
 * (the SQ full, the kernel refusing), an install waits for the next
 * request and a removal for the next wait.
 *
 * Variant "uring:compat" uses only what Linux 5.11 offers (single accepts
 * re-armed for TAXI_ACCEPT_MULTISHOT, no IORING_SETUP_SUBMIT_ALL), so the
 * fallbacks can be tested on a newer kernel.
 *
 * Kernel requirements: Linux 5.11 (IORING_FEAT_EXT_ARG, so a wait with a
 * timeout needs no timeout SQE, which wait() could not queue without the
 * mutex) and the opcodes listed in uring_required_ops.  Older kernels, and
 * io_uring refused by a seccomp policy (ENOSYS, EPERM) or the
 * kernel.io_uring_disabled sysctl (EPERM), make open fail with
 * TAXI_ENOTSUP / TAXI_EPERM and the OS error recorded, so the automatic
 * choice moves on to the next backend.
 *
 * When the kernel refuses submissions (io_uring_enter fails with EAGAIN,
 * EBUSY or ENOMEM), the SQEs stay in the SQ and nothing is lost.  A wait
 * that meets the refusal does not block past it (the SQEs would wait with
 * it): with nothing to report it returns TAXI_EAGAIN or TAXI_ENOMEM, and
 * the proactor pauses, retries, counts and reports (transient_errors, the
 * error callback), and stops with the error if the refusal lasts.  A
 * submission refused in another thread wakes the waiter to retry it.
 * Operations that find the SQ full wait on a backlog that each wait
 * retries, blocking at most URING_BACKLOG_RETRY_NS while it is not empty.
 * The kernel refuses only when it cannot allocate a request (memory
 * exhaustion) or post a completion (EBUSY: the CQ and its overflow full).
 *
 * After fork(2) the child shares the ring (its mappings and the kernel
 * object) with the parent: only one of them may go on using the proactor.
 *
 * Quirks handled here, each where it is handled:
 *  - multishot accept on kernels before 5.19 (detected by the absence of
 *    IORING_OP_SOCKET, which came with it): EINVAL at the first completion
 *    is followed by a single accept, whose success turns the ring to
 *    re-armed single accepts;
 *  - the kernel caps one read or write at 0x7ffff000 bytes;
 *  - a CQ that overflowed into the kernel's backlog is flushed by the next
 *    io_uring_enter with IORING_ENTER_GETEVENTS, so wait enters even when
 *    the ring looks empty but IORING_SQ_CQ_OVERFLOW is set.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* splice flags, syscall(2), pipe2(2) */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "completion.h"
#include "uring_files.h"

#include "core/common/alloc.h"
#include "core/proactor/proactor_op.h"
#include "ports/port.h"

#include <liburing.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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
/* Slots of the table of registered files (see "Registered files"): the
 * kernel keeps 8 bytes for each, 32 KiB per ring; handles beyond it (per
 * ring: a group has a table per thread) stay on their fds. */
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
  /* One-thread rings (see "One thread, one ring" above). */
  unsigned setup_flags;   /* the IORING_SETUP_* the ring was made with */
  bool single;            /* only `owner` may enter the ring */
  bool enabled;           /* owner set, ring enabled (lock) */
  pthread_t owner;        /* the thread that enabled it (lock) */
  pid_t owner_tid;        /* its kernel thread id, to tell whether it lives */
  bool closed;            /* the ring closed by orphan_wait (lock) */
  unsigned ring_features; /* IORING_FEAT_* the kernel told at setup */
  uring_files_t files;    /* registered files (lock) */
  /* Provided buffers (see "Pooled reads" above). */
  bool has_recv_multishot;      /* Linux 6.0 (IORING_OP_SEND_ZC tells) */
  struct io_uring_buf_ring *br; /* buffer group 0, or NULL */
  unsigned br_entries;
  size_t br_bytes, buf_size;
  /* Wake-ups (see "Waking a wait" at the top of the file). */
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

static uring_op_t *uop(taxi_op_t *op) { return taxi__op_backend(op); }

static uint64_t ud_make(taxi_op_t *op, unsigned tag) {
  return (uint64_t)(uintptr_t)op | tag;
}

static void count_syscall(uring_state_t *s) {
  atomic_fetch_add_explicit(&s->counters->syscalls, 1, memory_order_relaxed);
}

static unsigned clamp_len(size_t len) {
  return len > URING_MAX_LEN ? URING_MAX_LEN : (unsigned)len;
}

/* ---- the rings ----------------------------------------------------------- */

static int ring_enter(uring_state_t *s, unsigned to_submit,
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
static unsigned sq_flush(uring_state_t *s) {
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
static bool cq_needs_enter(uring_state_t *s) {
  return IO_URING_READ_ONCE(*s->ring.sq.kflags) &
         (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN);
}

static void wake_locked(uring_state_t *s);

/* Hand every prepared SQE to the kernel now (lock held).  Refused (EAGAIN,
 * EBUSY, ENOMEM: the kernel short of resources), they stay in the SQ, and
 * a thread blocked in wait() is woken to submit them with its next wait,
 * which reports a refusal that lasts (see uring_wait). */
static bool may_enter(uring_state_t *s) {
  return !s->single ||
         (s->enabled && pthread_equal(s->owner, pthread_self()) != 0);
}

static void sq_submit_now(uring_state_t *s) {
  unsigned n = sq_flush(s);
  int r = 0;
  if (n == 0) return;
  if (!may_enter(s)) {
    /* A one-thread ring: its thread submits them with its next wait,
     * woken now if it is blocked in one.  (The SQ full, the caller finds
     * no room and puts its operation on the backlog.) */
    if (s->in_wait > 0) wake_locked(s);
    return;
  }
  for (int i = 0; i < URING_WAKE_TRIES; i++) {
    r = ring_enter(s, n, 0, 0, NULL, 0, false);
    if (r != -EINTR) break;
  }
  if (r < 0 && s->in_wait > 0) wake_locked(s);
}

/* After preparing SQEs (lock held): a thread blocked in wait() would not
 * submit them before it returns, so do it here. */
static void sq_kick(uring_state_t *s) {
  if (s->in_wait > 0) sq_submit_now(s);
}

/* `n` free SQEs, submitting what is prepared if the SQ is full.  false when
 * the kernel did not make room (it refused the batch). */
static bool sq_reserve(uring_state_t *s, unsigned n) {
  if (io_uring_sq_space_left(&s->ring) >= n) return true;
  sq_submit_now(s);
  return io_uring_sq_space_left(&s->ring) >= n;
}

static struct io_uring_sqe *sqe_get(uring_state_t *s) {
  return sq_reserve(s, 1) ? io_uring_get_sqe(&s->ring) : NULL;
}

static struct io_uring_sqe *files_sqe(void *ctx) { return sqe_get(ctx); }

/* The slot a request on op's handle names, or -1 for its fd (see
 * "Registered files").  Called before the request's SQEs are taken: an
 * install it queues comes first. */
static int handle_slot(uring_state_t *s, taxi_op_t *op) {
  return uring_files_use(&s->files, op->handle, files_sqe, s);
}

/* Make sqe, prepared on op->handle, name `slot` instead (-1: keep the
 * fd).  sqe->fd is the handle in every request this applies to (the
 * output end of a splice). */
static void sqe_slot(struct io_uring_sqe *sqe, taxi_op_t *op, int slot) {
  uop(op)->fixed = slot + 1;
  if (slot < 0) return;
  sqe->fd = slot;
  sqe->flags |= IOSQE_FIXED_FILE;
}

/* ---- wake-ups ------------------------------------------------------------ */

/* Make the wait in progress, or the next one, return: any thread, with or
 * without the lock; needs no SQE.  A write already made and not yet
 * drained will do: wake-ups coalesce. */
static void wake_now(uring_state_t *s) {
  atomic_store_explicit(&s->wake_asked, 1, memory_order_seq_cst);
  int r = taxi__wakeup_signal(&s->wakeup); /* EINTR retried there */
  if (r > 0) count_syscall(s);
  /* Cannot happen with a working channel; should it, waits stop blocking
   * for long (enter_and_wait) and see wake_asked within
   * URING_BACKLOG_RETRY_NS. */
  if (r < 0) atomic_store_explicit(&s->wake_broken, 1, memory_order_seq_cst);
}

static void wake_locked(uring_state_t *s) { wake_now(s); }

/* The CQE of the wake-up poll: drain the eventfd, so that the next write
 * is a new event; a single-shot poll (or a multishot one the kernel
 * ended) is prepared again by the next wait.  Lock held. */
static void on_wake_cqe(uring_state_t *s, const struct io_uring_cqe *c) {
  /* A failed drain leaves the channel readable; the next signal still
   * wakes the poll. */
  count_syscall(s);
  taxi__wakeup_drain(&s->wakeup);
  if (!(c->flags & IORING_CQE_F_MORE)) s->wake_poll = WAKE_POLL_OFF;
}

/* Prepare the wake-up poll if it is not in the kernel (lock held):
 * multishot where the kernel has it (5.13; taken with multishot accept,
 * 5.19), else one shot prepared again after each wake-up. */
static void wake_poll_arm(uring_state_t *s) {
  struct io_uring_sqe *sqe;
  if (s->wake_poll == WAKE_POLL_PREPARED &&
      (int)(io_uring_smp_load_acquire(s->ring.sq.khead) - s->wake_poll_pos) >=
          0)
    s->wake_poll = WAKE_POLL_ARMED;
  if (s->wake_poll != WAKE_POLL_OFF) return;
  sqe = sqe_get(s);
  if (!sqe) return; /* the next wait tries again; meanwhile it polls */
  if (s->native_multishot)
    io_uring_prep_poll_multishot(sqe, taxi__wakeup_handle(&s->wakeup), POLLIN);
  else
    io_uring_prep_poll_add(sqe, taxi__wakeup_handle(&s->wakeup), POLLIN);
  sqe->user_data = UD_WAKE;
  s->wake_poll = WAKE_POLL_PREPARED;
  s->wake_poll_pos = s->ring.sq.sqe_tail;
}

/* ---- pipes for transmit-file --------------------------------------------- */

static void pipe_destroy(uring_state_t *s, uring_pipe_t *p) {
  close(p->fd[0]);
  close(p->fd[1]);
  count_syscall(s);
  count_syscall(s);
  taxi__free(p);
}

/* Grow p towards `want` bytes (at most URING_PIPE_SIZE) where it holds
 * less.  Refused (the user's pipe quota, fs.pipe-max-size), it keeps the
 * size it has: smaller steps, nothing else. */
static void pipe_grow(uring_state_t *s, uring_pipe_t *p, size_t want) {
  int cap;
  if (want > URING_PIPE_SIZE) want = URING_PIPE_SIZE;
  if (want <= p->cap) return;
  count_syscall(s);
  cap = fcntl(p->fd[1], F_SETPIPE_SZ, (int)want);
  if (cap > 0) p->cap = (unsigned)cap;
}

/* A clean pipe for a transmit-file of `len` file bytes, as big as the
 * range needs up to URING_PIPE_SIZE: a small file takes the default size
 * and no fcntl, and only pipes that carry large files count a large size
 * against the user's quota (the kernel counts a pipe's capacity, used or
 * not). */
static int pipe_get(uring_state_t *s, uint64_t len, uring_pipe_t **out) {
  uring_pipe_t *p = s->free_pipes;
  /* A range starting inside a page takes one page more. */
  size_t want =
      len < URING_PIPE_SIZE ? (size_t)len + s->page_size : URING_PIPE_SIZE;
  int cap;
  if (p) {
    s->free_pipes = p->next;
    s->nfree_pipes--;
  } else {
    p = taxi__malloc(sizeof *p);
    if (!p) return TAXI_ENOMEM;
    count_syscall(s);
    if (pipe2(p->fd, O_CLOEXEC) < 0) {
      int err = errno;
      taxi__free(p);
      return taxi__error_from_os(err);
    }
    count_syscall(s);
    cap = fcntl(p->fd[1], F_GETPIPE_SZ);
    p->cap = cap > 0 ? (unsigned)cap : 65536u;
  }
  pipe_grow(s, p, want);
  *out = p;
  return 0;
}

/* Give a pipe back; one that still holds data is closed, not reused. */
static void pipe_put(uring_state_t *s, uring_pipe_t *p, bool clean) {
  if (!clean || s->nfree_pipes >= URING_PIPES_KEPT) {
    pipe_destroy(s, p);
    return;
  }
  p->next = s->free_pipes;
  s->free_pipes = p;
  s->nfree_pipes++;
}

/* ---- lists: backlog and deferred completions ----------------------------- */

static void backlog_add(uring_state_t *s, taxi_op_t *op, unsigned need) {
  uring_op_t *u = uop(op);
  if (!(u->state & (UOP_NEED_STEP | UOP_NEED_CANCEL))) {
    u->bl_next = NULL;
    if (s->backlog_tail)
      uop(s->backlog_tail)->bl_next = op;
    else
      s->backlog = op;
    s->backlog_tail = op;
  }
  u->state |= need;
}

/* From submit or cancel: a waiter blocked in the kernel would not look at
 * the backlog before some completion arrives, so wake it (a wake-up needs
 * no SQE); it retries the backlog every URING_BACKLOG_RETRY_NS from then
 * on. */
static void backlog_add_kick(uring_state_t *s, taxi_op_t *op, unsigned need) {
  backlog_add(s, op, need);
  if (s->in_wait > 0) wake_locked(s);
}

static void backlog_remove(uring_state_t *s, taxi_op_t *op) {
  taxi_op_t **pp = &s->backlog, *prev = NULL;
  while (*pp && *pp != op) {
    prev = *pp;
    pp = &uop(*pp)->bl_next;
  }
  if (!*pp) return;
  *pp = uop(op)->bl_next;
  if (s->backlog_tail == op) s->backlog_tail = prev;
  uop(op)->state &= ~(UOP_NEED_STEP | UOP_NEED_CANCEL);
}

/* Where completions go while wait() fills its array. */
typedef struct sink {
  taxi__completion_t *out;
  size_t n, max;
} sink_t;

static void emit(uring_state_t *s, sink_t *k, taxi_op_t *op, int64_t result,
                 unsigned flags) {
  uring_op_t *u = uop(op);
  if (!(flags & TAXI__CQ_MORE)) {
    u->state &= ~UOP_INFLIGHT;
    /* The record may be reused once this is reported: off every list. */
    if (u->state & (UOP_NEED_STEP | UOP_NEED_CANCEL)) backlog_remove(s, op);
  }
  if (k && k->n < k->max && !(u->state & UOP_DEFERRED)) {
    k->out[k->n].op = op;
    k->out[k->n].result = result;
    k->out[k->n].flags = flags;
    k->n++;
    return;
  }
  /* No room, or produced outside wait (cancel): keep it for the next wait.
   * A record holds two at most.  wait() empties this list before it looks
   * at any CQE, and looks at a CQE only with room for one completion, so a
   * CQE adds at most one here (the second of a connection plus the final
   * completion of a cancelled multishot accept); cancel() adds at most the
   * final one, after at most one connection. */
  if (!(u->state & UOP_DEFERRED)) {
    u->ndef = 0;
    u->state |= UOP_DEFERRED;
    u->def_next = NULL;
    if (s->deferred_tail)
      uop(s->deferred_tail)->def_next = op;
    else
      s->deferred = op;
    s->deferred_tail = op;
  }
  if (u->ndef < 2) {
    u->def_result[u->ndef] = result;
    u->def_flags[u->ndef] = flags;
    u->ndef++;
  }
}

static void deferred_drain(uring_state_t *s, sink_t *k) {
  while (s->deferred && k->n < k->max) {
    taxi_op_t *op = s->deferred;
    uring_op_t *u = uop(op);
    k->out[k->n].op = op;
    k->out[k->n].result = u->def_result[0];
    k->out[k->n].flags = u->def_flags[0];
    k->n++;
    if (--u->ndef > 0) {
      u->def_result[0] = u->def_result[1];
      u->def_flags[0] = u->def_flags[1];
      continue;
    }
    s->deferred = u->def_next;
    if (!s->deferred) s->deferred_tail = NULL;
    u->state &= ~UOP_DEFERRED;
  }
}

static int64_t os_result(int res) {
  return res < 0 ? taxi__error_from_os(-res) : res;
}

/* ---- preparing requests (lock held) -------------------------------------- */

static void sqe_tag(struct io_uring_sqe *sqe, taxi_op_t *op, unsigned tag) {
  sqe->user_data = ud_make(op, tag);
  uop(op)->parts |= 1u << tag;
}

static int prep_accept(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  int slot = handle_slot(s, op);
  struct io_uring_sqe *sqe = sqe_get(s);
  const int flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
  if (!sqe) return TAXI_EAGAIN;
  u->state &= ~UOP_NATIVE;
  if (!(u->state & UOP_MULTISHOT)) {
    u->peer_len = (socklen_t)sizeof op->peer;
    io_uring_prep_accept(sqe, op->handle, (struct sockaddr *)op->peer,
                         &u->peer_len, flags);
  } else {
    /* No address: see the file comment. */
    io_uring_prep_accept(sqe, op->handle, NULL, NULL, flags);
    if (s->native_multishot && !(u->state & UOP_MS_SINGLE)) {
      sqe->ioprio |= IORING_ACCEPT_MULTISHOT;
      u->state |= UOP_NATIVE;
    }
  }
  sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

static int prep_connect(uring_state_t *s, taxi_op_t *op) {
  int slot = handle_slot(s, op);
  struct io_uring_sqe *sqe = sqe_get(s);
  if (!sqe) return TAXI_EAGAIN;
  io_uring_prep_connect(sqe, op->handle,
                        (const struct sockaddr *)op->internal_.addr,
                        (socklen_t)op->internal_.addr_len);
  sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

#ifdef URING_HAVE_BUF_RING
/* A pooled read: the kernel picks a buffer of group 0 for each arrival,
 * and with TAXI_READ_MULTISHOT goes on receiving. */
static int prep_recv_select(uring_state_t *s, taxi_op_t *op) {
  int slot = handle_slot(s, op);
  struct io_uring_sqe *sqe = sqe_get(s);
  if (!sqe) return TAXI_EAGAIN;
  io_uring_prep_recv(sqe, op->handle, NULL, 0, 0);
  sqe_slot(sqe, op, slot);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = 0;
  if (op->internal_.flags & TAXI_READ_MULTISHOT)
    sqe->ioprio |= IORING_RECV_MULTISHOT;
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}
#else
static int prep_recv_select(uring_state_t *s, taxi_op_t *op) {
  (void)s;
  (void)op;
  return TAXI_ENOTSUP; /* never asked: buf_open said the core chooses */
}
#endif

/* The SQE of op's request, after a poll for `events` linked to it when the
 * step waits for readiness first (UOP_POLL_FIRST); NULL without room for
 * them.  The poll names `slot` as the request does. */
static struct io_uring_sqe *sqe_get_polled(uring_state_t *s, taxi_op_t *op,
                                           int slot, unsigned events) {
  struct io_uring_sqe *poll;
  if (!(uop(op)->state & UOP_POLL_FIRST)) return sqe_get(s);
  if (!sq_reserve(s, 2)) return NULL;
  poll = io_uring_get_sqe(&s->ring);
  io_uring_prep_poll_add(poll, op->handle, events);
  sqe_slot(poll, op, slot);
  poll->flags |= IOSQE_IO_LINK;
  sqe_tag(poll, op, UD_POLL);
  return io_uring_get_sqe(&s->ring);
}

static int prep_recv(uring_state_t *s, taxi_op_t *op) {
  taxi_buf_t b;
  struct io_uring_sqe *sqe;
  int slot, flags = (op->internal_.flags & TAXI_READ_EXACT) ? MSG_WAITALL : 0;
  if (op->internal_.flags & TAXI__READ_SELECT) return prep_recv_select(s, op);
  if (taxi__op_remaining_bufs(op, &b, 1) != 1) return TAXI_EINVAL;
  slot = handle_slot(s, op);
  sqe = sqe_get_polled(s, op, slot, POLLIN);
  if (!sqe) return TAXI_EAGAIN;
  io_uring_prep_recv(sqe, op->handle, b.base, clamp_len(b.len), flags);
  sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

/* WRITE, and the header or trailer of a transmit-file. */
static int prep_send(uring_state_t *s, taxi_op_t *op, int extra_flags) {
  uring_op_t *u = uop(op);
  taxi_buf_t b[TAXI_OP_MAX_BUFS];
  size_t k = taxi__op_remaining_bufs(op, b, TAXI_OP_MAX_BUFS);
  struct io_uring_sqe *sqe;
  int slot, flags = MSG_NOSIGNAL | MSG_WAITALL | extra_flags;
  if (k == 0) return TAXI_EINVAL;
  slot = handle_slot(s, op);
  sqe = sqe_get_polled(s, op, slot, POLLOUT);
  if (!sqe) return TAXI_EAGAIN;
  if (k == 1) {
    io_uring_prep_send(sqe, op->handle, b[0].base, clamp_len(b[0].len), flags);
  } else {
    memset(&u->msg, 0, sizeof u->msg);
    for (size_t i = 0; i < k; i++) {
      u->iov[i].iov_base = b[i].base;
      u->iov[i].iov_len = b[i].len;
    }
    u->msg.msg_iov = u->iov;
    u->msg.msg_iovlen = k;
    io_uring_prep_sendmsg(sqe, op->handle, &u->msg, (unsigned)flags);
  }
  sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

static int prep_file_rw(uring_state_t *s, taxi_op_t *op) {
  taxi_buf_t b;
  struct io_uring_sqe *sqe;
  uint64_t off = (uint64_t)taxi__op_file_offset(op);
  int slot;
  if (taxi__op_remaining_bufs(op, &b, 1) != 1) return TAXI_EINVAL;
  slot = handle_slot(s, op);
  sqe = sqe_get(s);
  if (!sqe) return TAXI_EAGAIN;
  if (op->kind == TAXI_OP_READ_FILE)
    io_uring_prep_read(sqe, op->handle, b.base, clamp_len(b.len), off);
  else
    io_uring_prep_write(sqe, op->handle, b.base, clamp_len(b.len), off);
  sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

/* Transmit-file, file part, a new step: file -> pipe, linked to
 * pipe -> socket.  The pipe is taken by submit (it may fail there). */
static int prep_tx_fill(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  size_t left = taxi__op_tx_file_remaining(op), chunk;
  struct io_uring_sqe *fill, *drain;
  int slot = handle_slot(s, op); /* before the linked pair's SQEs */
  /* A file range starting inside a page takes one more pipe slot than its
   * length suggests: ask a page less than the pipe holds. */
  chunk = u->pipe->cap > 2 * s->page_size ? u->pipe->cap - s->page_size
                                          : u->pipe->cap;
  if (chunk > left) chunk = left;
  if (!sq_reserve(s, 2)) return TAXI_EAGAIN;
  u->splice_more = (left > chunk || op->internal_.bufs[TAXI__OP_TRAILER].len)
                       ? SPLICE_F_MORE
                       : 0;
  u->in_pipe = 0;
  u->sent = 0;
  u->fill_res = 0;
  u->err = 0;
  fill = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(fill, op->internal_.file, taxi__op_file_offset(op),
                       u->pipe->fd[1], -1, (unsigned)chunk, SPLICE_F_NONBLOCK);
  fill->flags |= IOSQE_IO_LINK;
  sqe_tag(fill, op, UD_FILL);
  drain = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(drain, u->pipe->fd[0], -1, op->handle, -1,
                       (unsigned)chunk, SPLICE_F_NONBLOCK | u->splice_more);
  sqe_slot(drain, op, slot);
  sqe_tag(drain, op, UD_MAIN);
  return 0;
}

/* Transmit-file: the pipe still holds in_pipe bytes; wait for room in the
 * socket, then splice them. */
static int prep_tx_drain(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  struct io_uring_sqe *poll, *drain;
  int slot = handle_slot(s, op); /* before the linked pair's SQEs */
  if (!sq_reserve(s, 2)) return TAXI_EAGAIN;
  poll = io_uring_get_sqe(&s->ring);
  io_uring_prep_poll_add(poll, op->handle, POLLOUT);
  sqe_slot(poll, op, slot);
  poll->flags |= IOSQE_IO_LINK;
  sqe_tag(poll, op, UD_POLL);
  drain = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(drain, u->pipe->fd[0], -1, op->handle, -1, u->in_pipe,
                       SPLICE_F_NONBLOCK | u->splice_more);
  sqe_slot(drain, op, slot);
  sqe_tag(drain, op, UD_MAIN);
  return 0;
}

static int prep_transmit(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  switch (taxi__op_tx_part(op)) {
    case TAXI__TX_HEADER: {
      bool more = op->internal_.file_len > 0 ||
                  op->internal_.bufs[TAXI__OP_TRAILER].len > 0;
      return prep_send(s, op, more ? MSG_MORE : 0);
    }
    case TAXI__TX_FILE:
      return (u->state & UOP_DRAIN) ? prep_tx_drain(s, op)
                                    : prep_tx_fill(s, op);
    case TAXI__TX_TRAILER:
      return prep_send(s, op, 0);
    default:
      return TAXI_EINVAL;
  }
}

/* Queue the request(s) of op's current step.  TAXI_EAGAIN: no SQE. */
static int prep_op(uring_state_t *s, taxi_op_t *op) {
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      return prep_accept(s, op);
    case TAXI_OP_CONNECT:
      return prep_connect(s, op);
    case TAXI_OP_READ:
      return prep_recv(s, op);
    case TAXI_OP_WRITE:
      return prep_send(s, op, 0);
    case TAXI_OP_READ_FILE:
    case TAXI_OP_WRITE_FILE:
      return prep_file_rw(s, op);
    case TAXI_OP_TRANSMIT_FILE:
      return prep_transmit(s, op);
    default:
      return TAXI_ENOTSUP;
  }
}

/* A step that cannot be queued at all ends the operation. */
static void fail_step(uring_state_t *s, sink_t *k, taxi_op_t *op, int code) {
  uring_op_t *u = uop(op);
  if (u->pipe) {
    pipe_put(s, u->pipe, u->in_pipe == 0);
    u->pipe = NULL;
  }
  emit(s, k, op, code, 0);
}

/* Queue op's step again from wait (a retry, a re-armed accept, a pipe
 * drain); without an SQE it waits on the backlog. */
static void requeue(uring_state_t *s, sink_t *k, taxi_op_t *op) {
  int r = prep_op(s, op);
  if (r == TAXI_EAGAIN)
    backlog_add(s, op, UOP_NEED_STEP);
  else if (r < 0)
    fail_step(s, k, op, r);
}

/* One IORING_OP_ASYNC_CANCEL per request of op still due. */
static int prep_cancels(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  unsigned n = 0;
  for (unsigned t = 0; t <= UD_TAG_MASK; t++) n += (u->parts >> t) & 1u;
  if (!sq_reserve(s, n)) return TAXI_EAGAIN;
  for (unsigned t = 0; t <= UD_TAG_MASK; t++) {
    struct io_uring_sqe *sqe;
    if (!(u->parts & (1u << t))) continue;
    sqe = io_uring_get_sqe(&s->ring);
    io_uring_prep_rw(IORING_OP_ASYNC_CANCEL, sqe, -1, NULL, 0, 0);
    sqe->addr = ud_make(op, t);
    sqe->user_data = UD_CANCEL_ACK;
  }
  return 0;
}

/* ---- completions (lock held) --------------------------------------------- */

/* An -ECANCELED nobody asked for (the submitting thread exited): submit
 * the step again rather than report it.  True if it was. */
static bool retry_unrequested(uring_state_t *s, sink_t *k, taxi_op_t *op,
                              int res) {
  uring_op_t *u = uop(op);
  if (res != -ECANCELED || (u->state & UOP_CANCEL)) return false;
  if (u->retries >= URING_MAX_RETRIES) return false;
  u->retries++;
  requeue(s, k, op);
  return true;
}

/* A step submitted behind its poll (UOP_POLL_FIRST): true once the CQEs of
 * both are in, with *res the step's outcome - the request's result, or the
 * poll's error where the poll failed and the kernel cancelled the request
 * linked to it. */
static bool poll_first_done(uring_op_t *u, unsigned tag, int *res) {
  if (tag == UD_POLL) {
    if (*res < 0 && *res != -ECANCELED && !u->err) u->err = *res;
  } else {
    u->main_res = *res;
  }
  if (u->parts) return false;
  u->state &= ~UOP_POLL_FIRST;
  *res = u->main_res == -ECANCELED && u->err ? u->err : u->main_res;
  return true;
}

static void on_simple(uring_state_t *s, sink_t *k, taxi_op_t *op, int res) {
  uring_op_t *u = uop(op);
  if (res == -EAGAIN && !(u->state & UOP_CANCEL) &&
      (op->kind == TAXI_OP_READ || op->kind == TAXI_OP_WRITE ||
       op->kind == TAXI_OP_TRANSMIT_FILE)) {
    /* A send or receive on the socket (a transmit-file's header or
     * trailer) that io-wq ended for want of room or data (see WRITE at
     * the top of the file): not a result.  Again, once the socket is
     * ready; the bytes it moved before were reported already. */
    u->state |= UOP_POLL_FIRST;
    u->err = 0;
    u->main_res = 0;
    requeue(s, k, op);
    return;
  }
  if (retry_unrequested(s, k, op, res)) return;
  uop(op)->retries = 0;
  if (op->kind == TAXI_OP_ACCEPT && res >= 0) op->peer_len = uop(op)->peer_len;
  emit(s, k, op, os_result(res), 0);
}

static void on_multishot(uring_state_t *s, sink_t *k, taxi_op_t *op, int res,
                         unsigned cflags) {
  uring_op_t *u = uop(op);
  if (cflags & IORING_CQE_F_MORE) {
    u->state |= UOP_MS_WORKED;
    u->retries = 0;
    emit(s, k, op, os_result(res), TAXI__CQ_MORE);
    return;
  }
  /* The request ended. */
  if (res >= 0) {
    u->retries = 0;
    if (u->state & UOP_MS_PROBE) {
      /* The single accept worked where the multishot one got EINVAL: the
       * kernel lacks the flag.  Every later one is single-shot at once. */
      u->state &= ~UOP_MS_PROBE;
      s->native_multishot = false;
    }
    if (u->state & UOP_CANCEL) {
      emit(s, k, op, res, TAXI__CQ_MORE);
      emit(s, k, op, TAXI_ECANCELED, 0);
    } else {
      emit(s, k, op, res, TAXI__CQ_MORE);
      requeue(s, k, op);
    }
    return;
  }
  if (res == -EINVAL && (u->state & UOP_NATIVE) &&
      !(u->state & (UOP_MS_WORKED | UOP_CANCEL))) {
    /* A kernel without multishot accept (before 5.19) says EINVAL, and so
     * does a socket that is not listening.  A single accept tells which:
     * its own EINVAL is reported; its success turns the ring to single
     * accepts (see above), so one application error does not. */
    u->state |= UOP_MS_SINGLE | UOP_MS_PROBE;
    requeue(s, k, op);
    return;
  }
  if (retry_unrequested(s, k, op, res)) return;
  emit(s, k, op, os_result(res), 0);
}

/* A pooled read's CQE: the buffer the kernel chose travels in the flags
 * (backends/completion.h); -ENOBUFS, the group empty, ends the request
 * and the core waits for a buffer or grows the pool. */
static void on_pooled(uring_state_t *s, sink_t *k, taxi_op_t *op, int res,
                      unsigned cflags) {
  unsigned f = 0;
#ifdef URING_HAVE_BUF_RING
  if (res > 0 && (cflags & IORING_CQE_F_BUFFER))
    f = TAXI__CQ_BUFFER |
        ((cflags >> IORING_CQE_BUFFER_SHIFT) << TAXI__CQ_BUF_SHIFT);
#endif
  if (cflags & IORING_CQE_F_MORE) {
    uop(op)->retries = 0;
    emit(s, k, op, res, f | TAXI__CQ_MORE);
    return;
  }
  if (res == -ENOBUFS) {
    emit(s, k, op, TAXI_ENOMEM, TAXI__CQ_NOBUFS);
    return;
  }
  if (retry_unrequested(s, k, op, res)) return;
  uop(op)->retries = 0;
  emit(s, k, op, os_result(res), f);
}

/* Transmit-file, file part: every request of the step has completed. */
static void tx_step_done(uring_state_t *s, sink_t *k, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  int64_t result;
  if (!(u->state & UOP_CANCEL) && !u->err && u->in_pipe > 0) {
    /* The socket took less than the pipe holds: drain before reporting. */
    u->state |= UOP_DRAIN;
    requeue(s, k, op);
    return;
  }
  u->state &= ~UOP_DRAIN;
  if (u->sent == 0 && !(u->state & UOP_CANCEL) && !u->err &&
      u->fill_res == -ECANCELED && retry_unrequested(s, k, op, u->fill_res))
    return; /* keeps the pipe, which is empty */
  pipe_put(s, u->pipe, u->in_pipe == 0);
  u->pipe = NULL;
  u->retries = 0;
  if (u->sent > 0)
    result = (int64_t)u->sent;
  else if (u->state & UOP_CANCEL)
    result = TAXI_ECANCELED;
  else if (u->err)
    result = os_result(u->err);
  else if (u->fill_res < 0)
    result = os_result(u->fill_res);
  else
    /* 0: the file ended before the range did (it shrank since the call);
     * the core reports TAXI_EEOF. */
    result = 0;
  emit(s, k, op, result, 0);
}

static void note_err(uring_op_t *u, int res) {
  /* EAGAIN (a full socket) and ECANCELED (a broken link, a cancel) are
   * what a drain handles, not errors. */
  if (res < 0 && res != -EAGAIN && res != -ECANCELED && !u->err) u->err = res;
}

static void on_tx_file(uring_state_t *s, sink_t *k, taxi_op_t *op, unsigned tag,
                       int res) {
  uring_op_t *u = uop(op);
  switch (tag) {
    case UD_FILL:
      u->fill_res = res;
      if (res > 0) u->in_pipe += (uint32_t)res;
      note_err(u, res);
      break;
    case UD_MAIN:
      if (res > 0) {
        u->in_pipe -= (uint32_t)res;
        u->sent += (uint64_t)res;
      } else if (res == 0 && u->in_pipe > 0 && !(u->parts & (1u << UD_FILL))) {
        /* Nothing moved although the pipe holds data: not a state that
         * draining again would leave. */
        note_err(u, -EIO);
      }
      note_err(u, res);
      break;
    default: /* UD_POLL: a mask, or an error the splice will meet too */
      note_err(u, res);
      break;
  }
  if (u->parts == 0) tx_step_done(s, k, op);
}

static void on_cqe(uring_state_t *s, sink_t *k, const struct io_uring_cqe *c,
                   bool *woken) {
  taxi_op_t *op;
  unsigned tag = (unsigned)(c->user_data & UD_TAG_MASK);
  uring_op_t *u;
  int res = c->res;
  if (c->user_data & URING_FILES_UD) {
    uring_files_cqe(&s->files, c->user_data, c->res);
    return;
  }
  op = (taxi_op_t *)(uintptr_t)(c->user_data & ~(uint64_t)UD_TAG_MASK);
  if (!op) {
    if (c->user_data == UD_WAKE) on_wake_cqe(s, c);
    (void)woken; /* told by wake_asked (uring_wait) */
    return;      /* UD_CANCEL_ACK: the cancelled request reports itself */
  }
  u = uop(op);
  /* A multishot request stays in flight while its CQEs say MORE. */
  if (!(c->flags & IORING_CQE_F_MORE)) u->parts &= ~(1u << tag);
  if ((u->state & UOP_POLL_FIRST) && !poll_first_done(u, tag, &res)) return;
  if (res == -EBADF && u->fixed && u->parts == 0 && !u->pipe &&
      !(u->state & UOP_CANCEL) &&
      uring_files_install_failed(&s->files, op->handle, u->fixed - 1)) {
    /* The install before it failed: again, on the fd this time. */
    requeue(s, k, op);
    return;
  }
  if (op->kind == TAXI_OP_TRANSMIT_FILE && u->pipe)
    on_tx_file(s, k, op, tag, res);
  else if (op->internal_.flags & TAXI__READ_SELECT)
    on_pooled(s, k, op, res, c->flags);
  else if (u->state & UOP_MULTISHOT)
    on_multishot(s, k, op, res, c->flags);
  else
    on_simple(s, k, op, res);
}

/* Reap CQEs while there is room; the rest stay in the ring. */
static void reap(uring_state_t *s, sink_t *k, bool *woken) {
  struct io_uring_cqe *c;
  unsigned head, seen = 0;
  io_uring_for_each_cqe(&s->ring, head, c) {
    if (k->n >= k->max) break;
    on_cqe(s, k, c, woken);
    seen++;
  }
  io_uring_cq_advance(&s->ring, seen);
  if (seen)
    atomic_fetch_add_explicit(&s->counters->cqes, seen, memory_order_relaxed);
}

/* Retry what waits on the backlog, oldest first, until the SQ is full. */
static void backlog_run(uring_state_t *s, sink_t *k) {
  while (s->backlog) {
    taxi_op_t *op = s->backlog;
    uring_op_t *u = uop(op);
    int r = (u->state & UOP_NEED_STEP) ? prep_op(s, op) : prep_cancels(s, op);
    if (r == TAXI_EAGAIN) return;
    s->backlog = u->bl_next;
    if (!s->backlog) s->backlog_tail = NULL;
    u->state &= ~(UOP_NEED_STEP | UOP_NEED_CANCEL);
    if (r < 0) fail_step(s, k, op, r);
  }
}

/* ---- the table's functions ----------------------------------------------- */

static int open_error(int err) {
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
static int check_ops(struct io_uring *ring, bool *has_socket, bool *has_send_zc,
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
static int ring_setup(uring_state_t *s, unsigned depth, bool compat,
                      bool single, bool no_defer) {
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
  for (unsigned i = 0; i < n; i++) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = tries[i];
    p.cq_entries = depth * URING_CQ_FACTOR;
    r = io_uring_queue_init_params(depth, &s->ring, &p);
    if (r == -EINVAL) continue;
    if (r < 0) break;
    if (!(p.features & IORING_FEAT_NODROP) ||
        !(p.features & IORING_FEAT_EXT_ARG)) {
      io_uring_queue_exit(&s->ring);
      return open_error(ENOSYS); /* before 5.11 */
    }
    s->setup_flags = tries[i];
    s->ring_features = p.features;
    s->single = (tries[i] & IORING_SETUP_R_DISABLED) != 0;
    return 0;
  }
  return open_error(-r);
}

/* The slots of the table of registered files (see "Registered files"):
 * URING_FILES_SLOTS, or what TAXI_URING_FILES says (a test's knob; 0: no
 * table), at most IORING_MAX_FIXED_FILES of 5.11 and RLIMIT_NOFILE. */
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
  r = ring_setup(s, depth, compat,
                 opts && (opts->flags & TAXI_PROACTOR_ONE_THREAD),
                 opts && (opts->flags & TAXI_PROACTOR_NO_DEFER_TASKRUN));
  if (r == 0) {
    int err =
        check_ops(&s->ring, &has_socket, &s->has_recv_multishot, &has_update);
    if (err) {
      io_uring_queue_exit(&s->ring);
      r = open_error(err);
    }
  }
  if (r == 0) {
    count_syscall(s);
    r = taxi__wakeup_open(&s->wakeup);
    if (r < 0) io_uring_queue_exit(&s->ring);
  }
  if (r == 0) {
    /* Now, before a one-thread ring is enabled (see "Registered files").
     * Refused (memory, a limit), every handle stays on its fd. */
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
  if (s->br) munmap(s->br, s->br_bytes); /* the kernel let go with the ring */
  taxi__wakeup_close(&s->wakeup);
  count_syscall(s);
  while (s->free_pipes) {
    uring_pipe_t *p = s->free_pipes;
    s->free_pipes = p->next;
    pipe_destroy(s, p);
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
  /* Adopted, its slot comes with its first request ("Registered
   * files"). */
  taxi__mutex_lock(&s->lock);
  r = uring_files_attach(&s->files, h);
  taxi__mutex_unlock(&s->lock);
  return r;
}

/* h is the proactor's own (see "Registered files"): its first request
 * gives it a slot. */
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
  if (uring_files_release(&s->files, h, s->closed ? no_sqe : files_sqe, s))
    sq_submit_now(s);
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
  if (!s->closed) sq_submit_now(s);
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
    r = pipe_get(s, taxi__op_tx_file_remaining(op), &u->pipe);
    if (r < 0) goto fail;
  }
  r = prep_op(s, op);
  if (r == TAXI_EAGAIN) {
    backlog_add_kick(s, op, UOP_NEED_STEP);
    r = 0;
  }
  if (r < 0) {
    if (u->pipe) pipe_put(s, u->pipe, true);
    u->pipe = NULL;
    goto fail;
  }
  sq_kick(s);
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
      backlog_remove(s, op);
      if (op->kind == TAXI_OP_TRANSMIT_FILE && u->pipe)
        tx_step_done(s, NULL, op);
      else
        emit(s, NULL, op, TAXI_ECANCELED, 0);
      wake_locked(s);
    } else if (u->parts) {
      /* Submitted at once, not with the next wait: a cancel is asked for
       * to take effect now (a throttled multishot accept must stop before
       * more connections come). */
      if (prep_cancels(s, op) == TAXI_EAGAIN)
        backlog_add_kick(s, op, UOP_NEED_CANCEL);
      sq_submit_now(s);
    }
  }
  taxi__mutex_unlock(&s->lock);
  return 0;
}

static void uring_wake(void *state, int all) {
  uring_state_t *s = state;
  (void)all; /* one waiter at most: no TAXI__PCAP_MULTI_WAIT */
  if (!s) return;
  wake_now(s);
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
  r = ring_enter(s, to_submit, 1, flags, argp, argsz, true);
  taxi__mutex_lock(&s->lock);
  s->in_wait--;
  return capped && r == -ETIME ? 0 : r;
}

/* A one-thread ring: the first thread that waits enables it and becomes
 * its issuer.  1 when the calling thread is that thread, 0 when not, or
 * the error enabling it (cannot happen to a ring made disabled; should
 * it, the wait reports it and the proactor backs off). */
static int own_ring(uring_state_t *s) {
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
    on_cqe(s, k, &c, woken);
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
static int orphan_wait(uring_state_t *s, sink_t *k) {
  bool woken = false;
  if (s->closed) return TAXI_ESTOPPED;
  deferred_drain(s, k);
  reap(s, k, &woken);
  orphan_cancel_sq(s, k, &woken);
  backlog_run(s, k);
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
  r = own_ring(s);
  if (r <= 0) {
    if (r == 0) r = orphan_wait(s, &k);
    taxi__mutex_unlock(&s->lock);
    return r;
  }
  for (;;) {
    unsigned to_submit;
    r = 0;
    uring_files_flush(&s->files, files_sqe, s);
    backlog_run(s, &k);
    wake_poll_arm(s);
    to_submit = sq_flush(s);
    if (s->deferred || io_uring_cq_ready(&s->ring) > 0 || timeout_ms == 0 ||
        atomic_load(&s->wake_asked)) {
      /* Submit what is prepared and pick up completions the kernel kept
       * back (CQ overflow), without blocking. */
      if (to_submit > 0 || cq_needs_enter(s))
        r = ring_enter(s, to_submit, 0, IORING_ENTER_GETEVENTS, NULL, 0, true);
    } else {
      r = enter_and_wait(s, to_submit, deadline);
    }
    deferred_drain(s, &k);
    reap(s, &k, &woken);
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

/* The ring of provided buffers, registered while the ring may still be
 * registered with by any thread (before a one-thread ring is enabled:
 * the proactor is being made).  Its memory must be page-aligned. */
#ifdef URING_HAVE_BUF_RING
static int uring_buf_open(void *state, unsigned max, size_t size) {
  uring_state_t *s = state;
  if (!s->has_recv_multishot || s->br) return TAXI_ENOTSUP;
  size_t bytes = (size_t)max * sizeof(struct io_uring_buf);
  void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  count_syscall(s);
  if (mem == MAP_FAILED) return TAXI_ENOTSUP; /* the core chooses then */
  struct io_uring_buf_reg reg;
  memset(&reg, 0, sizeof reg);
  reg.ring_addr = (uint64_t)(uintptr_t)mem;
  reg.ring_entries = max;
  reg.bgid = 0;
  io_uring_buf_ring_init(mem);
  count_syscall(s);
  if (io_uring_register_buf_ring(&s->ring, &reg, 0) < 0) {
    munmap(mem, bytes);
    count_syscall(s);
    return TAXI_ENOTSUP;
  }
  s->br = mem;
  s->br_entries = max;
  s->br_bytes = bytes;
  s->buf_size = size;
  return 0;
}

/* Publish one free buffer to the kernel: memory only, so any thread may
 * (under the mutex: the ring's tail has one producer). */
static void uring_buf_give(void *state, unsigned id, void *addr) {
  uring_state_t *s = state;
  taxi__mutex_lock(&s->lock);
  io_uring_buf_ring_add(s->br, addr, (unsigned)s->buf_size, (unsigned short)id,
                        io_uring_buf_ring_mask(s->br_entries), 0);
  io_uring_buf_ring_advance(s->br, 1);
  taxi__mutex_unlock(&s->lock);
}
#else
static int uring_buf_open(void *state, unsigned max, size_t size) {
  (void)state;
  (void)max;
  (void)size;
  return TAXI_ENOTSUP;
}

static void uring_buf_give(void *state, unsigned id, void *addr) {
  (void)state;
  (void)id;
  (void)addr;
}
#endif

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
  if (s->br) f |= TAXI_PFEAT_PROVIDED_BUFFERS;
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
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__completion_uring_absent;
#endif /* TAXI_HAVE_URING */
