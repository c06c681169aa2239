/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/lf_bound.h - bound handle/thread associations for the
 * Leader/Followers pool: a multiplexed connection whose replies go to the
 * thread that asked.
 *
 * One connected socket (a taxi_lf_mux_t) carries the requests of many
 * threads; each request names a 64-bit id chosen by its sender, and the
 * peer's reply carries that id back.  A thread that wants a reply:
 *
 *     taxi_lf_expect_t e;
 *     taxi_lf_expect_init(&e, id, buf, sizeof buf); // the caller's record
 *     taxi_lf_mux_expect(m, &e);                    // before the request
 *     taxi_lf_mux_send(m, request, len, -1);
 *     int n = taxi_lf_mux_await(m, &e, 1000);       // the reply's length
 *
 * Registering before sending means a reply that comes fast is never lost:
 * it waits in the record (its buffer) until await is called.  Replies
 * that come some other way (a proactor's completions, a library's
 * callback) use the same records with a table of their own
 * (taxi_lf_bound_t, below): the application's code delivers them.
 *
 * Bound hand-off.  The connection's handle is one more handle of the
 * pool's reactor.  Whichever pool thread runs its input hook (normally the
 * one that was leader when the bytes came) reads, cuts the bytes into
 * frames with the application's parse hook, copies each reply into the
 * record expecting its id and wakes exactly the thread awaiting it (that
 * thread's own synchronizer); then it goes on with the next frame.  No
 * queue, no allocation per reply.
 *
 * Hybrid.  While it awaits, a thread takes part in the pool: it may lead,
 * be promoted and process other handles' events (the reply itself
 * included), or follow.  So the same pool serves ordinary handlers and
 * bound replies at once, and a handler's hook may itself call out over a
 * connection and await: the pool does not run out of threads when every
 * one of them waits for a reply.  A thread outside the pool that awaits
 * joins it for the time of the wait (counted in taxi_lf_stats().threads
 * meanwhile; its record, as a thread that joined, is kept until the pool
 * is destroyed).  Awaits nest: a thread that processes, while it awaits, a
 * hook that awaits too, comes back to the first wait only when the second
 * is over.  A pool thread asked to leave (taxi_lf_shrink) while it awaits
 * leaves once its wait is over.  With several leaders
 * (TAXI_LEADERS_MANY) a thread that awaits leads only alone, since the
 * wake-up that ends its wait on the handle set could be taken by another.
 *
 * Promotion.  The hand-off is the paper's specific notification: the
 * thread that delivers a reply signals the synchronizer of the one thread
 * whose record it filled, whatever the pool's promotion order, which goes
 * on choosing who leads next.  A thread so woken does not lead; it
 * returns to its caller.
 *
 * Where a wait could never end, the call refuses with TAXI_EBUSY instead:
 * from the connection's own hooks (its parse and unknown-id hooks run in
 * the thread reading the connection, which is then not reading); a
 * send on a connection from a hook the same thread runs while it is
 * already sending on that connection (it owns the write lock); and an
 * await or a send that must wait, from the pool's on_error callback (the
 * thread telling of a failed wait still holds the leader's role).  A
 * thread outside the pool never meets that: it joins for its wait.
 *
 * Failure.  A parse hook error, the end of the stream, a read or write
 * error, or a partial send that could not be finished closes the
 * connection: its handle is removed from the reactor (and closed by its
 * close hook), and every thread awaiting a reply on it returns that error
 * (TAXI_EEOF, TAXI_ECONNRESET, the parse hook's code, ...).  Calls made
 * afterwards return it too.  Nothing waits for ever.
 *
 * Threads.  Every function may be called from any thread, in or out of
 * the pool, unless its comment says otherwise.  The mux's state is guarded
 * by the pool's lock (the reactor's), held briefly by each call.
 */
#ifndef TAXI_LF_BOUND_H
#define TAXI_LF_BOUND_H

#include "platform.h"
#include "lf.h"
#include "reactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_lf_mux taxi_lf_mux_t; /* a multiplexed connection */

/*
 * A reply expected by id: a record owned by the caller (usually on its
 * stack), so that a request allocates nothing.  Fill it with
 * taxi_lf_expect_init(); it may be expected again once its await returned
 * or it was forgotten.  Keep it, and its buffer, valid while it is
 * registered (from taxi_lf_mux_expect() until await returns or forget).
 */
