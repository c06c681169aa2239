/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/proactor.h - the Proactor: asynchronous operations whose completion
 * handlers are dispatched by one thread or by a Leader/Followers pool.
 *
 * The application (the proactive initiator) starts an asynchronous
 * operation - accept, connect, read, write, file read/write at an offset,
 * transmit-file, a datagram's receive or send, a timer - giving a caller-owned
 * operation record, a completion handler and an asynchronous completion token
 * (ACT).  The operation runs without borrowing the caller's thread.  When it is
 * done, the completion dispatcher (taxi_proactor_handle_events() in one thread,
 * or an L/F pool made by taxi_lf_create_proactor()) calls the handler with
 * the status, the bytes transferred and the ACT.
 *
 * Operation records.  A taxi_op_t is like an OVERLAPPED: the caller owns it,
 * it must stay valid and untouched while the operation is in flight (from
 * the call that starts it until its completion handler is called), and it
 * is reused for the next operation: taxi never allocates per operation.  A
 * record must be zeroed (TAXI_OP_INIT, or taxi_op_init()) before its first
 * use.  When its handler runs, the record is idle again, so the handler may
 * start the next operation with it.  Starting an operation with a record
 * that is still in flight is refused with TAXI_EBUSY and changes nothing.
 *
 * Buffers passed to an operation are the caller's and must stay valid until
 * its completion; the array of taxi_buf_t describing them is copied.
 *
 * Handles.  A handle is attached to the proactor before operations are
 * started on it (taxi_proactor_attach(); connections made by an accept are
 * attached already).  Per handle and per direction (input: accept, read,
 * file read, datagram receive; output: connect, write, file write,
 * transmit-file, datagram send) operations
 * complete in the order they were started.  taxi_proactor_close() completes
 * every operation still pending on the handle with TAXI_ECANCELED, exactly
 * once each, and closes it.
 *
 * Completion status: 0 on success, else a negative TAXI_E* code; `bytes`
 * counts what was transferred even when the status is an error (an exact
 * read cut short by the peer reports TAXI_EEOF and the bytes it got).
 *
 * Threads.  Every function may be called from any thread and from inside a
 * completion handler unless its comment says otherwise.
 */
#ifndef TAXI_PROACTOR_H
#define TAXI_PROACTOR_H

#include "platform.h"
#include "lf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_proactor taxi_proactor_t; /* a proactor */
typedef struct taxi_op taxi_op_t;             /* an operation record */

/* A buffer: the same layout as struct iovec on POSIX systems. */
typedef struct taxi_buf {
  void *base; /* first byte */
  size_t len; /* bytes */
} taxi_buf_t;

/* The most buffers one gathering write takes. */
#define TAXI_OP_MAX_BUFS 8

/*
 * A completion handler.  `status` is 0 or a negative TAXI_E* code, `bytes`
 * what was transferred, `act` the token given when the operation started.
 * Runs in the thread that dispatches the proactor.  The record is idle when
 * it is called (unless op->more is set: a multishot accept still in flight).
 */
typedef void (*taxi_completion_fn)(taxi_op_t *op, int status, size_t bytes,
                                   void *act);

/* What an operation record was last used for. */
typedef enum taxi_op_kind {
  TAXI_OP_NONE = 0,
  TAXI_OP_ACCEPT,
  TAXI_OP_CONNECT,
  TAXI_OP_READ,
  TAXI_OP_WRITE,
  TAXI_OP_READ_FILE,
  TAXI_OP_WRITE_FILE,
  TAXI_OP_TRANSMIT_FILE,
  TAXI_OP_TIMER,
  TAXI_OP_POST,
  TAXI_OP_RECVFROM, /* taxi_proactor_recvfrom: one datagram in */
  TAXI_OP_SENDTO    /* taxi_proactor_sendto: one datagram out */
} taxi_op_kind_t;

/* Flags for taxi_proactor_read(). */
/* Complete only when `len` bytes have arrived (or on error/EOF); without it
 * the read completes with whatever arrived first (at least one byte). */
#define TAXI_READ_EXACT 0x1u

/* Flags for taxi_proactor_read_pooled(). */
/* Keep reading: the handler is called once per arrival of bytes, each in
 * a buffer of its own, with op->more set, until end of stream
 * (TAXI_EEOF), an error, taxi_proactor_cancel() or taxi_proactor_close()
 * ends it (that last call has op->more clear and no buffer).  io_uring
 * does this with one multishot receive where the kernel has it (6.0);
 * elsewhere taxi reads again after each handler.  Arrivals faster than the
 * handler wait for it, in order, as a multishot accept's connections do. */
#define TAXI_READ_MULTISHOT 0x2u

