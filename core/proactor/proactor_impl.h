/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_impl.h - the proactor's private state and the
 * functions its layers offer each other.
 *
 * The layering of core/proactor/.  A file calls by name only the files of
 * the layers below its own; work a lower layer finds for a higher one is
 * handed up through the state (the follow-on queues and the wake_wanted
 * flag that the loop reads) or through a hook (the teardown hook), never by
 * a call:
 *
 *   5  above the core   proactor_signal.c (signals; uses the public API
 *                       and registers the teardown hook), proactor_group.c,
 *                       proactor_move.c; core/pools/proactor_source.c from
 *                       the pools' wing
 *   4  life cycle       proactor.c (create, destroy, handles, cancel,
 *                       counters, buffer release), proactor_start.c
 *                       (starting operations), proactor_more.c (a
 *                       multishot receive's reported datagrams, taken in
 *                       its handler)
 *   3  the loop         proactor_dispatch.c: submits the follow-on
 *                       operations the completion layer queued, expires
 *                       timers, ends pauses, waits, dispatches, drains
 *   2  completion       proactor_complete.c: processes what the backend
 *                       reports, completes operations, queues follow-ons
 *      submission       proactor_submit.c: gives a head to the backend, or
 *                       pauses it (completion and submission never call
 *                       each other: submit -> complete -> submit would be
 *                       a recursion)
 *   1  the table        proactor_table.c (rows per attached handle, their
 *                       queues, the timer heap, the paused list),
 *                       proactor_buffers.c (the pool of pooled reads,
 *                       and the groups of datagram receives, whose sizes
 *                       proactor_groups.c keeps),
 *                       proactor_op.c (what is left of an operation),
 *                       proactor_backends.c (choosing a backend)
 *   0  headers          proactor_consts.h (phases, flags, limits), this one
 *
 * The follow-ons.  When a head leaves its handle's queue (completed), the
 * completion layer does not submit the next operation: it puts the row on
 * the `due` list (linked through the rows by index), and a transfer that
 * has more to go, or a request to issue again, goes on the `again` list
 * (linked through internal_.next: a head is on no other list then).  The
 * loop's taxi__proactor_follow_ons_locked() submits them, completing those
 * the backend refuses, until both lists are empty.  Every caller of the
 * completion layer runs it before the lock is released, so outside the
 * lock both lists are always empty (and no row on them can be freed or
 * reused meanwhile).  Both lists are intrusive: no allocation per
 * completion.
 *
 * The life of an operation record is told in proactor_consts.h.
 *
 * Per handle and direction only the head (`cur`) is ever submitted; the
 * others wait in a FIFO linked through internal_.next.  That is what makes
 * completions come in the order of issue on every backend.  The head is
 * not linked through `next` by its handle, so a multishot head can sit in
 * the completion queue (also linked through `next`) while it still blocks
 * its queue, and a head with no backend can wait on the paused list or on
 * the loop's `again` list.
 *
 * Closing or detaching a handle cancels its heads, marks every queued op
 * cancelled and forgets the handle (it may be attached again at once), but
 * keeps its row as a "zombie" until the heads' completions arrive: then the
 * queued ops complete with TAXI_ECANCELED, still in order, and the row is
 * freed.  So an op always knows its row (internal_.heap_index) while it is
 * queued or submitted.
 *
 * A closed handle's descriptor is closed with its zombie row, not before:
 * a backend may still hold a request that names the descriptor by number
 * (an io_uring SQE prepared but not yet submitted, a linked request the
 * kernel resolves only when it runs, a glibc aio helper about to read),
 * and a number closed early can be given to a new connection at once,
 * whose bytes that request would then take or whose peer it would write
 * to.  Once every head has completed, nothing in any backend names the
 * number, whatever the backend.  The backend's release is called then, just
 * before the close (io_uring empties the handle's slot in its table of
 * registered files, which holds the file too).
 *
 * Cancellation sets TAXI__OP_CANCEL.  A failure that arrives afterwards
 * is reported as TAXI_ECANCELED (the backend's own, or EBADF from a handle
 * closed under a request not yet handed to the kernel); a success stands;
 * a transfer that made progress stops there, with TAXI_ECANCELED and the
 * bytes so far.  QUEUED ops and timers never reached a backend and
 * complete with TAXI_ECANCELED at once.
 *
 * With a kernel multishot accept (TAXI__PCAP_MULTISHOT_ACCEPT) the op
 * keeps TAXI__OP_INBACKEND while one delivery is READY or TAKEN;
 * completions arriving meanwhile wait in `backlog`, in order, and are
 * delivered one per handler call.  When TAXI__ACCEPT_BACKLOG_MAX wait
 * there, the kernel's request is cancelled (TAXI__OP_THROTTLED) and
 * submitted again once its end has been taken from the backlog, that is
 * once the handler has caught up; meanwhile connections wait in the
 * listen backlog.
 *
 * Field reuse in taxi_op_t.internal_ (the public struct has no spare room,
 * and these never overlap in time):
 *   heap_index  TIMER: position in the timer heap; QUEUED/SUBMITTED and
 *               a multishot head: the row of its handle (TAXI__NO_ROW if
 *               none);
 *   offset      TIMER: the sequence number that orders equal deadlines;
 *   file        ACCEPT, from its completion to its dispatch: the accepted
 *               handle (copied to op->accepted just before the handler
 *               runs, so a multishot handler still reading op->accepted is
 *               never overwritten under it).
 *
 * Locking: `lock` protects everything here.  It is held while calling the
 * backend's attach/detach/submit/cancel and released around its wait and
 * around completion handlers.  `stopped` and the backend counters are
 * atomics (read without the lock); internal_.state is written under the
 * lock with atomic stores so taxi_op_in_flight() may read it without one.
 */
