/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_impl.h - the I/O context, its streams, listeners and timers,
 * as the files of the stream layer share them.
 *
 * The wing holds, from the bottom up (a file calls by name only the files
 * listed before it, and the wings below: pools, proactor, reactor, common,
 * and the ports; so no two files call each other, even through a third):
 *
 *   io_options.c   the context's options, what `threads` means, spans;
 *   stream_owner.c the refusal of a call from a thread that does not own
 *                  a TAXI_IO_ONE_THREAD context (its checks and a
 *                  stream's lock: stream_lock.h, inline);
 *   address.c      address strings;
 *   host_names.c   "host:port", and the order of a name's addresses;
 *   post.c         the records of posted functions, and running or
 *                  cancelling the queues of the context, a stream, a
 *                  listener;
 *   io_lists.c     the context's lists of streams, listeners, timers,
 *                  the free list of stream blocks, and the datagram
 *                  endpoints;
 *   io_reactive.c  the driver over a reactor (reactor, lf, hsha);
 *   io_pooled.c    a proactive stream's reads through the proactor's pool
 *                  of buffers (io_uring's provided buffers);
 *   dgram_proactive.c  datagram endpoints over a proactor (the driver's
 *                  part, reached through io_proactive.c's table);
 *   io_proactive.c the driver over a proactor (proactor, proactors);
 *   io_run.c       running, stopping, waiting; the wake-up socket pair,
 *                  the error reports of what the context made;
 *   io_signal.c    signals;
 *   io_info.c      what the context is made of, and its counters;
 *   tls_openssl.c  the TLS engine over OpenSSL (core/stream/tls_engine.h);
 *   tls_context.c  TLS contexts (taxi/tls.h), the engine built in;
 *   stream_tls.c   a TLS stream's filter between the state machine and
 *                  the driver, and what it tells (taxi_tls_info);
 *   stream.c       a stream's state machine, written once, and its close;
 *   io_timer.c     application timers;
 *   stream_settings.c  a stream's options, settings and what it tells;
 *   stream_read.c  the application's reads (read_start, read_into);
 *   stream_write.c its writes, sendfile, shutdown and end;
 *   stream_connect.c  a stream connecting to one address;
 *   listener.c     listeners (sharded ones too), and the hand-over of
 *                  accepted sockets;
 *   stream_pipe.c  relaying one stream into another;
 *   stream_post.c  posting functions to the context, a stream, a listener;
 *   resolver.c     resolving names in the resolver threads;
 *   resolve.c      taxi_resolve, its options;
 *   stream_dial.c  connecting to a name: its addresses raced;
 *   stream_make.c  taxi_stream_connect, and streams of sockets one has;
 *   dgram.c        datagram endpoints (core/stream/dgram_impl.h);
 *   io.c           the context's creation and destruction.
 *
 * The other way goes through function pointers only:
 *
 *   - the driver table (taxi__io_driver_t, below), which io.c chooses:
 *     what the context, the state machine, listeners and timers ask of the
 *     driver (the drivers sit low, but are reached through it only);
 *   - the ops records: what a driver reports (an I/O event, an accepted
 *     connection, a timer that fired, the wake-up socket) goes to the
 *     context's io->ops (installed by io.c), a stream's s->ops (stream.c),
 *     a listener's l->ops (listener.c) or a timer's t->ops (io_timer.c),
 *     each installed by the file that makes the object.
 *     The `close` hook of each is how taxi_io_destroy closes what is left
 *     on the context's lists, without knowing what they are;
 *   - a stream's pipe_ops (stream_pipe.c, set with the pipe): what the
 *     state machine tells a pipe (drained, closing);
 *   - a dialing stream's dial_ops (stream_dial.c, set with the dial): the
 *     state machine's rounds run the race of a name's addresses.
 *
 * The layer uses only the public Reactor, pool and Proactor API (and the
 * internal interfaces their headers declare) and the ports (port.h,
 * sock.h): it could live outside the library.  A driver turns what its
 * dispatcher reports into stream events (s->ops->event) and performs the
 * transfers a stream asks for; the state machine does not know which
 * driver runs it.  An event costs the driver an indirect call where it
 * had a direct one: no allocation, no lock more.
 *
 * Serialisation.  A stream's callbacks must not overlap, but its events
 * may arrive in several threads at once (a reactor's timer hooks are not
 * serialised with its I/O hooks; a proactor's read and write completions
 * may run together).  Each event takes the stream's lock and, if no thread
 * is processing the stream, becomes the one that does (S_BUSY): it loops
 * until no event is pending, releasing the lock around each callback.
 * Events that find the stream busy only record themselves (pending bits)
 * for that thread.  The lock is never held while a callback runs.  A
 * stream of a TAXI_IO_ONE_THREAD context takes no lock
 * (taxi__stream_lock): its events all come from the one thread that runs
 * the dispatcher, which is also the only one whose calls are let in
 * (taxi__stream_foreign), so the same steps run one after the other.
 */
#ifndef TAXI_CORE_IO_IMPL_H
#define TAXI_CORE_IO_IMPL_H

#include <stddef.h>

#include "taxi/io.h"
#include "taxi/stream.h"
#include "taxi/resolve.h"

#include "core/common/backoff.h"
#include "port.h"
#include "sock.h"

/* ---- posts ----------------------------------------------------------------
 */

/* A function posted to a stream, listener or context (core/stream/post.c). */
typedef struct taxi__post {
  struct taxi__post *next;
  union {
    taxi_stream_post_fn s;
    taxi_listener_post_fn l;
    taxi_io_post_fn io;
  } fn;
  void *arg;
} taxi__post_t;

/* A relay from one stream into another (core/stream/stream_pipe.c). */
typedef struct taxi__pipe taxi__pipe_t;

/* Posts waiting, oldest first (under the lock of their object). */
typedef struct taxi__post_queue {
  taxi__post_t *head, *tail;
} taxi__post_queue_t;

/* ---- drivers --------------------------------------------------------------
 */

typedef struct taxi__io_driver {
  int (*open)(taxi_io_t *io); /* watch the wake-up socket */
  void (*close)(taxi_io_t *io);
  /* Dispatch in the calling thread for at most timeout_ms (destroy). */
  int (*dispatch)(taxi_io_t *io, int timeout_ms);
  int (*add_signal)(taxi_io_t *io, int signo);
  int (*remove_signal)(taxi_io_t *io, int signo);

  /* Streams.  All but teardown are called with the stream's lock held.
   * home: the proactor the handle is attached to already (an accepted
   * one), else NULL; stay: it is to stay there rather than go where the
   * group's spread says (accepted by a member of a sharded listener). */
  int (*stream_open)(taxi_stream_t *s, taxi_proactor_t *home, bool stay);
  /* Into s->rbuf: bytes (> 0), 0 at end of stream, TAXI_EAGAIN (an event
   * will come), or an error.  Called only once s->rlen is 0.  The bytes
   * are at s->rdata, which the driver may point at a buffer of its own
   * (lent until read_settle, or the next read). */
  int64_t (*read)(taxi_stream_t *s);
  /* The queue's head: bytes done, TAXI_EAGAIN (an event will come), or an
   * error.  A proactive driver starts the operation and returns the
   * result when the same head is offered again after its completion. */
  int64_t (*write)(taxi_stream_t *s, const taxi_buf_t *bufs, size_t n);
  int64_t (*sendfile)(taxi_stream_t *s, taxi_handle_t file, int64_t offset,
                      size_t len);
  int (*connect_start)(taxi_stream_t *s, const taxi_addr_t *a);
  /* A dialing stream (opened without a handle) has its connected handle
   * in s->fd now: take it (NULL: nothing to do).  0 or an error. */
  int (*adopt)(taxi_stream_t *s);
  /* 0 connected, TAXI_EAGAIN not yet, or the error. */
  int (*connect_result)(taxi_stream_t *s);
  void (*update)(taxi_stream_t *s); /* interest to match the state */
  void (*defer)(taxi_stream_t *s);  /* an I/O event found it busy */
  int (*kick)(taxi_stream_t *s);    /* an event soon, in a dispatcher */
  void (*arm)(taxi_stream_t *s, taxi_time_t deadline);
  /* Released for a detach: bytes a completed read brought in go to rbuf
   * (NULL: reads complete only in a round). */
  void (*unread)(taxi_stream_t *s);
  /* The state machine stops delivering for now (`reading`: it will call
   * read again when an event comes; else it is paused or not reading):
   * bytes left at s->rdata in a buffer the driver lent are copied into
   * rbuf, the lent buffer given back (NULL: read always fills rbuf). */
  void (*read_settle)(taxi_stream_t *s, bool reading);
  /* The close or detach callback has run: give back whatever the driver
   * still holds for reads (NULL: nothing). */
  void (*read_forget)(taxi_stream_t *s);
  /* Closing: the result of an output operation that completed and was
   * not yet taken (bytes, or its error), TAXI_EBUSY while one is still in
   * flight, TAXI_EAGAIN when there is none; starts nothing (NULL: writes
   * complete only in a round). */
  int64_t (*written)(taxi_stream_t *s);
  /* Lock not held: stop every source of events; P_RELEASED follows when
   * none can come any more (and the handle is closed). */
  void (*teardown)(taxi_stream_t *s);
  unsigned max_bufs; /* buffers one write takes */
  /* The teardown closes a handle of the stream's own at once (or once the
   * hooks running in other threads return), so for taxi_stream_end the
   * close sends the FIN after the queued bytes and no shutdown is needed.
   * Not so where operations in flight keep the socket open (a Proactor's
   * close waits for their cancellation). */
  bool closes_at_teardown;
  /* Its sends return at once (a readiness driver): the stream corks the
   * socket while a file is queued (see cork_locked in stream.c).  Not a
   * Proactor's, whose sends are in flight when writes_locked returns. */
  bool corks_files;
  /* Its write may be called by any thread holding the stream's lock, not
   * only by a round, and returns at once (a readiness driver): a write
   * into an empty queue is sent by taxi_stream_write itself (see
   * send_now_locked in stream_write.c). */
  bool writes_anywhere;

  /* Listeners.  A sharded listener (TAXI_LISTEN_SHARDED) has one member,
   * with a socket of its own, per what listener_members says (a group's
   * proactors; 1 where the dispatcher is one); listener_open starts
   * member `index` (0: the listener the application has). */
  unsigned (*listener_members)(taxi_io_t *io);
  int (*listener_open)(taxi_listener_t *l, unsigned index);
  void (*listener_close)(taxi_listener_t *l); /* lock not held */
  /* Stop (hold true) or start again accepting on l, as the application
   * asked (taxi_listener_pause/resume): 0 or an error.  Lock not held. */
  int (*listener_hold)(taxi_listener_t *l, bool hold);
  /* Have taxi__listener_run_posts(l) called soon in a dispatching thread,
   * where the release of l waits for it: 0 or an error.  Lock held. */
  int (*listener_post)(taxi_listener_t *l);

  /* Application timers. */
  int (*timer_start)(taxi_io_timer_t *t, taxi_time_t delay, taxi_time_t period);
  int (*timer_stop)(taxi_io_timer_t *t);
  void (*timer_destroy)(taxi_io_timer_t *t);

  /* The bytes of taxi_stream_t its streams use: up to the end of its
   * member of the union d (a stream's block holds no more). */
  size_t stream_size;

  /* Datagram endpoints (core/stream/dgram_impl.h); NULL: none here. */
  const struct taxi__dgram_driver *dgram;
} taxi__io_driver_t;

extern const taxi__io_driver_t taxi__io_reactive;

/* A proactive stream's pooled reads (core/stream/io_pooled.c), for
 * io_proactive.c; the stream's lock held.  open: before the first read;
 * done: a completion of rop; read, settle, unread, forget: the driver's
 * read, read_settle, unread, read_forget for a pooled stream (read arms
 * rop with fn as its handler). */
void taxi__pooled_open(taxi_stream_t *s);
void taxi__pooled_done_locked(taxi_stream_t *s, taxi_op_t *op, int status,
                              size_t bytes);
int64_t taxi__pooled_read(taxi_stream_t *s, taxi_completion_fn fn);
void taxi__pooled_settle(taxi_stream_t *s, bool reading);
void taxi__pooled_unread(taxi_stream_t *s);
void taxi__pooled_forget(taxi_stream_t *s);
extern const taxi__io_driver_t taxi__io_proactive;

/* ---- what the drivers report, and the context closes ----------------------
 *
 * One record per kind of object, static and constant, installed by the
 * file that makes the object before any driver or list may see it; the
 * drivers and taxi_io_destroy read it without a lock.
 */

/* The context's: installed by io.c at taxi_io_create. */
typedef struct taxi__io_ops {
  /* The wake-up socket became readable (in a dispatching thread). */
  void (*woken)(taxi_io_t *io);
  /* Signal signo arrived (in a dispatching thread). */
  void (*signal)(taxi_io_t *io, int signo);
} taxi__io_ops_t;

/* A stream's (stream.c). */
typedef struct taxi__stream_ops {
  /* Close s with `reason` (0: asked by the application); TAXI_EBADF when
   * closing already.  The context's lock may be held. */
  int (*close)(taxi_stream_t *s, int reason);
  /* Something happened to s (TAXI__P_* bits): see "Serialisation". */
  void (*event)(taxi_stream_t *s, unsigned bits);
  /* The same with s's lock held, which it releases. */
  void (*event_locked)(taxi_stream_t *s, unsigned bits);
} taxi__stream_ops_t;

/* A listener's (listener.c). */
typedef struct taxi__listener_ops {
  /* Close l (taxi_listener_close); lock not held. */
  int (*close)(taxi_listener_t *l);
  /* A connection was accepted on l: make its stream and hand it over.
   * home: the proactor fd is attached to (NULL: none). */
  void (*accepted)(taxi_listener_t *l, taxi_handle_t fd,
                   const taxi_addr_t *peer, taxi_proactor_t *home);
  /* Accepting failed with rc: count it; returns how long to pause. */
  taxi_time_t (*failed)(taxi_listener_t *l, int rc);
  /* Accepting worked again: the next pause starts short. */
  void (*recovered)(taxi_listener_t *l);
  /* Nothing of l can run any more: its posts cancelled, on_close, then
   * free. */
  void (*released)(taxi_listener_t *l);
  /* Run the functions posted to l, as the driver's listener_post asked. */
  void (*run_posts)(taxi_listener_t *l);
} taxi__listener_ops_t;

/* A timer's (io_timer.c). */
typedef struct taxi__timer_ops {
  /* Destroy t (taxi_io_timer_destroy); lock not held. */
  int (*close)(taxi_io_timer_t *t);
  /* Run t's callback (counts it). */
  void (*fire)(taxi_io_timer_t *t);
  /* Unlink and free t (nothing of it runs any more). */
  void (*free)(taxi_io_timer_t *t);
} taxi__timer_ops_t;

/* What the state machine tells the pipes of a stream (stream_pipe.c sets
 * s->pipe_ops with s->pipe_src or s->pipe_dst, under s's lock; it stays).
 * Both are called with the lock held, which they let go meanwhile. */
typedef struct taxi__pipe_ops {
  /* s is down to its low watermark with S_PIPE_DRAIN set: its pipe_dst
   * may read again. */
  void (*drained_locked)(taxi_stream_t *s);
  /* s is closing: its pipes end, closing the other streams. */
  void (*closing_locked)(taxi_stream_t *s);
} taxi__pipe_ops_t;

/* What the state machine asks of the race of a dialing stream
 * (stream_dial.c sets s->dial_ops with s->dial, before the stream's first
 * round; it stays).  Both with s's lock held, let go around the calls out. */
typedef struct taxi__dial_ops {
  /* A round of s while dialing: 0 when s has its connected socket now,
   * TAXI_EAGAIN (s->dial_at says when to come back), or the error that
   * ends the connect. */
  int (*round_locked)(taxi_stream_t *s, taxi_time_t now);
  /* s is closing or released: the race is abandoned. */
  void (*abandon_locked)(taxi_stream_t *s);
} taxi__dial_ops_t;

/* ---- the context ----------------------------------------------------------
 */

#define TAXI__IO_SIGNALS 128

struct taxi_io {
  taxi_io_dispatcher_t kind;
  const taxi__io_driver_t *drv;
  const taxi__io_ops_t *ops;
  unsigned threads;
  taxi_lf_options_t lf_opts;
  taxi_hsha_options_t hsha_opts;
  taxi_reactor_t *reactor;
  taxi_proactor_t *proactor;             /* with a group: its first */
  taxi_proactor_group_t *group;          /* proactors */
  taxi_lf_pool_t *lf;                    /* while running, or supplied */
  taxi_hsha_pool_t *hsha;                /* while running, or supplied */
  _Atomic(taxi_hsha_pool_t *) hsha_live; /* for the stop from a worker */
  bool own_reactor, own_proactor, own_group, own_lf, own_hsha;
  /* TAXI_IO_ONE_THREAD: the thread that owns the context and its streams
   * (the one that made it), whose streams take no lock.  Set at creation,
   * never changed. */
  bool one_thread;
  taxi__thread_id_t owner;
  /* The size of the buffers of the pool the context gave its own
   * proactors (0: none; io.c): streams reading at least that much at a
   * time read through it where the backend picks the buffers. */
  size_t pool_size;

  taxi__mutex_t lock;     /* the state below and the lists */
  taxi__cond_t cond;      /* stopped, run returned, an object released */
  bool running;           /* a thread is in taxi_io_run */
  bool stop_done;         /* the dispatcher was told to stop */
  bool failed;            /* a pool stopped by itself, on a failure */
  taxi_error_fn on_error; /* the application's, from the options */
  void *on_error_arg;
  taxi_error_fn hsha_on_error; /* the pool's own, if the options had one */
  void *hsha_on_error_arg;
  bool destroying;
  int first_error;
  atomic_int stop_requested;

  /* The wake-up socket pair: taxi_io_stop writes to [1]; the dispatcher
   * watches [0]. */
  taxi_handle_t wake[2];
  atomic_int wake_pending;
  unsigned char wake_buf[64];
  taxi_handler_t wake_h; /* reactive */
  taxi_op_t wake_op;     /* proactive */
  /* The read of wake[0] is in flight.  Atomic: under a pool its
   * completions run in any thread, ordered by the proactor through the
   * kernel's ring, which a race detector cannot see. */
  atomic_bool wake_reading;
  /* proactors: the destroying thread runs the group until every stream,
   * listener and timer is gone; this timer, on the first proactor, looks
   * every 10 ms and stops the group then (or at give_up). */
  taxi_op_t drain_op;
  taxi_time_t drain_give_up;

  /* Signals: the callbacks, and (proactive) those added to the proactor. */
  struct {
    taxi_io_signal_fn fn;
    void *arg;
  } sig[TAXI__IO_SIGNALS];
  taxi_handler_t sig_h;             /* reactive */
  bool sig_added[TAXI__IO_SIGNALS]; /* proactive */

  taxi_stream_t *streams;
  taxi_listener_t *listeners;
  taxi_io_timer_t *timers;
  /* Blocks of released streams kept for the next stream of the same size
   * (core/stream/io_lists.c), under lock: a connection per request then
   * costs no allocation once the context has warmed up. */
  struct taxi__stream_block *spare;
  unsigned nspare;
  size_t spare_bytes;
  struct taxi_dgram *dgrams; /* core/stream/dgram.c */

  /* Posts (core/stream/post.c): the records free for reuse and the context's
   * own queue, under post_lock; cb_lock is held while a function posted to the
   * context or a signal callback runs, which serialises them. */
  taxi__mutex_t post_lock, cb_lock;
  taxi__post_t *post_free;
  taxi__post_queue_t posts;
  /* taxi_io_destroy has begun (destroying, without the lock): posts are
   * refused. */
  atomic_int ending;

  /* Name resolution (core/stream/resolver.c): the options, and the
   * resolver made at the first name (under lock; freed by the last of the
   * context and its threads). */
  unsigned resolve_threads, resolve_queue;
  taxi_resolve_hook_fn resolve_hook;
  void *resolve_hook_arg;
  struct taxi__resolver *resolver;

  /* The counters that are not per message, added to by any thread. */
  struct {
    atomic_ullong streams_opened, streams_closed, accepts, accept_errors,
        accept_pauses, connects, connect_errors, timeouts, timers,
        streams_reused, streams_allocated;
  } stats;
  /* The per-message counters (bytes_in, bytes_out, reads, writes,
   * writes_refused, read_pauses) of the streams gone from the list, under
   * lock: each stream counts in its own counters only (TAXI__S_COUNT), and
   * adds them here as it leaves the list, so that a message writes no line
   * that the context's other threads write too; taxi_io_stats adds the
   * streams still listed (taxi__io_stream_totals). */
  taxi_stream_counters_t retired;
};

#define TAXI__IO_COUNT(io, field, n) \
  atomic_fetch_add_explicit(&(io)->stats.field, (n), memory_order_relaxed)
/* Count for stream s (taxi_stream_counters, and the context's totals
 * through it: see retired above), s's lock held.  A stream's counters
 * have no writer but the holder of its lock, so a load and a store add to
 * them: no locked read-modify-write (tens of cycles each, four per echoed
 * message).  Readers without the lock still see whole values. */
#define TAXI__S_COUNT(s, field, n)                                       \
  atomic_store_explicit(                                                 \
      &(s)->cnt.field,                                                   \
      atomic_load_explicit(&(s)->cnt.field, memory_order_relaxed) + (n), \
      memory_order_relaxed)

/* Running and stopping (core/stream/io_run.c).  The wake-up socket became
 * readable (in a dispatching thread; the driver calls it as io->ops->woken):
 * the context's posts run, and a stop asked for is carried out. */
void taxi__io_woken(taxi_io_t *io);
/* Make the dispatcher call taxi__io_woken soon: a byte on the wake-up
 * socket unless one is pending.  0, or the code of a failed send (the
 * next kick tries again).  Async-signal-safe. */
int taxi__io_kick(taxi_io_t *io);
/* The error callback of what the context makes for itself: tells the
 * application's, and a fatal report ends taxi_io_run.  arg: the context. */
void taxi__io_on_error(const taxi_error_report_t *r, void *arg);
/* The same for the half-sync/half-async pool whose options named a
 * callback of the application's (io->hsha_on_error): tells that one. */
void taxi__io_hsha_on_error(const taxi_error_report_t *r, void *arg);
/* A helper thread of the context failed for good (`code`, reported
 * already): the run ends with that code. */
void taxi__io_fail(taxi_io_t *io, int code);
/* Signal signo arrived (in a dispatching thread; the driver calls it as
 * io->ops->signal): its callback runs (core/stream/io_signal.c). */
void taxi__io_signal(taxi_io_t *io, int signo);
/* Add to / take from the context's lists (TAXI_ESTOPPED when destroying).
 * Taking wakes taxi_io_destroy (core/stream/io_lists.c).  The object's ops
 * are set before it is linked: taxi_io_destroy closes it through them. */
int taxi__io_link_stream(taxi_io_t *io, taxi_stream_t *s);
/* Unlinking a stream adds its per-message counters to the context's
 * retired totals, under the list's lock: nothing may count for s after
 * (it is closed: its close callback has run, or it never started). */
void taxi__io_unlink_stream(taxi_io_t *io, taxi_stream_t *s);
/* The context's per-message counters into out (bytes_in, bytes_out,
 * reads, writes, writes_refused, read_pauses; the rest untouched): the
 * retired totals plus the counters of every listed stream, summed under
 * the list's lock, so that a stream leaving meanwhile counts once.
 * O(streams listed).  Any thread; not with the list's lock held. */
void taxi__io_stream_totals(taxi_io_t *io, taxi_io_stats_t *out);
int taxi__io_link_listener(taxi_io_t *io, taxi_listener_t *l);
void taxi__io_unlink_listener(taxi_io_t *io, taxi_listener_t *l);
/* A block of `size` bytes for a new stream: a spare one of that size, or
 * a new one (NULL: out of memory); counted as reused or allocated. */
void *taxi__io_stream_block(taxi_io_t *io, size_t size);
/* Unlink s (as taxi__io_unlink_stream), destroy its lock and keep its
 * block (s->block bytes) among the spares, or free it when they are
 * full.  Nothing of s may run or be reached any more but through the
 * context's list (what taxi_io_destroy walks, under the lock). */
void taxi__io_retire_stream(taxi_io_t *io, taxi_stream_t *s);
/* Free the spare blocks (taxi_io_destroy). */
void taxi__io_spares_free(taxi_io_t *io);
int taxi__io_link_timer(taxi_io_t *io, taxi_io_timer_t *t);
void taxi__io_unlink_timer(taxi_io_t *io, taxi_io_timer_t *t);
/* Split "host:port" of a name (core/stream/resolve.c): host into
 * host[TAXI_RESOLVE_NAME_MAX + 1], the port into *port.  0, or
 * TAXI_EBADADDR with a detail naming `who` (no port, a bad port, an empty,
 * too long or malformed host, brackets around something not an IPv6
 * address, an IPv6 address without brackets, a Unix-domain address). */
int taxi__host_port_split(const char *text, char *host, unsigned *port,
                          const char *who);
/* Read the resolver's options (resolve_*) into io: 0, or TAXI_EINVAL
 * with its detail (core/stream/resolve.c). */
int taxi__io_resolve_options(taxi_io_t *io, const taxi_io_options_t *o);
/* taxi_io_destroy: at its start, cancel every resolution (their callbacks
 * posted with TAXI_ECANCELED) and let the resolver threads go; at its
 * end, the context's hold on the resolver (core/stream/resolver.c). */
void taxi__resolver_close(taxi_io_t *io);
void taxi__resolver_release(taxi_io_t *io);
/* Check a time span option: 0 or TAXI_EINVAL. */
int taxi__io_span_check(taxi_time_t span);
/* The caller's options `in` (NULL: the defaults) copied into *o, and the
 * pools' options they point to into io->lf_opts and io->hsha_opts (o->lf
 * and o->hsha are then NULL): 0, or TAXI_EINVAL with its detail
 * (core/stream/io_options.c). */
int taxi__io_options_read(taxi_io_t *io, taxi_io_options_t *o,
                          const taxi_io_options_t *in);
/* Set io->threads from o->threads for io->kind, as taxi_io_options_t
 * says, and check the half-sync/half-async pool's options, which the
 * pool made at taxi_io_run would check: 0, or TAXI_EINVAL with its
 * detail. */
int taxi__io_threads_check(taxi_io_t *io, const taxi_io_options_t *o);
/* Options.flags: TAXI_IO_ONE_THREAD where the dispatcher allows it (after
 * taxi__io_threads_check), the calling thread the owner; or TAXI_EINVAL. */
int taxi__io_one_thread_check(taxi_io_t *io, const taxi_io_options_t *o);

/* Posts (core/stream/post.c).  A record from the free list, or a new one (NULL:
 * out of memory); give it back with taxi__post_put. */
taxi__post_t *taxi__post_get(taxi_io_t *io);
void taxi__post_put(taxi_io_t *io, taxi__post_t *p);
/* Append p to q; take the oldest of q (NULL if empty). */
void taxi__post_push(taxi__post_queue_t *q, taxi__post_t *p);
taxi__post_t *taxi__post_pop(taxi__post_queue_t *q);
/* Whether posts to io and its objects are refused (TAXI_ESTOPPED). */
bool taxi__io_stopping(taxi_io_t *io);
/* The context's posts: set up, run those queued (a dispatching thread: its
 * wake-up), and at taxi_io_destroy cancel what is left (TAXI_ECANCELED),
 * then free the records. */
int taxi__io_posts_init(taxi_io_t *io);
void taxi__io_posts_run(taxi_io_t *io);
/* Post fn(io, status, arg) to io with record p, taken beforehand with
 * taxi__post_get (so that this cannot fail): as taxi_io_post, but also
 * while io is stopped or being destroyed (the record then runs at
 * taxi_io_destroy, with TAXI_ECANCELED if its drain did not run it). */
void taxi__io_post_record(taxi_io_t *io, taxi__post_t *p, taxi_io_post_fn fn,
                          void *arg);
void taxi__io_posts_cancel(taxi_io_t *io);
void taxi__io_posts_fini(taxi_io_t *io);

/* ---- streams --------------------------------------------------------------
 */

/* A stream's state: core/stream/stream_impl.h. */
#include "core/stream/stream_impl.h"

/* Check options (NULL: defaults) and copy them to *out.  A refusal's
 * detail names the field as `where` names the structure (the public
 * function and its path: "taxi_stream_connect: options"). */
int taxi__stream_options(taxi_stream_options_t *out,
                         const taxi_stream_options_t *in, const char *where);
/* A stream of connected socket fd, busy (nothing of it runs) until
 * taxi__stream_start.  home: the proactor that knows fd already (NULL:
 * none), where it stays if `stay` (see the driver's stream_open). */
int taxi__stream_new(taxi_io_t *io, taxi_handle_t fd,
                     const taxi_stream_options_t *o, taxi_proactor_t *home,
                     bool stay, taxi_stream_t **out);
/* Let a new stream run: here (a dispatching thread: the accept path) or,
 * with here false, in a dispatcher (the caller is the application). */
void taxi__stream_start(taxi_stream_t *s, bool here);
/* Connect a new stream to address a (o checked already), as
 * taxi_stream_connect does, with close_fn set from the start (NULL: none
 * until the application sets one). */
int taxi__stream_connect_to(taxi_stream_t **out, taxi_io_t *io,
                            const taxi_addr_t *a,
                            const taxi_stream_options_t *o,
                            taxi_stream_connect_fn fn,
                            taxi_stream_close_fn close_fn, void *arg);
/* Free a stream that never started (its handle is the caller's again). */
void taxi__stream_discard(taxi_stream_t *s);
/* Something happened to s (TAXI__P_* bits); see "Serialisation". */
void taxi__stream_event(taxi_stream_t *s, unsigned bits);
/* The same with s's lock held, which it releases: for a driver that
 * updates its own state and reports the event in one hold of the lock
 * (once it lets go, s may be released by the thread processing it). */
void taxi__stream_event_locked(taxi_stream_t *s, unsigned bits);
/* Close s with `reason` (0: asked by the application): 0, or TAXI_EBADF
 * when it is closing or closed already. */
int taxi__stream_close(taxi_stream_t *s, int reason);
/* Run the functions posted to s before this round (core/stream/post.c),
 * until one closes it; or, closing, each one left with TAXI_ECANCELED.
 * Lock held, let go around each call. */
void taxi__stream_posts_locked(taxi_stream_t *s);
void taxi__stream_posts_cancel_locked(taxi_stream_t *s);
/* Dialing (core/stream/stream_dial.c).  Start the race of host:port's
 * addresses for s, a stream made without a socket (S_DIALING, before its
 * start): 0 or an error (then s is the caller's to discard).  It sets
 * s->dial_ops, through which the state machine runs the race. */
int taxi__dial_start(taxi_stream_t *s, const char *host, unsigned port,
                     const taxi_stream_options_t *o);
/* The flags of a stream that is closing or closed: calls refuse it. */
#define TAXI__S_CLOSED (TAXI__S_CLOSE_REQ | TAXI__S_CLOSING | TAXI__S_DEAD)
/* Its lock, and who may take it: core/stream/stream_lock.h. */
#include "core/stream/stream_lock.h"

/* Take the lock of an open stream: 0, or TAXI_EINVAL (NULL) / TAXI_EPERM
 * (another thread's stream: TAXI_IO_ONE_THREAD) / TAXI_EBADF (closing or
 * closed; then the lock is not held).  Inline, with the request below:
 * every write and read call of the application starts with them
 * (core/stream/stream_write.c, stream_read.c). */
static inline int taxi__stream_lock_open(taxi_stream_t *s, const char *who) {
  int rc = taxi__stream_lock_api(s, who);
  if (rc < 0) return rc;
  if (s->flags & TAXI__S_CLOSED) {
    taxi__stream_unlock(s);
    return TAXI_EBADF;
  }
  return 0;
}
/* A kick through the dispatcher for a round of s (lock held, s not being
 * processed). */
void taxi__stream_kick_locked(taxi_stream_t *s);
/* Ask for a processing round of s (lock held): the thread processing s
 * does it (a write from its own callback: the common case, inline), else
 * a kick through the dispatcher. */
static inline void taxi__stream_request_locked(taxi_stream_t *s) {
  if (s->flags & TAXI__S_BUSY)
    s->pending |= TAXI__P_WORK;
  else
    taxi__stream_kick_locked(s);
}
/* The same for a write queued, which changes nothing else: see
 * TAXI__P_WROTE. */
static inline void taxi__stream_wrote_locked(taxi_stream_t *s) {
  if (s->flags & TAXI__S_BUSY)
    s->pending |= TAXI__P_WROTE;
  else
    taxi__stream_kick_locked(s);
}

/* TLS streams (core/stream/stream_tls.c).  attach: at the stream's
 * making, from its options (o->tls set): 0, or TAXI_EINVAL (a refusal
 * naming `where`) / TAXI_ENOMEM; detach frees what attach made.  The
 * others with the lock held, in place of the driver's calls of the same
 * names (round: the handshake's steps, at each round; flush: the
 * ciphertext waiting, 0 once it is all out; shutdown: the close_notify,
 * 0 once out).  A failure closes the stream (reason set) and returns
 * its error. */
int taxi__tls_attach(taxi_stream_t *s, const taxi_stream_options_t *o,
                     const char *where);
void taxi__tls_detach(taxi_stream_t *s);
void taxi__tls_round_locked(taxi_stream_t *s);
int64_t taxi__tls_read(taxi_stream_t *s);
int64_t taxi__tls_write(taxi_stream_t *s, const taxi_buf_t *bufs, size_t n);
int64_t taxi__tls_sendfile(taxi_stream_t *s, taxi_handle_t file, int64_t off,
                           size_t len);
int64_t taxi__tls_flush(taxi_stream_t *s);
int taxi__tls_shutdown(taxi_stream_t *s);

/* Listeners and application timers: core/stream/listener_impl.h. */
#include "core/stream/listener_impl.h"

#endif /* TAXI_CORE_IO_IMPL_H */