/* Flags for taxi_proactor_accept(). */
/* Keep accepting: the handler is called once per connection with op->more
 * set, until an error, taxi_proactor_cancel() or taxi_proactor_close() ends
 * it (that last completion has op->more clear).  io_uring does this with
 * one multishot request where the kernel has it; elsewhere taxi re-issues
 * the accept after each connection.
 * Out of descriptors (EMFILE, ENFILE: TAXI_ETOOMANY) or of memory for a
 * connection (TAXI_ENOMEM), a multishot accept neither ends nor retries at
 * once (it would fail again, and spin): it stops accepting for a pause of
 * 1 ms, doubled while accepting keeps failing, up to 256 ms, reports each
 * pause through the error callback (where "accept", the listener's handle,
 * not fatal) and counts it (taxi_proactor_stats_t.accept_pauses), then
 * accepts again by itself.  Meanwhile connections wait in the listen
 * backlog.  A single accept completes with the error instead
 * (TAXI_ETOOMANY), and the application decides when to try again.
 * Connections accepted faster than the handler runs wait for it, in
 * order, up to 64 (of all multishot accepts of the proactor): then the
 * kernel stops accepting (taxi_proactor_stats_t.accept_throttles) until
 * the handler has caught up, and further connections wait in the listen
 * backlog, which pushes back on clients. */
#define TAXI_ACCEPT_MULTISHOT 0x1u

/* Flags of a received datagram (taxi_op_t.msg_flags). */
/* The datagram was longer than the buffer: `bytes` of it are there, the
 * rest is lost (never silently: this flag says so). */
#define TAXI_MSG_TRUNCATED 0x1u

/* Room in each record for the backend's own per-operation state (an
 * aiocb, an OVERLAPPED with AcceptEx's address buffer, ...). */
#define TAXI_OP_BACKEND_SIZE 384

/*
 * The operation record.  The fields above `internal_` are written by taxi
 * before the completion handler is called and may be read there; the
 * application never writes any field except through taxi_op_init().
 */
struct taxi_op {
  taxi_op_kind_t kind;  /* the operation that completed */
  taxi_handle_t handle; /* the handle it was started on */
  /* TAXI_OP_ACCEPT: the new connection (non-blocking, attached to the
   * proactor, the application's to close with taxi_proactor_close()), and
   * the peer's address as a struct sockaddr of peer_len bytes. */
  taxi_handle_t accepted;
  unsigned peer_len;       /* bytes of peer */
  unsigned char peer[128]; /* the peer's struct sockaddr */
  /* 1 when this completion is one of several of a multishot accept or
   * read and the record stays in flight. */
  int more;
  /* TAXI_OP_READ started by taxi_proactor_read_pooled(), status 0: the
   * bytes (the handler's `bytes` of them), in a buffer of the proactor's
   * pool that the application now holds and hands back with
   * taxi_proactor_buffer_release().  NULL otherwise. */
  void *data;
  /* TAXI_OP_RECVFROM: TAXI_MSG_* flags of the datagram received (0
   * otherwise). */
  unsigned msg_flags;

  /* Private to taxi: the state of the operation while in flight. */
  struct {
    taxi_proactor_t *proactor;
    taxi_op_t *next; /* queue link (per handle, completions, ...) */
    taxi_completion_fn fn;
    void *act;
    unsigned state; /* TAXI__OP_* in core/proactor/proactor_consts.h */
    unsigned flags; /* what the call asked for */
    unsigned dir;   /* per-handle queue: 0 none, 1 input, 2 output */
    int status;     /* result, once known */
    taxi_buf_t bufs[TAXI_OP_MAX_BUFS + 2]; /* transmit: header, trailer */
    unsigned nbufs;
    size_t total;         /* bytes the operation transfers when complete */
    size_t done;          /* bytes transferred so far */
    taxi_handle_t file;   /* file read/write/transmit */
    int64_t offset;       /* file offset of the first byte */
    size_t file_len;      /* transmit: bytes of the file range */
    taxi_time_t deadline; /* timer */
    size_t heap_index;    /* timer */
    uint32_t addr_len;    /* connect: the address, copied */
    unsigned char addr[128];
    union {
      long double ld_;
      void *p_;
      int64_t i_;
      unsigned char bytes[TAXI_OP_BACKEND_SIZE];
    } backend;
  } internal_;
};

/* A zeroed record, ready for its first use (the forms no compiler warns
 * about as a partial initialiser). */
#ifdef __cplusplus
#define TAXI_OP_INIT \
  {}
#else
#define TAXI_OP_INIT \
  { 0 }
#endif

/* taxi_op_init - zero a record before its first use.  Never on a record
 * in flight.  Threads: the owner's. */
TAXI_EXTERN void taxi_op_init(taxi_op_t *op);

/* taxi_op_proactor - the proactor the record was last used with, or NULL. */
TAXI_EXTERN taxi_proactor_t *taxi_op_proactor(const taxi_op_t *op);

/* taxi_op_in_flight - 1 while an operation started with the record has not
 * yet been completed (its handler not yet called, or a multishot accept
 * not yet ended), else 0. */
TAXI_EXTERN int taxi_op_in_flight(const taxi_op_t *op);

/* ---- creating a proactor ------------------------------------------------ */