#ifndef TAXI_CORE_PROACTOR_IMPL_H
#define TAXI_CORE_PROACTOR_IMPL_H

#include "taxi/proactor.h"
#include "backends/completion.h"
#include "core/common/backoff.h"
#include "core/common/handle_map.h"
#include "core/common/timer_heap.h"
#include "core/proactor/proactor_consts.h"
#include "core/proactor/proactor_op.h"
#include "core/reactor/reactor_impl.h"
#include "ports/port.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A FIFO of operation records linked through internal_.next. */
typedef struct taxi__opq {
  taxi_op_t *head, *tail;
} taxi__opq_t;

static inline void taxi__opq_push(taxi__opq_t *q, taxi_op_t *op) {
  op->internal_.next = NULL;
  if (q->tail)
    q->tail->internal_.next = op;
  else
    q->head = op;
  q->tail = op;
}

static inline void taxi__opq_push_front(taxi__opq_t *q, taxi_op_t *op) {
  op->internal_.next = q->head;
  q->head = op;
  if (!q->tail) q->tail = op;
}

static inline taxi_op_t *taxi__opq_pop(taxi__opq_t *q) {
  taxi_op_t *op = q->head;
  if (!op) return NULL;
  q->head = op->internal_.next;
  if (!q->head) q->tail = NULL;
  op->internal_.next = NULL;
  return op;
}

/* One direction of a handle: the submitted head and those waiting. */
typedef struct taxi__pdir {
  taxi_op_t *cur;   /* submitted (or a multishot head being delivered) */
  taxi__opq_t wait; /* not submitted yet, oldest first */
} taxi__pdir_t;

/* A row of the per-handle table. */
typedef struct taxi__prow {
  taxi_handle_t handle;
  bool used;
  bool zombie;         /* closed or detached, waiting for its heads */
  bool close_pending;  /* closed: close the descriptor with the row */
  bool made;           /* accepted or connected here, or moved from a
                          proactor where it was (the backend's adopt) */
  bool due;            /* on the loop's `due` list */
  uint32_t next_free;  /* free-list link while unused */
  uint32_t next_due;   /* `due` list link while on it */
  taxi__pdir_t dir[2]; /* [0] input, [1] output */
} taxi__prow_t;

/* A completion that arrived for a multishot accept while its previous one
 * was still READY or TAKEN (kernel multishot only); kept in order. */
