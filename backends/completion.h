/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/completion.h - the table a completion backend fills in.
 *
 * A completion backend wraps one OS mechanism that performs operations and
 * reports their completion (io_uring, POSIX aio, IOCP), or emulates one over
 * a readiness mechanism.  Like a readiness backend it only translates: it
 * starts what the core asks, and its wait reports {op, result}; it never
 * calls a completion handler.  The core (core/proactor*.c) owns everything
 * else: validating calls, per-handle ordering (only the oldest operation of
 * each handle and direction is ever submitted), resuming partial transfers
 * (an exact read, a write of every byte, the parts of a transmit-file),
 * timers, posts, cancellation bookkeeping and dispatch.
 *
 * What one submission does.  submit() starts ONE step of the operation's
 * remainder, as described by its record (taxi__op_* helpers in
 * core/proactor/proactor_op.h compute it):
 *   ACCEPT         accept one connection; result = the new handle
 *                  (non-blocking, close-on-exec), peer address stored in
 *                  op->peer / op->peer_len by the backend;
 *   CONNECT        connect op->handle to internal_.addr; result 0;
 *   READ           receive into the remaining buffer; result = bytes,
 *                  0 at end of stream;
 *   WRITE          send (gathering) the remaining buffers; result = bytes;
 *   READ_FILE      pread the remaining buffer at offset + done;
 *   WRITE_FILE     pwrite the remaining buffer at offset + done;
 *   TRANSMIT_FILE  send the next part of header / file range / trailer
 *                  (a backend may send several parts in one step and report
 *                  their sum);
 * A result that transfers less than the remainder is normal: the core
 * submits the rest.  Errors are negative TAXI_E* codes (mapped with
 * taxi__error_from_os()).  TIMER and POST never reach a backend.
 *
 * Thread contract:
 *  - attach/detach/submit/cancel are serialised by the caller (the
 *    proactor's lock is held) and never run concurrently with each other.
 *  - wait runs WITHOUT that lock, so it may run concurrently with them; a
 *    backend keeps its own state consistent (its own lock where needed).
 *  - Only backends with TAXI__PCAP_MULTI_WAIT are waited on by several
 *    threads at once.
 *  - wake may be called from any thread, with or without the lock, and
 *    from a signal handler (taxi_proactor_stop): it takes no lock and
 *    allocates nothing.
 *  - Every submitted operation yields exactly one completion from wait
 *    (a multishot accept yields several, all but the last flagged MORE),
 *    whether it succeeded, failed or was cancelled; the core relies on it
 *    to complete each operation exactly once.  After detach(h) returns,
 *    the completions of operations on h may still arrive from wait, but
 *    the backend no longer touches h.
 */
#ifndef TAXI_BACKENDS_COMPLETION_H
#define TAXI_BACKENDS_COMPLETION_H

#include "taxi/error.h"
#include "taxi/proactor.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Capabilities. */
/* Several threads may wait at once (the L/F pool may run many leaders). */
#define TAXI__PCAP_MULTI_WAIT 0x1u
/* submit() honours TAXI_ACCEPT_MULTISHOT itself (else the core re-submits
 * a multishot accept after each connection). */
#define TAXI__PCAP_MULTISHOT_ACCEPT 0x2u
/* A handle attached here cannot be attached to another instance after
 * detach (IOCP: a handle stays associated with its completion port until
 * it is closed), so taxi_proactor_move() refuses it (TAXI_ENOTSUP). */
#define TAXI__PCAP_NO_MOVE 0x4u

/* One completion, as a wait reports it. */
typedef struct taxi__completion {
  taxi_op_t *op;  /* NULL: a wake-up, or anything else to ignore */
  int64_t result; /* >= 0: bytes (ACCEPT: the new handle); < 0: TAXI_E* */
  unsigned flags; /* TAXI__CQ_* */
} taxi__completion_t;

/* The operation stays in flight: more completions follow (multishot). */
#define TAXI__CQ_MORE 0x1u
/* A pooled read the backend chose the buffer for (TAXI__READ_SELECT): the
 * bytes are in the buffer whose id is flags >> TAXI__CQ_BUF_SHIFT. */
#define TAXI__CQ_BUFFER 0x2u
/* A pooled read the backend ended because no buffer was left to choose
 * (result TAXI_ENOMEM): the core waits for one, or grows the pool. */
#define TAXI__CQ_NOBUFS 0x4u
#define TAXI__CQ_BUF_SHIFT 16
/* Groups of provided buffers a backend may be asked for (buf_open). */
#define TAXI__BUF_GROUPS 3u

/* Counters a backend keeps (the core reports them in taxi_proactor_stats);
 * relaxed atomics, since wait runs without the proactor's lock. */
typedef struct taxi__completion_counters {
  atomic_uint_fast64_t syscalls; /* every system call made for the ops */
  atomic_uint_fast64_t waits;    /* of which waits for completions */
  /* io_uring only (0 elsewhere): */
  atomic_uint_fast64_t enters; /* io_uring_enter calls */
  atomic_uint_fast64_t sqes;   /* submission entries the kernel took */
  atomic_uint_fast64_t cqes;   /* completion entries reaped */
  /* Registered files (io_uring only): handles in a slot of the ring's
   * table now, and handles that stayed on their fd (the table full, an
   * install the kernel refused). */
  atomic_uint_fast64_t files_registered;
  atomic_uint_fast64_t files_failed;
} taxi__completion_counters_t;

typedef struct taxi__completion_ops {
  const char *name;
  unsigned caps; /* TAXI__PCAP_* */

  /* Create an instance in *state.  `variant` is what followed "name:" in
   * the name asked for (NULL if nothing), e.g. the reactor backend of the
   * emulated proactor.  TAXI_ENOTSUP / TAXI_EPERM when the mechanism does
   * not work here (the automatic choice then tries the next), TAXI_ENOMEM,
   * TAXI_ENOBACKEND for an unknown variant.  `counters` outlives the
   * instance. */
  int (*open)(void **state, const char *variant,
              const taxi_proactor_options_t *opts,
              taxi__completion_counters_t *counters);
  /* Optional: the readiness backend of the reactor the instance runs over
   * ("poll" for "emulated:poll"), or NULL; the proactor's name is then
   * "name:that" (taxi_proactor_backend). */
  const char *(*reactor_backend)(void *state);
  /* Release the instance.  The core has completed every operation first
   * (cancel + drained waits); close must not block on the OS for long. */
  void (*close)(void *state);

  /* Prepare h for operations (IOCP association, making a socket
   * non-blocking, registering with an internal reactor...).  Errors:
   * TAXI_EBADF, TAXI_ENOTSUP, TAXI_ENOMEM. */
  int (*attach)(void *state, taxi_handle_t h);
  /* Forget h; called after the core cancelled its operations (their
   * completions may still be on their way). */
  void (*detach)(void *state, taxi_handle_t h);
  /* Optional: the attached h was made by the proactor - a connection its
   * accept made, a socket connected through it (before the connect is
   * submitted), or one moved from a proactor where it was either - and not
   * merely handed over by the application.  (io_uring gives such handles
   * a slot in its table of registered files; the application's own stay
   * on their descriptors.)  Called with the proactor's lock held. */
  void (*adopt)(void *state, taxi_handle_t h);
  /* Optional: an attachment of h is over for good - detached or closed
   * (then called just before the core closes it), and every operation on
   * it has completed, so nothing the backend holds names it any more.
   * Called once per successful attach, with the proactor's lock held.
   * (io_uring empties the slot of its table of registered files here.) */
  void (*release)(void *state, taxi_handle_t h);

  /* Start one step of op (see above).  0, or a TAXI_E* code if it could not
   * be started at all (the core then completes op with that code). */
  int (*submit)(void *state, taxi_op_t *op);
  /* Ask the submitted op to finish early; its completion still arrives
   * from wait, with TAXI_ECANCELED or whatever result won the race.  0, or
   * TAXI_ENOENT when the backend has already reported its completion. */
  int (*cancel)(void *state, taxi_op_t *op);

  /* Wait up to timeout_ms (-1: no limit, 0: poll) for completions and
   * store at most `max` in out.  Returns how many (0 on timeout, on a
   * wake-up or an interruption), or a negative TAXI_E* code. */
  int (*wait)(void *state, taxi__completion_t *out, size_t max, int timeout_ms);
  /* Make a wait in progress (or the next one) return soon.  With
   * TAXI__PCAP_MULTI_WAIT, `all` asks that every waiter return.  Any
   * thread; never blocks. */
  void (*wake)(void *state, int all);
  /* Optional: provided buffers, in groups 0 .. TAXI__BUF_GROUPS - 1
   * (group 0 the proactor's pool, the others the sizes of datagram
   * receives: core/proactor/proactor_groups.c).  buf_open, called once a
   * group when the proactor is made, with up to `max` buffers (ids
   * 0..max-1) of `size` bytes, returns 0 when the backend will choose a
   * buffer of the group for each pooled read itself (TAXI__READ_SELECT,
   * the group in the op's flags: taxi__op_buf_group; completions flagged
   * TAXI__CQ_BUFFER name a buffer of that group), or TAXI_ENOTSUP when
   * the core must choose (group 0: a plain READ into it; another: the
   * group is not made).  buf_give hands it buffer `id` of `group` at
   * `addr`, free for choosing (each buffer once, until a completion names
   * it).  Serialised like submit (the proactor's lock held). */
  int (*buf_open)(void *state, unsigned group, unsigned max, size_t size);
  void (*buf_give)(void *state, unsigned group, unsigned id, void *addr);
  /* Optional with buf_open: a pooled RECVFROM the backend chose the
   * buffer for (TAXI__READ_SELECT) keeps its datagram in a layout of the
   * backend's (io_uring's multishot receive: a header, the sender's
   * address, the payload).  Called when it is delivered: the `used`
   * bytes the completion filled at buf; stores where the datagram starts
   * in buf and its length, and fills op->peer, op->peer_len and
   * op->msg_flags.  0, or TAXI_ESYS when the layout does not hold.
   * The proactor's lock held; touches nothing of the backend's. */
  int (*dgram_unpack)(void *state, taxi_op_t *op, const unsigned char *buf,
                      size_t used, size_t *offset, size_t *len);
  /* Optional: the TAXI_PFEAT_* the instance uses (taxi/proactor.h),
   * TAXI_PFEAT_ONE_THREAD aside (the core adds it).  Any thread. */
  unsigned (*features)(void *state);
} taxi__completion_ops_t;

/* For a backend that completes over readiness with a reactor of its own:
 * the reactor's taxi_reactor_handle_events() then returns a failed wait
 * at once, for the backend's wait to return; the proactor, or the pool
 * dispatching it, backs off and reports (core/reactor/reactor_run.c). */
struct taxi_reactor;
void taxi__reactor_pass_wait_errors(struct taxi_reactor *r);

#endif /* TAXI_BACKENDS_COMPLETION_H */