/* Options for taxi_proactor_create(): start from
 * TAXI_PROACTOR_OPTIONS_INIT or taxi_proactor_options_init(), then set
 * what differs. */
typedef struct taxi_proactor_options {
  /* sizeof(taxi_proactor_options_t) as the program was compiled, set by
   * the initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  /* "uring", "aio", "emulated", "emulated:<reactor backend>", "iocp", or
   * NULL: TAXI_PROACTOR in the environment, else the best that works. */
  const char *backend;
  /* Submission queue entries for io_uring (rounded up to a power of two);
   * 0: 256.  The completion queue has four times as many, and at least
   * 32768, so that the completions of many multishot reads fit at once
   * (fewer where the kernel cannot lock the memory). */
  unsigned queue_depth;
  /* Told of every failure of a wait made by taxi_proactor_run() or
   * taxi_proactor_handle_events() (see taxi_error_report_t): transient
   * ones (ENOMEM, EAGAIN), retried after a growing pause, and the one that
   * ends the call, reported fatal.  NULL: nobody is told (the counter
   * still counts).  Under a Leader/Followers pool the pool's callback is
   * told of its waits instead.  Also told of the pauses of a multishot
   * accept (see TAXI_ACCEPT_MULTISHOT), by any dispatching thread.  Called
   * in the dispatching thread, no lock held. */
  taxi_error_fn on_error;
  void *on_error_arg; /* passed to on_error */
  /* TAXI_PROACTOR_* below, or 0. */
  unsigned flags;
  /* The buffer pool of taxi_proactor_read_pooled(): buffer_count buffers
   * of buffer_size bytes (0: 4096; at most 1 MiB) made with the proactor,
   * a power of two up to 32768 (0: no pool, and pooled reads are
   * refused; buffer_size or buffer_max set without it is TAXI_EINVAL);
   * when reads find none free, the pool doubles, up to
   * buffer_max (a power of two, at least buffer_count; 0: buffer_count,
   * no growth), and beyond that a read waits for a buffer to be released.
   * On io_uring (Linux 6.0) the pool is a ring of provided buffers
   * registered with the kernel (io_uring_register_buf_ring), from which
   * the kernel picks one per arrival.  There the proactor also registers,
   * empty, two rings sized for the datagram endpoints of taxi/dgram.h
   * whose receive buffers the pool's do not hold (up to 16 KiB and up to
   * 64 KiB); the buffers of one are made when the first such endpoint
   * opens on the proactor, 8 to start with, doubled while its receives
   * find none free, up to 2048 and 512 buffers (about 32 MiB each), and
   * freed with the proactor. */
  size_t buffer_size;
  unsigned buffer_count; /* buffers made with the proactor (see above) */
  unsigned buffer_max;   /* the most the pool grows to (see above) */
} taxi_proactor_options_t;

/* taxi_proactor_options_t.flags */
/* One thread only ever dispatches the proactor (taxi_proactor_run,
 * taxi_proactor_handle_events): the first that does; any thread may still
 * start, cancel and close operations.  io_uring then gives the ring to that
 * thread (IORING_SETUP_SINGLE_ISSUER with DEFER_TASKRUN, or COOP_TASKRUN
 * where the kernel lacks it: see taxi_proactor_features), which spares the
 * kernel the work of interrupting a thread for each completion; an
 * operation started by another thread reaches the ring through that
 * thread, woken for it.  A second dispatching thread is refused with
 * TAXI_EBUSY, and so is a Leader/Followers pool (taxi_lf_create_proactor).
 * Ignored by the other backends, beyond those two refusals.  Destroy it
 * in that thread, or once that thread has exited: only that thread can
 * cancel what its ring still holds (a destroy elsewhere while it lives
 * backs off for about 2 s, reports the failure to on_error and gives up).
 * One ring per thread for several threads: taxi/proactor_group.h. */
#define TAXI_PROACTOR_ONE_THREAD 0x1u
/* With TAXI_PROACTOR_ONE_THREAD: do without IORING_SETUP_DEFER_TASKRUN
 * and SINGLE_ISSUER, as on a kernel before 6.1 (tests the fallback). */
#define TAXI_PROACTOR_NO_DEFER_TASKRUN 0x2u

/* io_uring: every handle stays on its plain descriptor, as on a kernel
 * where the ring has no table of registered files (tests and the
 * benchmark compare with it; see TAXI_PFEAT_REGISTERED_FILES). */
#define TAXI_PROACTOR_NO_REGISTERED_FILES 0x4u

/* taxi_proactor_options_init - the defaults (every field 0 or NULL, size
 * set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_proactor_options_init(taxi_proactor_options_t *o);

/* TAXI_PROACTOR_OPTIONS_INIT - an initialiser with the defaults. */
TAXI__OPTIONS_DEFAULT(taxi_proactor_options_t, taxi_proactor_options_init)
#define TAXI_PROACTOR_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_proactor_options_t, taxi_proactor_options_init)