typedef struct taxi__backlog {
  taxi__completion_t *items; /* a ring */
  size_t cap, head, count;
} taxi__backlog_t;
/* The entries of the backlog's first ring, made with the proactor
 * (core/proactor/proactor.c); doubled when full. */
#define TAXI__BACKLOG_FIRST 16u

typedef struct taxi__psig taxi__psig_t;

/* What taxi_proactor_destroy runs for a part made later than the
 * proactor, registered by the part when it is made (the signal catcher,
 * core/proactor/proactor_signal.c), so that destroy need not know it. */
typedef struct taxi__proactor_teardown {
  /* Stop what may still start operations on the proactor (a thread that
   * posts).  Without the lock, before the proactor drains. */
  void (*stop)(taxi_proactor_t *p);
  /* Free what is left, once nothing is in flight and the backend is
   * closed. */
  void (*release)(taxi_proactor_t *p);
} taxi__proactor_teardown_t;

/* A group of buffers of pooled reads (core/proactor/proactor_buffers.c):
 * the pool, or a group of datagram receives of one size
 * (core/proactor/proactor_groups.c). */
typedef struct taxi__pbufs {
  unsigned group;      /* the backend's group: 0 the pool */
  size_t size;         /* bytes per buffer */
  unsigned count, max; /* buffers made; the cap */
  bool native;         /* the backend chooses (buf_open said so) */
  unsigned char *chunk[TAXI__PBUF_CHUNKS]; /* ids chunk_first[i].. */
  unsigned chunk_first[TAXI__PBUF_CHUNKS];
  unsigned nchunks;
  unsigned char *held; /* [max]: 1 while the application holds it */
  unsigned nheld;
  uint32_t *free; /* [max]: free ids when the core chooses, a stack */
  unsigned nfree;
} taxi__pbufs_t;

struct taxi_proactor {
  taxi__mutex_t lock;
  const taxi__completion_ops_t *ops;
  void *backend;
  taxi__completion_counters_t counters;

  /* The per-handle table; grows only when more handles are attached at
   * once than ever before. */
  taxi__prow_t *rows;
  uint32_t nrows, rows_cap, free_head;
  taxi__handle_map_t map; /* attached handle -> row (zombies are not in it) */

  /* The completion queue: READY ops, oldest first.  Intrusive, so queuing
   * a completion never allocates. */
  taxi__opq_t ready;
  size_t ready_count;

  /* Timers: TIMER ops by (deadline, sequence); taxi__proactor_timer_ops. */
  taxi__timer_heap_t timers;
  int64_t timer_seq;

  taxi__backlog_t backlog;

  /* Operations pausing after a transient failure (TAXI__OP_PAUSED), linked
   * through internal_.next: multishot accepts out of descriptors, and
   * submissions the OS refused for now (IOCP's WSAEWOULDBLOCK: too many
   * overlapped requests).  A pause grows while the failures go on and
   * starts again from the shortest after a success (one backoff for the
   * accepts, one for the submissions).  The report of the latest pause
   * waits here for the lock to be released (taxi__proactor_wait_locked). */
  taxi__opq_t paused;
  taxi__backoff_t accept_backoff;
  taxi__backoff_t submit_backoff;
  bool pause_report;
  const char *pause_report_where; /* "accept", "submit" */
  int pause_report_code;
  taxi_handle_t pause_report_handle;
  unsigned pause_report_attempt;

  /* The follow-ons the completion layer leaves to the loop (see above):
   * rows whose head left (linked by index through next_due), and heads to
   * submit again (linked through internal_.next). */
  uint32_t due_head, due_tail;
  taxi__opq_t again;
  /* A lower layer found that waiting threads should look again (a
   * buffer freed for a pooled read waiting for one); the loop wakes them. */
  bool wake_wanted;

  /* Operations the backend owes a completion for (SUBMITTED). */
  size_t in_backend;

  /* The buffer of the proactor's own dispatch calls (one thread at a
   * time; pool threads have their own). */
  taxi__completion_t *wait_buf;
  size_t max_events;

