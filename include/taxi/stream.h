/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/stream.h - byte streams over any dispatcher: listen, accept,
 * connect, read callbacks, queued writes with backpressure, send-file,
 * half-close, close, timeouts and TCP options, written once and run by
 * whichever dispatcher the I/O context (taxi/io.h) was given.
 *
 *     static void on_read(taxi_stream_t *s, int status, const void *data,
 *                         size_t len) {
 *       // At the end of the stream (TAXI_EEOF), or with the output buffer
 *       // full: send what is queued, then close (taxi_stream_close would
 *       // drop it).
 *       if (status < 0 || taxi_stream_write(s, data, len, NULL, NULL) < 0)
 *         taxi_stream_end(s);
 *     }
 *     static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *a) {
 *       taxi_stream_read_start(s, on_read);
 *     }
 *     taxi_listener_create(&l, io, "127.0.0.1:7", NULL, on_accept, NULL);
 *
 * Memory.  A stream is allocated once, when it is accepted, connected or
 * opened: one block holding the stream, its read buffer (read_buffer
 * bytes), its output buffer (high_watermark bytes) and its write records
 * (max_writes).  Reading, writing, timeouts and closing allocate nothing
 * more.  The stream is released after its close callback has returned,
 * unless the application holds references (taxi_stream_ref), then at the
 * last taxi_stream_unref.  A pointer to a released stream must not be used.
 * The context keeps the blocks of released streams (up to 128 of them,
 * and 8 MiB) and makes the next stream of the same size settings in one, so a
 * connection per request allocates nothing once the context has warmed
 * up; taxi_io_destroy frees them (taxi_io_stats counts the streams made in
 * kept blocks and in new ones).  A stream released by its last
 * taxi_stream_unref frees its block instead.
 *
 * Threads.  Every function here may be called from any thread and from any
 * callback (of this stream or another), but for the streams of a context
 * made with TAXI_IO_ONE_THREAD (taxi/io.h): only its thread calls their
 * functions, which then take no lock, and another thread's call is
 * refused (TAXI_EPERM).  The callbacks of one stream
 * (accept, connect, read, write and read completions, drain, close) never
 * run in two threads at once, under every dispatcher: timer expiry against
 * I/O under the reactor's pools, read against write completions under the
 * Proactor included.  They run in threads that dispatch the context (and,
 * during taxi_io_destroy, in its caller), never inside the call that asked
 * for the work: a write from another thread, or from another stream's
 * callback, is handed to the stream's dispatcher and flushed there.
 * Inside its own callbacks a stream's writes are flushed right after the
 * callback returns, with no hand-off.
 *
 * Posting.  taxi_stream_post() is the way to touch a stream from another
 * thread (a worker that computed a reply, a timer of another stream): the
 * function it is given runs in the stream's context, as one more of its
 * callbacks, so it may read and change what the stream's callbacks share
 * without a lock of its own, and its writes are flushed as a callback's
 * are.  Each stand-alone call above is safe from any thread too, but a
 * sequence of them (look at the queue, then write) is atomic only inside
 * the stream's context.  taxi_listener_post() does the same for a
 * listener, taxi_io_post() (taxi/io.h) for the context.
 *
 * Closing.  A stream closes once: by taxi_stream_close(), by an error
 * (reset, a write error, a timeout) or by taxi_io_destroy().  Then every
 * write not yet done completes with TAXI_ECANCELED (the write that failed,
 * with its error), a pending taxi_stream_read_into with TAXI_ECANCELED,
 * every function posted and not yet run is called with TAXI_ECANCELED, and
 * last the close callback runs, exactly once, with the reason: 0 after
 * taxi_stream_close(), else the error.  Under a Proactor, a write the OS
 * was performing when the close came is told once that operation has
 * ended (its buffer, write_ref's too, is not touched after that): 0 if
 * all its bytes went out, else TAXI_ECANCELED with the bytes that did; the
 * bytes that went out are counted (taxi_io_stats bytes_out) either way.  Calls
 * on a closed stream that is still referenced return TAXI_EBADF.
 *
 * Errors.  0 (or a count) on success, a negative TAXI_E* code on failure.
 */
#ifndef TAXI_STREAM_H
#define TAXI_STREAM_H

#include "platform.h"
#include "addr.h"
#include "io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_stream taxi_stream_t;           /* a byte stream */
typedef struct taxi_listener taxi_listener_t;       /* a listening socket */
typedef struct taxi_tls_context taxi_tls_context_t; /* taxi/tls.h */

/* ---- stream options ----------------------------------------------------- */

/* taxi_stream_options_t.flags */
/* Stop reading while the output buffer has less room than one read buffer
 * (so a read callback can always write back what it got), and read again
 * once the queued bytes fall to the low watermark.  Without it reading
 * goes on and writes that do not fit are refused with TAXI_EAGAIN. */
#define TAXI_STREAM_PAUSE_READING 0x1u
/* Disable Nagle's algorithm (TCP_NODELAY) on TCP streams. */
#define TAXI_STREAM_NODELAY 0x2u
/* Enable keep-alive probes (keepalive_* below) on TCP streams. */
#define TAXI_STREAM_KEEPALIVE 0x4u

/* Which timeout expired (taxi_stream_timeout_fn). */
#define TAXI_STREAM_TIMEOUT_IDLE 1  /* idle_timeout */
#define TAXI_STREAM_TIMEOUT_READ 2  /* read_timeout */
#define TAXI_STREAM_TIMEOUT_WRITE 3 /* write_timeout */

/*
 * The idle, read or write timeout of s expired (`which`: the earliest of
 * them, TAXI_STREAM_TIMEOUT_*).  Called in the stream's context, as its
 * other callbacks, before anything is done about it.  When it returns:
 *   - the stream closed or was detached in it: nothing more;
 *   - it called taxi_stream_end() (after writing a last message, say):
 *     the end goes on, and its flush gets the stream's timeouts afresh
 *     (counted from now); a timeout that expires during the end closes
 *     the stream with TAXI_ETIMEDOUT without calling this again.  What was
 *     queued before the end goes out first, then the shutdown: the peer
 *     reads every byte, then the end of the stream.  The close callback
 *     gets reason 0;
 *   - it gave the stream new timeouts (taxi_stream_set_timeouts: they
 *     count from the call): the stream lives on;
 *   - otherwise, as without the callback: the stream closes with
 *     TAXI_ETIMEDOUT, and what is queued is not sent (a write made here
 *     without an end is dropped with the rest).
 * The connect timeout is not told here: it fails the connect (the
 * connect callback gets TAXI_ETIMEDOUT).
 */
typedef void (*taxi_stream_timeout_fn)(taxi_stream_t *s, int which);

/*
 * Options of a stream.  Initialise with taxi_stream_options_init() (or
 * TAXI_STREAM_OPTIONS_INIT), then change what differs.  Sizes and
 * watermarks are checked: high_watermark < 1, low_watermark < 0,
 * low_watermark >= high_watermark, read_buffer 0, and with
 * TAXI_STREAM_PAUSE_READING a low watermark above high_watermark -
 * read_buffer, are TAXI_EINVAL.
 */
typedef struct taxi_stream_options {
  size_t size;        /* sizeof(taxi_stream_options_t) */
  size_t read_buffer; /* bytes read at a time into the stream's buffer
                         (default 8192; at most 16 MiB) */
  /* Bytes written but not yet sent that the stream keeps at most: the size
   * of its output buffer, into which taxi_stream_write copies (default
   * 32768; at most 256 MiB).  A write that does not fit is refused with
   * TAXI_EAGAIN, one larger than this with TAXI_EINVAL.  Zero-copy writes
   * and files hold no stream memory and do not count. */
  long high_watermark;
  /* The drain callback runs when the queued bytes fall to this after a
   * write was refused or reading paused (and, after TAXI_ENOBUFS, a write
   * record is free again) (default 8192; 0: when empty). */
  long low_watermark;
  unsigned max_writes; /* writes queued at once at most (default 64; a
                          copying write without callback may join the one
                          before it and take no record of its own); one
                          more is refused with TAXI_ENOBUFS */
  unsigned flags;      /* TAXI_STREAM_* */
  /* Timeouts in nanoseconds, 0: none.  A stream that reaches one is closed
   * with TAXI_ETIMEDOUT (unless on_timeout, below, decides otherwise).
   * idle: nothing read or written for that long;
   * read: reading (read_start or read_into) and nothing arrived for that
   * long (not counted while paused); write: bytes queued and none sent for
   * that long; connect: the connection not made within it.  Under the
   * readiness dispatchers "now" is the time the wait that reported the
   * stream's event returned (read once per batch of events, not per
   * message): a timeout may end early by as long as the events dispatched
   * before it in its batch took. */
  taxi_time_t idle_timeout;
  taxi_time_t read_timeout;    /* see idle_timeout */
  taxi_time_t write_timeout;   /* see idle_timeout */
  taxi_time_t connect_timeout; /* see idle_timeout */
  /* With TAXI_STREAM_KEEPALIVE: first probe after idle seconds, then every
   * interval seconds, count probes (0: the system's default). */
  unsigned keepalive_idle;
  unsigned keepalive_interval; /* see keepalive_idle */
  unsigned keepalive_count;    /* see keepalive_idle */
  /* Called when the idle, read or write timeout expires, before the
   * stream is closed for it (see taxi_stream_timeout_fn); NULL: closed at
   * once with TAXI_ETIMEDOUT. */
  taxi_stream_timeout_fn on_timeout;
  /* taxi_stream_connect to a host name: the "connection attempt delay"
   * of RFC 8305 (Happy Eyeballs v2), after which the next address is
   * tried while the earlier attempts go on (0: 250 ms; else 10 ms to
   * 2 s, TAXI_EINVAL outside). */
  taxi_time_t attempt_delay;
  /* taxi_stream_connect to a host name: told of each address as its
   * attempt starts, in order (NULL: not told).  Runs in the stream's
   * context, as its callbacks do, before its connect callback. */
  void (*on_attempt)(taxi_stream_t *s, const taxi_addr_t *addr);
  /* TLS (taxi/tls.h): a server context makes the streams a listener
   * accepts (or taxi_stream_open makes) TLS servers, a client context
   * makes taxi_stream_connect's (or taxi_stream_open's) TLS clients; NULL:
   * plain streams.  The stream (and a listener) holds a reference. */
  taxi_tls_context_t *tls;
  /* A TLS client: the name sent as SNI and checked against the server's
   * certificate (copied; NULL: the host of the connect's address, an IP
   * address checked as one and not sent).  Required with verification
   * on for taxi_stream_open and Unix-domain addresses. */
  const char *tls_server_name;
  /* A TLS stream's handshake is over: status 0, or the error with which
   * the stream then closes (TAXI_ETLS, TAXI_EBADCERT, ...; see
   * taxi_tls_error_text).  In the stream's context, as its other
   * callbacks.  NULL: not told (a failure still reaches the close
   * callback). */
  void (*on_handshake)(taxi_stream_t *s, int status);
} taxi_stream_options_t;

/* taxi_stream_options_init - the defaults above.  Nothing for NULL. */
TAXI_EXTERN void taxi_stream_options_init(taxi_stream_options_t *o);

/* TAXI_STREAM_OPTIONS_INIT - an initialiser with the defaults, as the *_init
 * function sets them. */
#ifndef __cplusplus
#define TAXI_STREAM_OPTIONS_INIT                                     \
  {                                                                  \
    .size = sizeof(taxi_stream_options_t), .read_buffer = 8192,      \
    .high_watermark = 32768, .low_watermark = 8192, .max_writes = 64 \
  }
#else
/* C++ (before designated initialisers): the same defaults, by value. */
static inline taxi_stream_options_t taxi_stream_options_default_() {
  taxi_stream_options_t o;
  taxi_stream_options_init(&o);
  return o;
}
#define TAXI_STREAM_OPTIONS_INIT (taxi_stream_options_default_())
#endif

/* ---- callbacks ---------------------------------------------------------- */

/* Data arrived: status 0 and len > 0 bytes at data, lent for the call only
 * (in the stream's buffer or one the dispatcher lends: see
 * taxi_stream_read_start).  status TAXI_EEOF: the peer
 * shut its side down (data NULL, len 0); reading has stopped, writing
 * still works.  Errors close the stream and go to the close callback. */
typedef void (*taxi_stream_read_fn)(taxi_stream_t *s, int status,
                                    const void *data, size_t len);
/* A write, send-file or read_into is over: status 0 and every byte done,
 * or TAXI_EEOF (read_into: the stream ended first), TAXI_ECANCELED (the
 * stream closed first), or the error that closed the stream; bytes: how
 * many were done. */
typedef void (*taxi_stream_done_fn)(taxi_stream_t *s, int status, size_t bytes,
                                    void *arg);
/* The stream closed: reason 0 (taxi_stream_close) or the error
 * (TAXI_ETIMEDOUT for a timeout, TAXI_ECONNRESET, ...).  The last callback
 * of the stream; it is released when this returns (see Memory above). */
typedef void (*taxi_stream_close_fn)(taxi_stream_t *s, int reason);
/* The queued bytes fell to the low watermark (see low_watermark). */
typedef void (*taxi_stream_drain_fn)(taxi_stream_t *s);
/* A connect is over: status 0 (connected: read and write away), or
 * TAXI_ECONNREFUSED, TAXI_ETIMEDOUT (connect_timeout), ...: then the
 * stream closes with that reason after this returns. */
typedef void (*taxi_stream_connect_fn)(taxi_stream_t *s, int status, void *arg);
/* A connection was accepted: s is new, its callbacks not yet set; this is
 * its first callback (nothing of s runs before it returns). */
typedef void (*taxi_accept_fn)(taxi_listener_t *l, taxi_stream_t *s, void *arg);

/* ---- making streams ----------------------------------------------------- */

/*
 * taxi_stream_connect - connect to `address` (see taxi_addr_parse), in the
 * background: fn(s, status, arg) runs once it is over, in a dispatching
 * thread; until then reads may be started and writes queued (they go out
 * once connected).
 *
 * A host name ("example.com:443") is resolved by a resolver thread of the
 * context (taxi/resolve.h), never by a dispatching one, then its addresses
 * are raced as RFC 8305 (Happy Eyeballs v2) says: the families
 * interleaved, IPv6 first; a new attempt every opts->attempt_delay while
 * the earlier ones are pending, or at once when one fails; the first to
 * connect wins and the others are closed.  opts->connect_timeout covers
 * the resolution too.  Until it has won, the stream has no socket
 * (taxi_stream_handle gives TAXI_INVALID_HANDLE) and no peer.  The
 * attempts are not counted in taxi_io_stats_t (the stream's connect is,
 * once).  A numeric address connects at once, as it always did.  Failure to
 * connect (refused, unreachable, timed out after opts->connect_timeout) is
 * reported to fn, then the stream closes with the same reason.  The stream's
 * data pointer starts as arg. fn is the stream's first callback and always runs
 * before its close callback: set the close callback there.  Once the connect
 * failed, the stream is released after fn returns, so *out may be used from
 * another thread only while the stream is known to be open
 * (taxi_stream_close(*out) before fn ran cancels the attempt: fn gets
 * TAXI_ECANCELED), or under a reference taken in fn.
 *
 * Failures of a name go to fn like the others: TAXI_ENONAME,
 * TAXI_ETRYAGAIN, TAXI_ENOADDR (see taxi/resolve.h), or the last
 * attempt's error when every address failed.
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL io, out, address; bad
 * options), TAXI_EBADADDR (malformed: see taxi_addr_parse, and for a name
 * taxi_resolve), TAXI_ENOTSUP, TAXI_ESTOPPED (io being destroyed),
 * TAXI_ENOBUFS (a name, with the resolver's queue full), TAXI_ETOOMANY
 * (no descriptor left), TAXI_ENOMEM, TAXI_ESYS.
 */
TAXI_EXTERN int taxi_stream_connect(taxi_stream_t **out, taxi_io_t *io,
                                    const char *address,
                                    const taxi_stream_options_t *opts,
                                    taxi_stream_connect_fn fn, void *arg);

/*
 * taxi_stream_open - make a stream of a connected stream socket `h` (a
 * socket pair's end, a connection accepted elsewhere).  The stream takes
 * the handle and closes it when it closes.  It stays still - nothing is
 * read, no timeout runs - until the first call that sets it going
 * (taxi_stream_read_start, a read_into, a write, set_timeouts, shutdown,
 * end, close, detach, a post), so that nothing closes it before the
 * caller has set its callbacks.
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL, bad options), TAXI_EBADF
 * (h not open), TAXI_ESTOPPED, TAXI_ENOMEM, TAXI_ESYS (then h is still the
 * caller's).
 */
TAXI_EXTERN int taxi_stream_open(taxi_stream_t **out, taxi_io_t *io,
                                 taxi_handle_t h,
                                 const taxi_stream_options_t *opts);

/* ---- per-stream settings ------------------------------------------------ */

/* The application's pointer for the stream (NULL at first). */
TAXI_EXTERN int taxi_stream_set_data(taxi_stream_t *s, void *data);
/* The pointer set by taxi_stream_set_data (NULL for NULL). */
TAXI_EXTERN void *taxi_stream_data(const taxi_stream_t *s);
/* Set the close and drain callbacks (NULL: none).  0, TAXI_EINVAL,
 * TAXI_EBADF (closed; the close callback may still be set while the
 * stream closes, until it has run). */
TAXI_EXTERN int taxi_stream_on_close(taxi_stream_t *s, taxi_stream_close_fn fn);
/* See taxi_stream_on_close. */
TAXI_EXTERN int taxi_stream_on_drain(taxi_stream_t *s, taxi_stream_drain_fn fn);
/* Change the timeouts (as in the options; negative or beyond
 * TAXI_TIME_SPAN_MAX is TAXI_EINVAL).  0, TAXI_EINVAL, TAXI_EBADF. */
TAXI_EXTERN int taxi_stream_set_timeouts(taxi_stream_t *s, taxi_time_t idle,
                                         taxi_time_t read, taxi_time_t write);
/* TCP_NODELAY, and keep-alive probes (see the options).  0, TAXI_EINVAL,
 * TAXI_EBADF, TAXI_ENOTSUP (not a TCP stream), TAXI_ESYS. */
TAXI_EXTERN int taxi_stream_set_nodelay(taxi_stream_t *s, int on);
/* See taxi_stream_set_nodelay; on 0 turns the probes off. */
TAXI_EXTERN int taxi_stream_set_keepalive(taxi_stream_t *s, int on,
                                          unsigned idle_s, unsigned interval_s,
                                          unsigned count);

/* ---- posting ------------------------------------------------------------ */

/* A function posted to a stream (taxi_stream_post): status 0, run in the
 * stream's context; or TAXI_ECANCELED: the stream closed (or was detached)
 * before its turn, and this call, made in the stream's context before its
 * close (or detach) callback, is only for releasing arg. */
typedef void (*taxi_stream_post_fn)(taxi_stream_t *s, int status, void *arg);

/*
 * taxi_stream_post - run fn(s, 0, arg) in the stream's context: in a
 * thread that dispatches it, never at the same time as another callback
 * of s (read, write completions, drain, timeout, connect, close, another
 * posted function), and never inside this call, even when it is made from
 * one of s's own callbacks (then fn runs after that callback returns).
 * Functions posted to one stream run in the order they were posted.  The
 * writes fn makes are flushed when it returns, as a callback's are.  A
 * stream still connecting runs them once connected, after its connect
 * callback; a stream made by taxi_stream_open is set going by a post.
 *
 * fn runs exactly once: with status 0, or with TAXI_ECANCELED if the
 * stream closes or is detached first (then before its close or detach
 * callback, in its context, so that arg may be released there).
 *
 * Memory: a post takes a record from the context's free list, allocating
 * one only when none is free (records are kept for reuse until
 * taxi_io_destroy), so that posting allocates nothing in steady state.
 *
 * Returns 0 (fn will run), or TAXI_EINVAL (NULL s or fn), TAXI_EBADF (s
 * is closing, closed or detached), TAXI_ESTOPPED (taxi_io_stop was called
 * or taxi_io_destroy began: nothing would run it), TAXI_ENOMEM; on an
 * error fn does not run and arg stays the caller's.  Threads: any,
 * callbacks of any stream included; s must not have been released (hold
 * a reference, taxi_stream_ref, to post to a stream that may close).
 */
TAXI_EXTERN int taxi_stream_post(taxi_stream_t *s, taxi_stream_post_fn fn,
                                 void *arg);

/* ---- reading ------------------------------------------------------------ */

/*
 * taxi_stream_read_start - call fn with each piece of data that arrives
 * (read_buffer bytes at most per call), until taxi_stream_read_stop, end
 * of stream (one TAXI_EEOF call) or close.  On the reactor, lf and hsha
 * dispatchers a stream whose read_buffer is at most 16384 bytes (and not
 * TLS) reads into a buffer the dispatching thread lends for the call,
 * which with many connections is warmer in the cache than each stream's
 * own; bytes that must wait (what a read_into left, what a pipe that
 * paused hands back) are copied into the stream's own.  Over io_uring (the
 * proactor and proactors dispatchers, with a proactor the context made) a
 * stream whose read_buffer is at least 4096 reads through the proactor's pool
 * of provided buffers instead: the data is then in a buffer of the pool (4096
 * bytes at most per call), lent for the call, and the stream's own buffer keeps
 * only what must wait (what a read_into left, what arrived while reading was
 * stopped or paused). Calling it again replaces fn.  Returns 0, TAXI_EINVAL
 * (NULL), TAXI_EBADF (closed), TAXI_EBUSY (a taxi_stream_read_into is pending,
 * or a pipe reads the stream: taxi_stream_pipe).
 */
TAXI_EXTERN int taxi_stream_read_start(taxi_stream_t *s,
                                       taxi_stream_read_fn fn);

/*
 * taxi_stream_read_stop - no read callback starts after this returns (one
 * running in another thread finishes).  Bytes that already arrived stay
 * in the stream's buffer for the next read_start or read_into.  Returns 0,
 * TAXI_EINVAL, TAXI_EBADF, TAXI_EBUSY (a read_into is pending: it ends
 * only by completing or by close; or a pipe reads the stream).
 */
TAXI_EXTERN int taxi_stream_read_stop(taxi_stream_t *s);

/* taxi_stream_read_into flags: complete only when all len bytes arrived
 * (or at end of stream / close); without it, with the first bytes. */
#define TAXI_STREAM_READ_EXACT 0x1u

/*
 * taxi_stream_read_into - read into the caller's buf (len > 0 bytes, valid
 * until fn runs): some bytes, or exactly len with TAXI_STREAM_READ_EXACT,
 * then fn(s, status, bytes, arg) once.  The bytes pass through the
 * stream's buffer.  One at a time, not while read_start is active.
 * Returns 0, TAXI_EINVAL (NULL, len 0, unknown flags), TAXI_EBADF,
 * TAXI_EBUSY (read_start active, a read_into pending, or a pipe reads the
 * stream).
 */
TAXI_EXTERN int taxi_stream_read_into(taxi_stream_t *s, void *buf, size_t len,
                                      unsigned flags, taxi_stream_done_fn fn,
                                      void *arg);

/* ---- writing ------------------------------------------------------------ */

/*
 * taxi_stream_write - copy len bytes into the stream's output buffer and
 * send them after everything queued before; fn (may be NULL) runs once
 * they are all sent or the stream closed.  Queuing allocates nothing.
 * Under the reactor and its pools, a write without fn into an empty queue
 * made while a read callback of the stream runs (the echo of what it
 * read, say) is sent by this call (one non-blocking send under the
 * stream's lock), and only what the socket does not take is copied and
 * queued: a taxi_stream_close after it no longer stops the bytes sent.
 * An error of that send is met again by the stream's next send, which
 * closes the stream with it, as for any queued write.
 *
 * Returns 0 (queued), or TAXI_EINVAL (NULL s or data, len 0, len above the
 * high watermark), TAXI_EAGAIN (no room now: the bytes would take the
 * queue above the high watermark), TAXI_ENOBUFS (every write record is in
 * use: max_writes writes queued), TAXI_EBADF (closed), TAXI_EPIPE (after
 * shutdown).  After TAXI_EAGAIN or TAXI_ENOBUFS nothing was queued, and the
 * drain callback will say when there is room again (the queue down to the
 * low watermark, and a record free).
 */
TAXI_EXTERN int taxi_stream_write(taxi_stream_t *s, const void *data,
                                  size_t len, taxi_stream_done_fn fn,
                                  void *arg);

/* taxi_stream_write_ref - as taxi_stream_write, without copying: the
 * caller's bytes must stay valid and unchanged until fn (required) runs.
 * They do not count against the high watermark: never TAXI_EAGAIN, but
 * TAXI_ENOBUFS when max_writes are queued. */
TAXI_EXTERN int taxi_stream_write_ref(taxi_stream_t *s, const void *data,
                                      size_t len, taxi_stream_done_fn fn,
                                      void *arg);

/*
 * taxi_stream_sendfile - send len bytes of regular file `file` from
 * `offset`, in order with the writes: sendfile(2) under the reactor and
 * its pools, taxi_proactor_transmit_file under the Proactor.  The file
 * stays the caller's and must stay open until fn runs.  Unlike the other
 * writes, sendfile(2) and splice(2) cannot be told not to raise SIGPIPE
 * when the peer is gone: a program that sends files should ignore it.
 * Under the reactor and its pools the socket is corked (Linux TCP_CORK)
 * while a file of up to 1 MiB is queued, so that the file leaves in full
 * segments with the writes before it, and uncorked once none is.  A TLS
 * stream (taxi/tls.h) reads the file into its engine in pieces instead:
 * no sendfile(2) through user-space TLS.
 * Errors as
 * taxi_stream_write, and TAXI_EINVAL also for a negative offset, len 0, or
 * a range past the end of the file (or a handle that is not a regular
 * file).
 */
TAXI_EXTERN int taxi_stream_sendfile(taxi_stream_t *s, taxi_handle_t file,
                                     int64_t offset, size_t len,
                                     taxi_stream_done_fn fn, void *arg);

/* taxi_stream_write_queued - bytes of copying writes queued and not yet
 * sent (what the watermarks measure); 0 for NULL. */
TAXI_EXTERN size_t taxi_stream_write_queued(const taxi_stream_t *s);

/*
 * taxi_stream_write_room - the bytes a copying write may queue now without
 * TAXI_EAGAIN: the high watermark less what is queued (a write also needs
 * a record: TAXI_ENOBUFS).  0 for NULL, and for a stream that takes no
 * more writes (closing, closed, or shut down).  Threads: any; from another
 * thread it is a moment's value (bytes going out make room, another
 * thread's writes take it); in the stream's own callbacks, and in a
 * function posted to it, it holds until the stream's next write.
 */
TAXI_EXTERN size_t taxi_stream_write_room(const taxi_stream_t *s);

/*
 * taxi_stream_watermarks - the stream's low and high watermarks, in bytes
 * (from its options; they do not change while it lives).  Either pointer
 * may be NULL.  Returns 0 or TAXI_EINVAL (NULL s).  Threads: any.
 */
TAXI_EXTERN int taxi_stream_watermarks(const taxi_stream_t *s, size_t *low,
                                       size_t *high);

/* ---- relaying ----------------------------------------------------------- */

/* A pipe is over (taxi_stream_pipe): status 0 when `from` reached its end
 * and the end was passed on (`to` shuts its sending down once the bytes
 * relayed have gone out); otherwise why it stopped: the error with which
 * from or to closed (TAXI_ECANCELED for a close without error), or
 * TAXI_EPIPE (the application shut `to` down while the pipe wrote to it).
 * from and to are valid during the call. */
typedef void (*taxi_stream_pipe_fn)(taxi_stream_t *from, taxi_stream_t *to,
                                    int status, void *arg);

/*
 * taxi_stream_pipe - relay everything read from `from` into `to`, with
 * backpressure both ways and half-close, until from's end or a close:
 *
 *   - Each read of from is written to `to` at once (copied into its output
 *     buffer, as taxi_stream_write does).  When `to` has less room left
 *     than one read of from (from's read_buffer), reading from stops, and
 *     it starts again once `to` has drained to its low watermark.  A read
 *     `to` refuses all the same (the application's own writes to `to`
 *     took the room, or its write records) waits in from's read buffer
 *     for that drain.  So the bytes in transit in the process are at most
 *     to's high watermark and one read buffer, however slow to's peer is,
 *     and from's peer is held back by TCP's own flow control.
 *   - Half-close: when from's peer shuts its side down (from reads the end
 *     of the stream), `to` is shut down once what was relayed has gone out
 *     (taxi_stream_shutdown: its peer reads every byte, then the end), and
 *     the pipe is over: fn(from, to, 0, arg).  Both streams stay open: the
 *     other direction may go on; end or close them when done with them.
 *   - Errors: when either stream closes first (a reset, a timeout,
 *     taxi_stream_close, taxi_io_destroy), the pipe closes the other one
 *     (its close callback gets TAXI_ECANCELED, and what it had queued is
 *     not sent) and fn gets the first one's reason (TAXI_ECANCELED for a
 *     close without error).  If the application shuts `to` down while the
 *     pipe writes to it, both are closed and fn gets TAXI_EPIPE.
 *
 * Both directions of a connection, as a proxy relays them: two pipes, one
 * from a to b and one from b to a (a stream may be the source of one pipe
 * and the destination of another).  from and to may belong to different
 * contexts.
 *
 * fn (NULL: none) runs once, in the context of the stream whose event
 * ended the pipe: from's read for its end or a refused write, the closing
 * stream's close (before that stream's own close callback); it may run
 * while the other stream's callbacks run in another thread.
 *
 * While the pipe runs it is from's reader: its read callback is replaced
 * (bytes from read and did not deliver yet go first);
 * taxi_stream_read_start, read_stop and read_into on from are TAXI_EBUSY,
 * and so is taxi_stream_detach of either stream.  The application may
 * still write to `to` (see above) and use both streams otherwise.  The
 * pipe is allocated here, once, and holds a reference to each stream
 * until fn has returned.
 *
 * Returns 0, or TAXI_EINVAL (NULL from or to, from == to, or to's high
 * watermark less its low watermark below from's read buffer: a drain
 * would never make room for a read), TAXI_EBADF (either is closing or
 * closed), TAXI_EPIPE (to is shut down), TAXI_EBUSY (from is read by a
 * pipe already or has a read_into pending; to is written by a pipe
 * already), TAXI_ENOMEM.  Threads: any.
 */
TAXI_EXTERN int taxi_stream_pipe(taxi_stream_t *from, taxi_stream_t *to,
                                 taxi_stream_pipe_fn fn, void *arg);

/*
 * taxi_stream_shutdown - half-close: once everything queued is sent, shut
 * the sending direction down (the peer reads end of stream); reading goes
 * on.  Later writes are TAXI_EPIPE.  Returns 0, TAXI_EINVAL, TAXI_EBADF,
 * TAXI_EPIPE (already).
 */
TAXI_EXTERN int taxi_stream_shutdown(taxi_stream_t *s);

/*
 * taxi_stream_end - close gracefully: stop reading, send everything queued,
 * shut the sending direction down, then close (the close callback gets
 * reason 0).  Later writes are TAXI_EPIPE.  Returns 0, TAXI_EINVAL,
 * TAXI_EBADF (closed, or ending already).
 */
TAXI_EXTERN int taxi_stream_end(taxi_stream_t *s);

/*
 * taxi_stream_close - close now: queued writes are not sent (they complete
 * with TAXI_ECANCELED), then the close callback runs with reason 0 (see
 * Closing above).  Returns 0, TAXI_EINVAL (NULL), TAXI_EBADF (closing or
 * closed already: the first close wins).
 */
TAXI_EXTERN int taxi_stream_close(taxi_stream_t *s);

/* The connection of a detached stream (see taxi_stream_detach): the
 * handle, now the caller's (still non-blocking), and the bytes the stream
 * had read from it but not delivered, valid during the call only.  The
 * last callback of the stream, in place of the close callback; the stream
 * is released when this returns. */
typedef void (*taxi_stream_detach_fn)(taxi_stream_t *s, taxi_handle_t h,
                                      const void *unread, size_t len,
                                      void *arg);

/*
 * taxi_stream_detach - take the connection back from the stream without
 * closing it, to serve it in another context (another dispatcher: how an
 * adaptive server moves a connection from one concurrency strategy to
 * another between requests, with taxi_stream_open) or outside taxi.
 * Reading stops at once; no callback of the stream runs after this but
 * fn (functions posted and not yet run are called with TAXI_ECANCELED
 * before it).  Once nothing of the stream can run or touch the handle any
 * more (a Proactor's read in flight has been cancelled and has completed:
 * no request still names the descriptor), fn runs in a dispatching thread
 * of the context, or in the thread of taxi_io_destroy, with the handle and
 * the bytes that read had brought (usually none: the bytes already
 * delivered to the read callback are the application's; over io_uring's
 * pooled reads, see taxi_stream_read_start, every byte the kernel had
 * received by the time the read stopped, which may be all the peer had
 * sent).  A direction
 * shut down stays shut down.
 *
 * Only a stream with nothing of its own in flight may leave: no write
 * queued, no read_into, no connect, no taxi_stream_end pending, in no pipe
 * (taxi_stream_pipe).  Detach from a write's completion callback or from
 * on_drain once the queue is empty (taxi_stream_write_queued() is 0 and
 * every write was told).
 *
 * Windows: a socket that an IOCP Proactor had stays bound to that
 * completion port (the OS cannot undo it): a Reactor context can serve it,
 * another Proactor cannot attach it (taxi_stream_open fails with TAXI_ESYS
 * and the handle stays the caller's).
 *
 * Returns 0, TAXI_EINVAL (NULL s or fn), TAXI_EBADF (closing, closed or
 * detaching already), TAXI_EBUSY (something of the stream is in flight,
 * see above; nothing changed), TAXI_ENOTSUP (a TLS stream: its session
 * cannot leave with the socket).  Any thread, the stream's callbacks too.
 */
TAXI_EXTERN int taxi_stream_detach(taxi_stream_t *s, taxi_stream_detach_fn fn,
                                   void *arg);

/* taxi_stream_ref / taxi_stream_unref - keep the stream's memory after its
 * close callback, until the matching unref (see Memory).  0, TAXI_EINVAL
 * (NULL; unref without a reference). */
TAXI_EXTERN int taxi_stream_ref(taxi_stream_t *s);
/* See taxi_stream_ref. */
TAXI_EXTERN int taxi_stream_unref(taxi_stream_t *s);

/* ---- about a stream ----------------------------------------------------- */

/* The peer's and the local address.  0, TAXI_EINVAL, TAXI_ENOENT (not
 * known: a stream opened from a handle whose peer has no name). */
TAXI_EXTERN int taxi_stream_peer(const taxi_stream_t *s, taxi_addr_t *out);
/* See taxi_stream_peer. */
TAXI_EXTERN int taxi_stream_local(const taxi_stream_t *s, taxi_addr_t *out);
/* What one stream did, counted as the context's totals are
 * (taxi_io_stats_t in taxi/io.h). */
typedef struct taxi_stream_counters {
  uint64_t bytes_in;  /* bytes read from the connection */
  uint64_t bytes_out; /* bytes sent (writes, write_refs, files) */
  uint64_t reads;     /* read callbacks with data */
  uint64_t writes;    /* writes queued (write, write_ref, sendfile) */
  /* writes refused for lack of room: TAXI_EAGAIN (above the high
   * watermark) and TAXI_ENOBUFS (no write record) */
  uint64_t writes_refused;
  uint64_t writes_no_record; /* of those, the TAXI_ENOBUFS ones */
  /* times reading paused for backpressure (TAXI_STREAM_PAUSE_READING, or
   * a pipe waiting for its destination: taxi_stream_pipe) */
  uint64_t read_pauses;
  /* times a dispatching thread entered the stream's readiness hooks while
   * another thread ran them: a check of the dispatchers' promise that a
   * stream is processed by one thread at a time, so always 0 */
  uint64_t hook_overlaps;
} taxi_stream_counters_t;

/*
 * taxi_stream_counters - copy the stream's counters into *out.  Each is
 * an atomic of its own, counted and read without a lock (the data path
 * takes none for them), so that a copy made while the stream runs is not
 * one instant's: each counter is exact, two may be a moment apart.  They
 * stay readable after the close while the stream is referenced
 * (taxi_stream_ref): read them in the close callback, or under a
 * reference, for their final values.
 * Returns 0 or TAXI_EINVAL (NULL).  Threads: any.
 */
TAXI_EXTERN int taxi_stream_counters(const taxi_stream_t *s,
                                     taxi_stream_counters_t *out);

/* The context of the stream; NULL for NULL. */
TAXI_EXTERN taxi_io_t *taxi_stream_io(const taxi_stream_t *s);
/* The socket (still the stream's); TAXI_INVALID_HANDLE for NULL.  A
 * duplicate of it (dup, fork) may outlive the stream: once it was asked
 * for, the stream's end and close no longer count on its close to end the
 * socket, which costs them a system call or two. */
TAXI_EXTERN taxi_handle_t taxi_stream_handle(const taxi_stream_t *s);

#ifdef __cplusplus
}
#endif

/* Listeners: taxi_listener_create and the rest (taxi/listener.h). */
#include "listener.h"

#endif /* TAXI_STREAM_H */