typedef struct taxi_lf_expect {
  uint64_t id; /* the reply's id, as the parse hook reports it */
  void *buf;   /* where the reply's body is copied */
  size_t cap;  /* room in buf, bytes (at most INT_MAX) */
  /* Set when the reply came: its body's length, even where it exceeded
   * cap (then only cap bytes were copied and await says TAXI_EMSGSIZE). */
  size_t length;
  /* Private to taxi, under the pool's lock. */
  struct {
    struct taxi_lf_expect *next; /* in the connection's table */
    void *owner;                 /* the table it is registered with */
    void *waiter;                /* the thread awaiting it, or NULL */
    int state;
    int result; /* once done: the length, or an error */
  } internal_;
} taxi_lf_expect_t;

/*
 * taxi_lf_expect_init - prepare record e to expect the reply `id` into
 * buf[0..cap) (buf may be NULL when cap is 0).  Must not be called on a
 * registered record.  Returns 0, or TAXI_EINVAL (e NULL, buf NULL with
 * cap > 0, cap > INT_MAX).  Threads: the record's owner.
 */
TAXI_EXTERN int taxi_lf_expect_init(taxi_lf_expect_t *e, uint64_t id, void *buf,
                                    size_t cap);

/* ---- a table of expected replies -----------------------------------------
 *
 * The expect / await / deliver hand-off without a connection: for replies
 * that arrive some other way (a proactor's completions, a protocol
 * library's callback, another thread).  The code that receives a reply
 * calls taxi_lf_bound_deliver(); everything else is as on a multiplexed
 * connection, which embeds such a table.  Works over any
 * Leader/Followers pool: one over a reactor or over a proactor
 * (taxi_lf_create_proactor).
 */
typedef struct taxi_lf_bound taxi_lf_bound_t;

/* Options for taxi_lf_bound_create(): start from
 * TAXI_LF_BOUND_OPTIONS_INIT or taxi_lf_bound_options_init(), then set what
 * differs. */
typedef struct taxi_lf_bound_options {
  /* sizeof(taxi_lf_bound_options_t) as the program was compiled, set by
   * the initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  /* Rows of the table, rounded up to a power of two; 0: 256; at most
   * 2^24. */
  unsigned buckets;
} taxi_lf_bound_options_t;

/* taxi_lf_bound_options_init - the defaults (every field 0, size set).
 * Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_lf_bound_options_init(taxi_lf_bound_options_t *o);

/* TAXI_LF_BOUND_OPTIONS_INIT - an initialiser with the defaults (in C++
 * too, as a call to taxi_lf_bound_options_init). */
TAXI__OPTIONS_DEFAULT(taxi_lf_bound_options_t, taxi_lf_bound_options_init)
#define TAXI_LF_BOUND_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_lf_bound_options_t, taxi_lf_bound_options_init)

/*
 * taxi_lf_bound_create - a table of expected replies whose waiters take
 * part in pool p.  `opts`: NULL for the defaults; a structure not set by an
 * initialiser (size too small), or naming fields this version does not
 * know with non-zero values, is TAXI_EINVAL.  Returns 0 and sets *out,
 * TAXI_EINVAL (NULL out or p, p destroyed, bad opts, buckets above 2^24),
 * TAXI_ENOMEM.  The caller owns it and destroys it before the pool.  Any
 * thread.
 */
TAXI_EXTERN int taxi_lf_bound_create(taxi_lf_bound_t **out, taxi_lf_pool_t *p,
                                     const taxi_lf_bound_options_t *opts);

/* taxi_lf_bound_expect - as taxi_lf_mux_expect(), on table b. */
TAXI_EXTERN int taxi_lf_bound_expect(taxi_lf_bound_t *b, taxi_lf_expect_t *e);

/*
 * taxi_lf_bound_deliver - the reply `id` came: copy body[0..len) into the
 * record expecting it (at most its cap bytes) and wake the thread
 * awaiting it, that one only; the record is then no longer registered.
 * Returns 0, TAXI_ENOENT (no record expects id: a late, forgotten or
 * unknown reply, which is the caller's to handle), TAXI_EINVAL (b NULL,
 * body NULL with len > 0).  Any thread, a hook of the pool included;
 * never blocks but for the pool's lock.
 */
TAXI_EXTERN int taxi_lf_bound_deliver(taxi_lf_bound_t *b, uint64_t id,
                                      const void *body, size_t len);

/* taxi_lf_bound_await - as taxi_lf_mux_await(), on table b (TAXI_EBUSY
 * only from the pool's on_error callback, or when another thread awaits
 * e). */