  /* Dispatching. */
  bool has_owner; /* a thread is inside handle_events/run */
  taxi__thread_id_t owner;
  void *pool;  /* the L/F pool attached, if any */
  bool sticky; /* a pool is shutting down: waits return at once */
  bool destroying;
  bool woken;       /* a wake-up was sent since the last wait returned */
  unsigned waiters; /* threads blocked in the backend's wait */
  taxi_time_t waiters_deadline; /* the latest deadline among them */
  atomic_bool stopped;
  unsigned flags; /* TAXI_PROACTOR_* of the options */
  /* TAXI_PROACTOR_ONE_THREAD: the thread that dispatched first, the only
   * one allowed to dispatch from then on. */
  bool bound;
  taxi__thread_id_t bound_thread;
  /* taxi_proactor_backend(): the backend's name, and the reactor backend
   * it runs over if any ("emulated:poll"). */
  char name[48];
  /* The failed waits of run/handle_events (core/common/backoff.h). */
  taxi_error_fn on_error;
  void *on_error_arg;
  taxi__backoff_t wait_backoff;

  /* Signals (core/proactor/proactor_signal.c): made with the first one added.
   */
  taxi__psig_t *sig;
  bool sig_busy; /* an add or remove is under way outside the lock */
  /* Set with `sig`; NULL while there is nothing to tear down. */
  const taxi__proactor_teardown_t *teardown;

  taxi__pbufs_t *bufs; /* NULL: no pool (options.buffer_count 0) */
  /* The groups of datagram receives ([1 ..]; [0] unused), each NULL until
   * an endpoint asks for it (core/proactor/proactor_groups.c); the groups
   * the backend registered a ring for when the proactor was made (bit g),
   * and the cap of their buffers. */
  taxi__pbufs_t *dgroups[TAXI__BUF_GROUPS];
  unsigned dgroups_open;
  unsigned dgroups_max;

  taxi_proactor_stats_t stats; /* started, completed, cancelled, submissions */
};

/* ==== layer 1: proactor_table.c ======================================== */

/* Attach h (backend attach + a row).  p->lock held.  0, TAXI_EEXIST,
 * TAXI_EBADF, TAXI_ENOMEM, or the backend's error. */
int taxi__proactor_attach_locked(taxi_proactor_t *p, taxi_handle_t h);
/* h (attached) was made by this proactor: an accepted connection, a
 * socket being connected, one moved from a proactor where it was made.
 * Tells the backend once.  p->lock held. */
void taxi__proactor_adopt_locked(taxi_proactor_t *p, taxi_handle_t h);
/* Free a zombie row whose queues are empty, closing its descriptor if the
 * handle was closed.  p->lock held. */
void taxi__proactor_row_release_locked(taxi_proactor_t *p, size_t row);
/* The loop's list of rows whose head left (see above): put `row` on it
 * (once), take the oldest (TAXI__ROW_NIL when empty).  p->lock held. */
void taxi__proactor_due_push_locked(taxi_proactor_t *p, size_t row);
uint32_t taxi__proactor_due_pop_locked(taxi_proactor_t *p);

/* Timers.  p->lock held; taxi__timer_heap_reserve(&p->timers) first, so
 * that push cannot fail. */
extern const taxi__timer_heap_ops_t taxi__proactor_timer_ops;
void taxi__proactor_timer_push_locked(taxi_proactor_t *p, taxi_op_t *op);
void taxi__proactor_timer_remove_locked(taxi_proactor_t *p, taxi_op_t *op);

/* The paused list.  Put op on it for `pause` after a transient failure;
 * the report of it (`where`, `code`, `attempt`) waits for the lock to be
 * released (taxi__proactor_wait_locked).  p->lock held. */
void taxi__proactor_pause_locked(taxi_proactor_t *p, taxi_op_t *op,
                                 taxi_time_t pause, const char *where, int code,
                                 unsigned attempt);
/* A pooled read waits for a buffer: on the paused list with no deadline
 * until a release gives it one (core/proactor/proactor_buffers.c).  p->lock
 * held. */
void taxi__proactor_starve_locked(taxi_proactor_t *p, taxi_op_t *op);
/* A PAUSED op leaves the paused list (SUBMITTED again, for the caller to
 * submit or end).  p->lock held. */
void taxi__proactor_unpause_locked(taxi_proactor_t *p, taxi_op_t *op);