/*
 * taxi_proactor_create - make a proactor with the options `opts` (NULL:
 * all defaults), over the completion backend opts->backend names (NULL:
 * automatic).  The automatic choice tries each compiled-in backend in
 * order of preference (uring, iocp, aio, emulated) and takes the first
 * that opens: io_uring refused by the kernel (ENOSYS, or EPERM under a
 * seccomp policy or kernel.io_uring_disabled) falls back to the next.
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL out; opts->size not set
 * by an initialiser, or naming unknown fields with non-zero values),
 * TAXI_ENOBACKEND (unknown name, or none works), TAXI_ENOTSUP / TAXI_EPERM
 * (the named backend exists but this system refuses it;
 * taxi_last_os_error() tells why), TAXI_ENOMEM.  Ownership: the caller's,
 * until taxi_proactor_destroy(); of opts only the callback and its
 * argument are kept.  Threads: any.
 */
TAXI_EXTERN int taxi_proactor_create(taxi_proactor_t **out,
                                     const taxi_proactor_options_t *opts);

/*
 * taxi_proactor_destroy - complete every operation still in flight with
 * TAXI_ECANCELED (their handlers run in the calling thread, before this
 * returns), close the handles still attached, and free the proactor.
 * Returns 0, TAXI_EINVAL (NULL), TAXI_EBUSY (a thread is dispatching it, a
 * pool is attached, or called from a completion handler).
 */
TAXI_EXTERN int taxi_proactor_destroy(taxi_proactor_t *p);

/* taxi_proactor_backend - the name of the backend in use, in full:
 * "uring", "iocp", or for a backend over a reactor, with the reactor's
 * backend ("emulated:poll", "aio:epoll").  The proactor's storage, valid
 * until it is destroyed; NULL for NULL.  Threads: any. */
TAXI_EXTERN const char *taxi_proactor_backend(const taxi_proactor_t *p);

/* What the backend in use does natively (taxi_proactor_features). */
#define TAXI_PFEAT_MULTISHOT_ACCEPT 0x01u /* one request accepts many */
#define TAXI_PFEAT_SUBMIT_ALL 0x02u    /* io_uring: IORING_SETUP_SUBMIT_ALL */
#define TAXI_PFEAT_SINGLE_ISSUER 0x04u /* io_uring: SINGLE_ISSUER */
#define TAXI_PFEAT_DEFER_TASKRUN 0x08u /* io_uring: DEFER_TASKRUN */
#define TAXI_PFEAT_COOP_TASKRUN 0x10u  /* io_uring: COOP_TASKRUN */
#define TAXI_PFEAT_ONE_THREAD 0x20u    /* TAXI_PROACTOR_ONE_THREAD in force */
/* io_uring: pooled reads are multishot receives into a registered ring of
 * provided buffers (else taxi picks the buffer and reads into it). */
#define TAXI_PFEAT_PROVIDED_BUFFERS 0x40u
/* io_uring: the ring has a table of registered files.  Each handle the
 * proactor made (a connection its accept made, a socket connected with
 * taxi_proactor_connect, or one moved from a proactor where it was either)
 * gets a slot of it when its first operation starts, and its requests
 * name the slot, which spares the kernel looking the descriptor up and
 * taking a reference to its file for each request.  Handles the
 * application only attaches (listeners, its own sockets, files) stay on
 * their descriptors.  A handle that finds the table full stays on its
 * descriptor, which works the same
 * (taxi_proactor_stats_t.registered_handles, register_failures).  Off
 * with TAXI_PROACTOR_NO_REGISTERED_FILES.  Nothing changes for the
 * application: the handle is still its descriptor, and taxi_proactor_close
 * and detach still give it back or close it once nothing names it. */
#define TAXI_PFEAT_REGISTERED_FILES 0x80u

/* taxi_proactor_features - which of the TAXI_PFEAT_* above the proactor
 * uses, detected when it was created (a kernel without one falls back to
 * what it has).  Stored in *out; 0, or TAXI_EINVAL (NULL).  Any thread. */
TAXI_EXTERN int taxi_proactor_features(const taxi_proactor_t *p, unsigned *out);

/*
 * taxi_proactor_backend_names - fill `names` with the names of the
 * compiled-in completion backends, best first, at most `cap` of them
 * (static strings), as taxi_backend_names() does for reactors.
 *
 * Returns how many there are (which may exceed `cap`: only the first `cap`
 * are stored; call again with more room), or TAXI_EINVAL if names is NULL
 * while cap > 0.
 * Threads: any.
 */
TAXI_EXTERN int taxi_proactor_backend_names(const char **names, size_t cap);

/* ---- handles ------------------------------------------------------------ */

/*
 * taxi_proactor_attach - make `h` (a socket, or a regular file for the file
 * operations) usable for operations on p: sockets are made non-blocking,
 * Windows associates the handle with the completion port.
 * Returns 0, TAXI_EINVAL (NULL p or invalid handle), TAXI_EBADF (not open),
 * TAXI_EEXIST (attached already), TAXI_ENOMEM.  The handle stays the
 * caller's; taxi_proactor_close() closes it.
 */