TAXI_EXTERN int taxi_lf_bound_await(taxi_lf_bound_t *b, taxi_lf_expect_t *e,
                                    int timeout_ms);

/* taxi_lf_bound_forget - as taxi_lf_mux_forget(), on table b. */
TAXI_EXTERN int taxi_lf_bound_forget(taxi_lf_bound_t *b, taxi_lf_expect_t *e);

/*
 * taxi_lf_bound_fail - end table b with `code` (negative): every thread
 * awaiting on it returns `code`, and so does every later expect.  What a
 * transport calls when it can deliver no more (the first code stays).
 * Returns 0, or TAXI_EINVAL (NULL, code >= 0).
 */
TAXI_EXTERN int taxi_lf_bound_fail(taxi_lf_bound_t *b, int code);

/*
 * taxi_lf_bound_destroy - end the table (TAXI_ECANCELED for those still
 * awaiting), wait until they have returned, and free it.  Returns 0 or
 * TAXI_EINVAL.  Threads: not one awaiting on b; no other call may be
 * started on b once it is called.
 */
TAXI_EXTERN int taxi_lf_bound_destroy(taxi_lf_bound_t *b);

/* ---- a multiplexed connection --------------------------------------------
 */

/* A complete frame at the front of the bytes read, as the parse hook
 * reports it. */
typedef struct taxi_lf_frame {
  size_t size;     /* bytes of the whole frame (> 0), consumed */
  uint64_t id;     /* the id of the request it answers */
  size_t body;     /* offset of the reply's body in the frame */
  size_t body_len; /* its length; body + body_len <= size */
} taxi_lf_frame_t;

/*
 * The parse hook: look at the `len` bytes read and not yet consumed
 * (`data`), and return 1 with *frame filled for the complete frame at
 * their front, 0 if more bytes are needed, or a negative TAXI_E* code
 * for bytes that make no sense (the connection is then closed with that
 * code).  A frame that reports sizes out of range is TAXI_EINVAL.  Runs
 * in the thread reading the connection, without taxi's locks; it must not
 * await or send on this connection (TAXI_EBUSY).
 */
typedef int (*taxi_lf_parse_fn)(void *arg, const void *data, size_t len,
                                taxi_lf_frame_t *frame);

/*
 * The unknown-id hook: a reply came whose id no record expects (it never
 * was, it was forgotten, or its await timed out: a late reply).  `body` is
 * valid during the call only.  Runs like the parse hook (TAXI_EBUSY for
 * await and send on this connection).
 */
typedef void (*taxi_lf_unknown_fn)(void *arg, uint64_t id, const void *body,
                                   size_t len);

/* Options for taxi_lf_mux_create(): start from TAXI_LF_MUX_OPTIONS_INIT or
 * taxi_lf_mux_options_init(), then set what differs. */
typedef struct taxi_lf_mux_options {
  size_t size;                /* set by the initialisers */
  taxi_lf_parse_fn parse;     /* required */
  taxi_lf_unknown_fn unknown; /* required: no reply is dropped unseen */
  void *arg;                  /* passed to both hooks */
  /* Bytes of the read buffer: the largest frame.  0: 64 KiB.  A frame
   * that does not fit closes the connection with TAXI_EMSGSIZE. */
  size_t read_buffer;
  /* Rows of the table of expected ids (rounded up to a power of two).
   * 0: 256.  A row holds any number of records; more rows, shorter
   * searches. */
  unsigned buckets;
} taxi_lf_mux_options_t;

/* taxi_lf_mux_options_init - the defaults (every field 0 or NULL, size
 * set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_lf_mux_options_init(taxi_lf_mux_options_t *o);

/* TAXI_LF_MUX_OPTIONS_INIT - an initialiser with the defaults, as
 * taxi_lf_mux_options_init() sets them. */
TAXI__OPTIONS_DEFAULT(taxi_lf_mux_options_t, taxi_lf_mux_options_init)
#define TAXI_LF_MUX_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_lf_mux_options_t, taxi_lf_mux_options_init)

/*
 * taxi_lf_mux_create - make a multiplexed connection over `handle` (a
 * connected, non-blocking stream socket), registered with reactor r for
 * reading.  r must be the reactor pool p dispatches.
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL, no parse or unknown
 * hook, bad options, p destroyed, r not p's reactor), TAXI_ENOMEM, or what
 * taxi_reactor_register() returns (TAXI_EBADF, TAXI_EEXIST, ...).
 * Ownership: the caller owns the mux and destroys it (before the pool);
 * the mux owns the handle from a successful call on and closes it when
 * the connection closes.  On failure the handle stays the caller's.
 */