/* ==== layer 1: proactor_buffers.c ====================================== */

/* The pool options are valid: 0, or TAXI_EINVAL with a detail naming
 * the field of taxi_proactor_create's options. */
int taxi__pbufs_check(const taxi_proactor_options_t *o);
/* Make the pool the options ask for (none for buffer_count 0), after the
 * backend is open.  0 or TAXI_ENOMEM (then taxi__pbufs_close cleans up). */
int taxi__pbufs_open(taxi_proactor_t *p, const taxi_proactor_options_t *o);
/* Free the pool and every datagram group, once the backend is closed
 * (the kernel may point into them). */
void taxi__pbufs_close(taxi_proactor_t *p);
/* A group of buffers of `size` bytes, none made yet, up to `max` (a power
 * of two), filled by the backend's choice (native) or the core's; NULL
 * when out of memory.  taxi__pbufs_free frees it (and its buffers). */
taxi__pbufs_t *taxi__pbufs_new(unsigned group, size_t size, unsigned max,
                               bool native);
void taxi__pbufs_free(taxi__pbufs_t *b);
/* Make `count` buffers of b, free for reads: 0 or TAXI_ENOMEM.  p->lock
 * held (or p not shared yet). */
int taxi__pbufs_fill_locked(taxi_proactor_t *p, taxi__pbufs_t *b,
                            unsigned count);
/* The group op's pooled read takes its buffers from (its flags say). */
static inline taxi__pbufs_t *taxi__pbufs_of(const taxi_proactor_t *p,
                                            const taxi_op_t *op) {
  unsigned g = taxi__op_buf_group(op);
  return g == 0 ? p->bufs : p->dgroups[g];
}
/* The address of buffer `id` of b. */
void *taxi__pbufs_addr(const taxi__pbufs_t *b, unsigned id);
/* The core chooses (the pool only): take a free buffer (growing the pool
 * if it may); false when none is left.  p->lock held. */
bool taxi__pbufs_take_locked(taxi_proactor_t *p, unsigned *id);
/* Double b: 0, or TAXI_ENOMEM at the cap or out of memory. */
int taxi__pbufs_grow_locked(taxi_proactor_t *p, taxi__pbufs_t *b);
/* A buffer of b a completion filled goes to the application (inner: a
 * datagram's, released by a pointer inside it).  p->lock held. */
void taxi__pbufs_lend_locked(taxi__pbufs_t *b, unsigned id, bool inner);
/* A buffer of b a read had and did not fill goes back.  Returns true when
 * a read waiting for a buffer of b may now go on: the caller's layer sets
 * p->wake_wanted so that the loop wakes the waiting threads.  p->lock
 * held. */
bool taxi__pbufs_unused_locked(taxi_proactor_t *p, taxi__pbufs_t *b,
                               unsigned id);
/* taxi_proactor_buffer_release's work, for a buffer of any group (found
 * from its address): 0, TAXI_EINVAL (not a buffer of a group) or
 * TAXI_ENOENT (not held); *wake as for taxi__pbufs_unused_locked.
 * p->lock held. */
int taxi__pbufs_release_locked(taxi_proactor_t *p, void *data, bool *wake);

/* ==== layer 1: proactor_groups.c ======================================= */

/* After the pool is made, where the backend chooses its buffers: register
 * the groups of datagram receives with the backend (their rings only; the
 * buffers are made on first use, taxi__proactor_dgram_group).  Before the
 * proactor is shared: a one-thread ring takes registrations from any
 * thread only then. */
void taxi__pgroups_open(taxi_proactor_t *p);

/* ==== layer 2: proactor_submit.c ======================================= */

/* Give op (the head of its direction) to the backend.  0, or the code
 * the backend refused it with (TAXI__NO_BUFFER: a pooled read found no
 * buffer): then op is as before the call.  p->lock held. */
int taxi__proactor_submit_locked(taxi_proactor_t *p, taxi_op_t *op);
/* Submit op (the head of its handle's queue): a pooled read without a
 * buffer waits for one, a refusal that may pass (TAXI_EAGAIN) pauses it
 * and it is submitted again after a growing pause, up to
 * TAXI__BACKOFF_LIMIT refusals in a row; returns 0 then, or when
 * submitted.  Any other refusal, or the last, is returned for the caller
 * to complete op with.  p->lock held. */