TAXI_EXTERN int taxi_proactor_attach(taxi_proactor_t *p, taxi_handle_t h);

/*
 * taxi_proactor_close - complete every operation pending on `h` with
 * TAXI_ECANCELED (an operation the OS finished meanwhile completes with its
 * own result instead; either way exactly once), forget the handle, and
 * close it.  The completions are dispatched like any other, not run inside
 * this call.  The descriptor is closed at once when no operation on it had
 * reached the OS, else when the last of those has completed (before its
 * handler runs): until then a request may still name its number, and a
 * new connection given that number would receive or send that request's
 * bytes.  Returns 0, TAXI_EINVAL (NULL), TAXI_ENOENT (not attached).
 */
TAXI_EXTERN int taxi_proactor_close(taxi_proactor_t *p, taxi_handle_t h);

/* taxi_proactor_detach - as taxi_proactor_close(), but the handle is left
 * open and given back to the caller.  (On Windows it stays associated with
 * the completion port: the OS cannot undo that.)  The caller should not
 * close it before the handlers of its cancelled operations have run, for
 * the reason given above. */
TAXI_EXTERN int taxi_proactor_detach(taxi_proactor_t *p, taxi_handle_t h);

/*
 * taxi_proactor_move - hand the attached handle `h` from proactor `from` to
 * proactor `to` (attached there, forgotten here), so that its later
 * operations run where `to` dispatches: how a group spreads connections
 * over its threads' rings (taxi/proactor_group.h).  Only a handle with no
 * operation in flight on `from` moves.  Returns 0, TAXI_EINVAL (NULL, or
 * from == to), TAXI_ENOENT (not attached to `from`), TAXI_EBUSY (an
 * operation on it is in flight), TAXI_EEXIST (attached to `to` already),
 * TAXI_ENOMEM, TAXI_ESTOPPED (either is being destroyed), TAXI_ENOTSUP
 * (IOCP: a handle stays bound to its completion port until it is closed);
 * on error the handle stays where it was.  Any thread, from a completion
 * handler of either proactor too.
 */
TAXI_EXTERN int taxi_proactor_move(taxi_proactor_t *from, taxi_handle_t h,
                                   taxi_proactor_t *to);

/* ---- starting operations ------------------------------------------------ */

/*
 * taxi_proactor_read_pooled - read from socket `h` into a buffer of the
 * proactor's pool (see taxi_proactor_options_t.buffer_count) instead of
 * one of the caller's: the handler finds the bytes at op->data and gives
 * the buffer back with taxi_proactor_buffer_release() when done with it
 * (in the handler, or later from any thread).  Flags: TAXI_READ_MULTISHOT.
 * End of stream completes with TAXI_EEOF and no buffer.  Errors besides
 * those listed below: TAXI_EINVAL when the proactor has no pool; TAXI_EBUSY
 * when a multishot read is in flight on `h` already (a later read on it
 * could never run).  Threads: any.
 */
TAXI_EXTERN int taxi_proactor_read_pooled(taxi_proactor_t *p, taxi_op_t *op,
                                          taxi_handle_t h, unsigned flags,
                                          taxi_completion_fn fn, void *act);

/*
 * taxi_proactor_recvfrom_pooled - receive datagrams on socket `h` into
 * buffers of the proactor's pool, as taxi_proactor_read_pooled reads:
 * each datagram is at op->data (the handler's `bytes` of it, 0 for an
 * empty one), in a buffer the handler gives back with
 * taxi_proactor_buffer_release(p, op->data); its sender is op->peer /
 * op->peer_len, and op->msg_flags has TAXI_MSG_TRUNCATED when it was
 * longer than the room a buffer has for it.  Flags: TAXI_READ_MULTISHOT
 * (one datagram per handler call with op->more set, until an error, a
 * cancel or a close ends it; an ICMP error of a connected socket ends it
 * with TAXI_ECONNREFUSED).  io_uring (Linux 6.0) receives with one
 * multishot IORING_OP_RECVMSG into its ring of provided buffers, where
 * each buffer also holds the kernel's header and the sender's address:
 * a datagram has TAXI_PROACTOR_DGRAM_ROOM less than buffer_size there.
 * Elsewhere taxi picks a buffer and receives into it (the whole buffer),
 * one datagram at a time.  Errors besides the common ones: TAXI_EINVAL
 * when the proactor has no pool; TAXI_EBUSY when a multishot read or
 * receive is in flight on `h` already.  Threads: any.
 */
TAXI_EXTERN int taxi_proactor_recvfrom_pooled(taxi_proactor_t *p, taxi_op_t *op,
                                              taxi_handle_t h, unsigned flags,
                                              taxi_completion_fn fn, void *act);

/* Bytes of a pool buffer that a pooled datagram receive may not fill with
 * the datagram (io_uring's header of a multishot receive, 16 bytes, and
 * room for the sender's address, 128): the most a datagram gets there is
 * buffer_size less this. */