TAXI_EXTERN int taxi_lf_mux_create(taxi_lf_mux_t **out, taxi_lf_pool_t *p,
                                   taxi_reactor_t *r, taxi_handle_t handle,
                                   const taxi_lf_mux_options_t *opts);

/*
 * taxi_lf_mux_expect - register record e (see taxi_lf_expect_init) to take
 * the reply with id e->id.  Call it before sending the request.
 * Returns 0, TAXI_EINVAL (NULL), TAXI_EBUSY (e is registered already),
 * TAXI_EEXIST (another record expects that id on this connection), or the
 * error that closed the connection.
 */
TAXI_EXTERN int taxi_lf_mux_expect(taxi_lf_mux_t *m, taxi_lf_expect_t *e);

/*
 * taxi_lf_mux_send - write data[0..len) as one whole: the writes of
 * several threads never interleave.  A partial write is finished before
 * the next sender's starts; meanwhile the sender waits for the socket to
 * take more by taking part in the pool (it never spins).  timeout_ms (-1:
 * none) bounds the whole call: a time-out before the first byte leaves
 * the connection as it was (TAXI_ETIMEDOUT); one in the middle of the
 * data closes the connection (its stream would be cut) with
 * TAXI_ETIMEDOUT.
 * Returns 0, TAXI_EINVAL (NULL m, data NULL with len > 0), TAXI_EBUSY
 * (from the connection's own hooks, or from a hook run while this thread
 * sends on it; from the pool's on_error callback when the socket is full,
 * which closes the connection if part of the data went), TAXI_ETIMEDOUT,
 * or the error that closed the connection (a write error closes it).
 */
TAXI_EXTERN int taxi_lf_mux_send(taxi_lf_mux_t *m, const void *data, size_t len,
                                 int timeout_ms);

/*
 * taxi_lf_mux_await - wait for the reply record e expects, at most
 * timeout_ms (-1: no limit; 0: only look), taking part in the pool
 * meanwhile (see "Hybrid" above).  On return e is no longer registered
 * and may be expected again.
 * Returns the reply body's length (copied into e->buf), or:
 *   TAXI_EMSGSIZE   the body was longer than e->cap (e->length says how
 *                   long; e->cap bytes were copied; the connection is
 *                   fine);
 *   TAXI_ETIMEDOUT  no reply in time: the registration is removed, and a
 *                   reply coming later goes to the unknown-id hook;
 *   TAXI_ENOENT     e is not registered with m;
 *   TAXI_EINVAL     NULL;
 *   TAXI_EBUSY      from the connection's own hooks or the pool's
 *                   on_error callback (it would wait for itself), or
 *                   another thread awaits e (e stays registered);
 *   TAXI_ESTOPPED   the pool stopped first (e is no longer registered);
 *   the error that closed the connection (or TAXI_ECANCELED: destroyed).
 */
TAXI_EXTERN int taxi_lf_mux_await(taxi_lf_mux_t *m, taxi_lf_expect_t *e,
                                  int timeout_ms);

/*
 * taxi_lf_mux_forget - give up on record e: it is no longer registered
 * (a reply coming later goes to the unknown-id hook; one that came already
 * stays in e->buf).  Returns 0, TAXI_EINVAL (NULL), TAXI_ENOENT (e is not
 * registered with m), TAXI_EBUSY (a thread awaits e).
 */
TAXI_EXTERN int taxi_lf_mux_forget(taxi_lf_mux_t *m, taxi_lf_expect_t *e);

/*
 * taxi_lf_mux_error - 0 while the connection is open, else the error that
 * closed it.  TAXI_EINVAL for NULL.
 */
TAXI_EXTERN int taxi_lf_mux_error(taxi_lf_mux_t *m);

/*
 * taxi_lf_mux_destroy - close the connection if it is open (every thread
 * awaiting or sending on it returns TAXI_ECANCELED), wait until they have
 * returned and the handle's close hook has run, and free the mux.
 * Returns 0, TAXI_EINVAL (NULL), TAXI_EBUSY (from the connection's own
 * hooks).  Threads: any but those; no other call may be started on m once
 * it is called.
 */
TAXI_EXTERN int taxi_lf_mux_destroy(taxi_lf_mux_t *m);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_LF_BOUND_H */