int taxi__proactor_submit_or_pause_locked(taxi_proactor_t *p, taxi_op_t *op);

/* ==== layer 2: proactor_complete.c ===================================== */

/* Finish op with `status` (bytes in internal_.done): unlink it from its
 * handle and queue it for dispatch.  When it was its handle's head, the
 * row goes on the `due` list for the loop to submit the next (the caller
 * runs taxi__proactor_follow_ons_locked before releasing the lock).
 * p->lock held. */
void taxi__proactor_complete_locked(taxi_proactor_t *p, taxi_op_t *op,
                                    int status);
/* Process what a backend wait reported; follow-ons are queued.  p->lock
 * held. */
void taxi__proactor_process_locked(taxi_proactor_t *p,
                                   const taxi__completion_t *c);
/* After the handler of a multishot delivery: the next delivery from the
 * backlog, or the request goes on (queued on `again` where the core
 * issues it anew), or it ends.  p->lock held. */
void taxi__proactor_multishot_next_locked(taxi_proactor_t *p, taxi_op_t *op);
/* In the handler of a multishot pooled datagram receive's delivery (op
 * TAKEN): take op's next datagram from the backlog now, if one is there,
 * its buffer lent (internal_.offset its id, internal_.done the bytes the
 * backend used); false when none is, or when the next is no datagram (an
 * end, a failure: delivered after the handler, as usual).  p->lock
 * held. */
bool taxi__proactor_backlog_dgram_locked(taxi_proactor_t *p, taxi_op_t *op);

/* ==== layer 3: proactor_dispatch.c ===================================== */

/* Submit the follow-ons the completion layer queued (see above), and wake
 * the waiting threads if a lower layer asked for it.  Every caller of the
 * completion layer runs it before releasing the lock.  p->lock held. */
void taxi__proactor_follow_ons_locked(taxi_proactor_t *p);
/* Wake the waiting threads if something is ready for them or the earliest
 * deadline moved before the one they wait for.  p->lock held. */
void taxi__proactor_kick_locked(taxi_proactor_t *p);

/* The dispatch steps (see core/pools/dispatch_source.h).  p->lock held. */
bool taxi__proactor_take_locked(taxi_proactor_t *p, taxi_time_t now,
                                taxi__event_t *ev);
bool taxi__proactor_run_locked(taxi_proactor_t *p, taxi__event_t *ev);
/* The next datagram of the multishot pooled receive op whose delivery the
 * calling thread's handler is running, taken now if the backend reported
 * it already (taxi__proactor_backlog_dgram_locked): op's data, peer and
 * msg_flags describe it, *bytes its length, as at a delivery; false when
 * none was taken.  p->lock held. */
bool taxi__proactor_next_dgram_locked(taxi_proactor_t *p, taxi_op_t *op,
                                      size_t *bytes);
void taxi__proactor_untake_locked(taxi_proactor_t *p, taxi__event_t *ev);
int taxi__proactor_wait_locked(taxi_proactor_t *p, taxi__completion_t *buf,
                               size_t cap, taxi_time_t deadline,
                               taxi_time_t *now);
bool taxi__proactor_has_work_locked(const taxi_proactor_t *p, taxi_time_t now);

/* Whether the calling thread is running a completion handler of p. */
bool taxi__proactor_in_handler(const taxi_proactor_t *p);

/* destroy: complete everything with TAXI_ECANCELED and run the handlers in
 * this thread.  p->lock held. */
void taxi__proactor_drain_locked(taxi_proactor_t *p);

/* ==== layer 4: proactor.c ============================================== */

/* Cancel everything on h and forget it (close: also close it, once no
 * operation of the backend can name it any more).  p->lock held.  0 or
 * TAXI_ENOENT. */
int taxi__proactor_forget_locked(taxi_proactor_t *p, taxi_handle_t h,
                                 bool close_it);

#endif /* TAXI_CORE_PROACTOR_IMPL_H */