#define TAXI_PROACTOR_DGRAM_ROOM 144u

/*
 * taxi_proactor_buffer_release - give back the buffer `data` a pooled read
 * or datagram receive delivered (op->data: the start of a buffer for a
 * read, a place inside one for a datagram), for another read to use.
 * Returns 0, TAXI_EINVAL (NULL, or not the op->data of a buffer of p's
 * pool or of its datagram endpoints' groups, which this finds from the
 * address), TAXI_ENOENT (not held by the application: released already).
 * Any thread; allocates nothing.  Buffers still held when the proactor is
 * destroyed go with it.
 */
TAXI_EXTERN int taxi_proactor_buffer_release(taxi_proactor_t *p, void *data);
/*
 * Every function below starts one operation and returns 0, after which the
 * completion handler `fn` is called exactly once (a multishot accept: once
 * per connection plus the final one).  On error nothing was started, the
 * handler will not be called and the record is untouched:
 *   TAXI_EINVAL  NULL p/op/fn/buffer, a zero length, a negative offset,
 *                too many buffers, a record used with another proactor
 *                while in flight;
 *   TAXI_EBUSY   the record is in flight;
 *   TAXI_ENOENT  the handle is not attached;
 *   TAXI_ESTOPPED the proactor is being destroyed;
 *   TAXI_ENOTSUP the backend cannot do this operation on this handle.
 * Errors found while the operation runs arrive as its completion status.
 */

/* Accept a connection on listening socket `listener`.  Flags:
 * TAXI_ACCEPT_MULTISHOT.  On success op->accepted is the new connection. */
TAXI_EXTERN int taxi_proactor_accept(taxi_proactor_t *p, taxi_op_t *op,
                                     taxi_handle_t listener, unsigned flags,
                                     taxi_completion_fn fn, void *act);

/* Connect socket `h` (attached, not yet connected; Windows binds it to the
 * wildcard address first if it is not bound) to `addr` (a struct sockaddr
 * of addr_len bytes, at most 128; copied).  Status TAXI_ECONNREFUSED, ... */
TAXI_EXTERN int taxi_proactor_connect(taxi_proactor_t *p, taxi_op_t *op,
                                      taxi_handle_t h, const void *addr,
                                      size_t addr_len, taxi_completion_fn fn,
                                      void *act);

/* Read from socket `h` into buf: some bytes (flags 0) or exactly len
 * (TAXI_READ_EXACT).  End of stream completes with TAXI_EEOF. */
TAXI_EXTERN int taxi_proactor_read(taxi_proactor_t *p, taxi_op_t *op,
                                   taxi_handle_t h, void *buf, size_t len,
                                   unsigned flags, taxi_completion_fn fn,
                                   void *act);

/* Write every byte of bufs[0..nbufs) (nbufs <= TAXI_OP_MAX_BUFS, buffers
 * of length 0 are allowed if the total is not 0) to socket `h`, in order;
 * completes when all are written or on error. */
TAXI_EXTERN int taxi_proactor_write(taxi_proactor_t *p, taxi_op_t *op,
                                    taxi_handle_t h, const taxi_buf_t *bufs,
                                    size_t nbufs, taxi_completion_fn fn,
                                    void *act);

/* Read up to len bytes of file `h` at `offset`.  Fewer bytes complete it
 * at the end of the file; an offset at or past the end completes with
 * TAXI_EEOF and 0 bytes. */
TAXI_EXTERN int taxi_proactor_read_file(taxi_proactor_t *p, taxi_op_t *op,
                                        taxi_handle_t h, void *buf, size_t len,
                                        int64_t offset, taxi_completion_fn fn,
                                        void *act);

/* Write all len bytes of buf to file `h` at `offset`. */
TAXI_EXTERN int taxi_proactor_write_file(taxi_proactor_t *p, taxi_op_t *op,
                                         taxi_handle_t h, const void *buf,
                                         size_t len, int64_t offset,
                                         taxi_completion_fn fn, void *act);

/*
 * Send `header` (may be NULL), then `len` bytes of file `file` from
 * `offset` (len 0: to the end of the file), then `trailer` (may be NULL),
 * to socket `sock`.  `file` is a regular file; it need not be attached.
 * A range reaching past the end of the file is refused at the call with
 * TAXI_EINVAL.  The taxi_buf_t structs are copied; their bytes are not.
 */
TAXI_EXTERN int taxi_proactor_transmit_file(
    taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t sock, taxi_handle_t file,
    int64_t offset, size_t len, const taxi_buf_t *header,
    const taxi_buf_t *trailer, taxi_completion_fn fn, void *act);

/*
 * Receive one datagram on socket `h` (attached; a datagram socket) into
 * buf (len bytes, at least 1).  The handler's `bytes` is the datagram's
 * length as far as buf holds it (0 for an empty datagram: not an end of
 * stream), op->peer / op->peer_len the sender's struct sockaddr, and
 * op->msg_flags has TAXI_MSG_TRUNCATED when the datagram was longer than
 * len (the rest of it is lost).  Status TAXI_ECONNREFUSED (an ICMP port
 * unreachable for an earlier datagram of a connected socket; Windows
 * reports it on unconnected sockets too), other ICMP errors as their
 * TAXI_E* code, TAXI_ECANCELED.  Receives of one handle complete in the
 * order they were started, one datagram each.
 * io_uring: IORING_OP_RECVMSG; IOCP: WSARecvFrom; emulated: recvfrom when
 * the handle is readable; POSIX aio: an aiocb has no room for an address,
 * so the aio backend receives as the emulated one does, through its
 * internal reactor (docs/backends/aio.md).
 */
TAXI_EXTERN int taxi_proactor_recvfrom(taxi_proactor_t *p, taxi_op_t *op,
                                       taxi_handle_t h, void *buf, size_t len,
                                       taxi_completion_fn fn, void *act);

/*
 * Send the len bytes at buf (0 allowed) as one datagram on socket `h` to
 * `addr`, a struct sockaddr of addr_len bytes (at most 128; copied), or,
 * with addr NULL and addr_len 0, to the socket's connected peer.  The
 * handler's `bytes` is len on success: a datagram is never sent in part.
 * Status TAXI_EMSGSIZE (too long for the socket or the path),
 * TAXI_ECONNREFUSED (connected: an earlier datagram was refused),
 * TAXI_EPERM, TAXI_ECANCELED ...  The bytes are the caller's until the
 * handler runs.  io_uring: IORING_OP_SENDMSG; IOCP: WSASendTo; emulated
 * and POSIX aio: sendto when the handle is writable.
 */
TAXI_EXTERN int taxi_proactor_sendto(taxi_proactor_t *p, taxi_op_t *op,
                                     taxi_handle_t h, const void *buf,
                                     size_t len, const void *addr,
                                     size_t addr_len, taxi_completion_fn fn,
                                     void *act);

/* Complete after `delay` nanoseconds (0 to TAXI_TIME_SPAN_MAX; beyond:
 * TAXI_EINVAL) with status 0. */
TAXI_EXTERN int taxi_proactor_timer(taxi_proactor_t *p, taxi_op_t *op,
                                    taxi_time_t delay, taxi_completion_fn fn,
                                    void *act);

/* Complete at once, from whichever thread dispatches next, with status 0
 * and 0 bytes: how other threads hand work to the dispatching threads. */
TAXI_EXTERN int taxi_proactor_post(taxi_proactor_t *p, taxi_op_t *op,
                                   taxi_completion_fn fn, void *act);

/*
 * taxi_proactor_cancel - ask that the operation in flight on `op` complete
 * with TAXI_ECANCELED.  An operation the OS finishes before the request
 * takes effect completes with its own result instead; either way its
 * handler is called exactly once.  Returns 0 (cancellation requested),
 * TAXI_EINVAL (NULL), TAXI_ENOENT (the record is not in flight: it
 * completed already, or never started - harmless).
 */
TAXI_EXTERN int taxi_proactor_cancel(taxi_proactor_t *p, taxi_op_t *op);

/* ---- dispatching completions ------------------------------------------- */

/*
 * taxi_proactor_handle_events - wait up to timeout_ms (-1: no limit, 0:
 * poll) for completions and run the handlers of those that arrived.
 * Returns how many handlers ran (0 on timeout), or TAXI_ESTOPPED whenever
 * the proactor is stopped when the call ends (stopped before it, or during
 * it by any thread, a handler or a signal handler; what ran is not counted
 * then), TAXI_EBUSY (another thread is dispatching, or a pool is
 * attached), TAXI_EINVAL, or a backend error.
 * Threads: one at a time; not from a completion handler.
 */
TAXI_EXTERN int taxi_proactor_handle_events(taxi_proactor_t *p, int timeout_ms);

/* taxi_proactor_run - dispatch until taxi_proactor_stop().  Returns
 * TAXI_ESTOPPED when stopped (at once if stopped already), or an error as
 * taxi_proactor_handle_events(); never 0. */
TAXI_EXTERN int taxi_proactor_run(taxi_proactor_t *p);

/* taxi_proactor_stop - make run (and a handle_events in progress) return;
 * stays stopped until taxi_proactor_restart().  0, or TAXI_EINVAL.
 * Threads: any, and a signal handler (an atomic store and a wake-up that
 * takes no lock). */
TAXI_EXTERN int taxi_proactor_stop(taxi_proactor_t *p);
/* taxi_proactor_restart - undo taxi_proactor_stop(): run and
 * handle_events dispatch again.  0, or TAXI_EINVAL. */
TAXI_EXTERN int taxi_proactor_restart(taxi_proactor_t *p);

/* ---- signals ------------------------------------------------------------ */

/* Told of a signal, in a thread that dispatches the proactor. */
typedef void (*taxi_proactor_signal_fn)(taxi_proactor_t *p, int signo,
                                        void *arg);

/*
 * taxi_proactor_add_signal - call fn(p, signo, arg) in a dispatching
 * thread, as a completion, each time POSIX signal `signo` arrives; no user
 * code runs in the OS signal handler.  The signal is caught as
 * taxi_reactor_add_signal() catches it (its rules on blocking apply; the
 * threads taxi makes have it blocked, whenever they were made), by a
 * reactor and a thread of the proactor's own, made with the first signal
 * added and kept until the proactor is destroyed; so a signal costs one
 * hand-off between threads, and nothing is allocated per signal.  Signals
 * arriving close together may be merged into one call.  One reactor or
 * proactor per process may own a given signal.  The catching reactor's
 * failed waits are retried and reported as the proactor's own (on_error,
 * where "wait"); one that persists is reported fatal and ends the
 * catching: signals are no longer delivered, the proactor goes on.
 * Returns 0, or TAXI_EINVAL (NULL p or fn, signo not a catchable signal),
 * TAXI_EEXIST (p already delivers signo), TAXI_EBUSY (another reactor or
 * proactor owns signo, or another thread is adding or removing a signal
 * of p now), TAXI_ESTOPPED (being destroyed), TAXI_ENOTSUP (no POSIX
 * signals: Windows), TAXI_ENOMEM, TAXI_ESYS.
 * Threads: any (the mask rules above are about the calling thread).
 */
TAXI_EXTERN int taxi_proactor_add_signal(taxi_proactor_t *p, int signo,
                                         taxi_proactor_signal_fn fn, void *arg);

/*
 * taxi_proactor_remove_signal - stop delivering signo; its disposition and
 * the mask of the thread that added it are restored.  A call to fn for a
 * signal taken before may still be under way, or about to start, in a
 * dispatching thread.
 * Returns 0, TAXI_EINVAL, TAXI_ENOENT (p does not deliver signo),
 * TAXI_EBUSY (another thread is adding or removing a signal of p now).
 */
TAXI_EXTERN int taxi_proactor_remove_signal(taxi_proactor_t *p, int signo);

/* Counters, for tests and the benchmark. */
typedef struct taxi_proactor_stats {
  uint64_t started;          /* operations started */
  uint64_t completed;        /* completion handlers called */
  uint64_t cancelled;        /* of which with TAXI_ECANCELED */
  uint64_t submissions;      /* requests given to the OS (a partial transfer
                                resumed counts again) */
  uint64_t syscalls;         /* system calls the backend made to submit, wait
                                and reap (io_uring_enter, aio_*, epoll_wait,
                                read/write/accept, GetQueuedCompletionStatusEx, ...) */
  uint64_t waits;            /* of which waits for completions */
  uint64_t transient_errors; /* failed waits retried after a pause (by
                                run/handle_events; a pool counts its own) */
  uint64_t accept_pauses;    /* pauses of a multishot accept out of
                                descriptors or memory (see
                                TAXI_ACCEPT_MULTISHOT) */
  uint64_t accept_throttles; /* stops of a multishot accept whose handler
                                fell behind (TAXI_ACCEPT_MULTISHOT) */
  uint64_t submit_pauses;    /* requests the OS refused for now (TAXI_EAGAIN:
                                IOCP's too many overlapped requests), tried
                                again after a growing pause (reported to
                                on_error, where "submit"); about 2 s of
                                refusals in a row complete the operation
                                with TAXI_EAGAIN */
  /* io_uring only (0 on the other backends): */
  uint64_t ring_enters; /* io_uring_enter calls (of the syscalls above) */
  uint64_t sqes;        /* submission entries the kernel took */
  uint64_t cqes;        /* completion entries reaped */
  uint64_t handles;     /* handles attached now (not a counter) */
  /* The pool of pooled reads, and on io_uring the groups of buffers of
   * the datagram endpoints (see buffer_size above) with it: */
  uint64_t buffers;        /* buffers made now, the pool's and the
                              groups' (not a counter) */
  uint64_t buffers_held;   /* of which lent now: held by the application,
                              or by a datagram endpoint delivering */
  uint64_t buffer_waits;   /* reads that found no buffer and waited */
  uint64_t buffer_grows;   /* times the pool or a group doubled */
  uint64_t read_throttles; /* stops of a multishot pooled read whose
                              handler fell behind, as accept_throttles */
  /* io_uring's table of registered files (TAXI_PFEAT_REGISTERED_FILES;
   * 0 elsewhere): */
  uint64_t registered_handles; /* handles in a slot now (not a counter) */
  uint64_t register_failures;  /* handles that stayed on their descriptor:
                                  the table was full, or the kernel
                                  refused to install them */
} taxi_proactor_stats_t;

/* taxi_proactor_stats - copy the counters (relaxed reads: each is exact,
 * the set is not a snapshot while threads dispatch; keeping them costs an
 * atomic add each, nothing when not read).  0, or TAXI_EINVAL.  Any
 * thread. */
TAXI_EXTERN int taxi_proactor_stats(const taxi_proactor_t *p,
                                    taxi_proactor_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_PROACTOR_H */
