/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/dgram_impl.h - a datagram endpoint (taxi/dgram.h) as
 * core/stream/dgram.c, the drivers (io_reactive.c) and the context's lists
 * (io_lists.c, io.c) share it.
 *
 * Locks.  `lock` guards the state and the send queue, and is held around
 * every send on the socket (the application's direct sends and the
 * driver's flushes alike), so datagrams leave in the order queued.
 * `cb_lock` is held while the endpoint receives and while a callback
 * runs: that serialises the callbacks, whichever threads the dispatcher
 * reports in, and the receive buffers are used under it alone.  cb_lock
 * is taken before lock, never while it is held.
 *
 * Release.  The driver calls ops->released once no hook of the endpoint
 * can run any more.  If a callback is running then (the release came
 * inline, from a taxi_dgram_close inside that callback), the thread
 * running it finishes the endpoint when it returns (released; dgram.c
 * knows the thread in a callback by a per-thread record of the endpoint
 * it delivers to, so neither side takes a lock for it); else the release
 * does.  Finishing closes the socket, runs the close
 * callback and frees: so no descriptor number is reused while a hook
 * might still name it.
 */
#ifndef TAXI_CORE_STREAM_DGRAM_IMPL_H
#define TAXI_CORE_STREAM_DGRAM_IMPL_H

#include "core/stream/io_impl.h"
#include "taxi/dgram.h"

/* What a driver reports of an endpoint (installed by dgram.c). */
typedef struct taxi__dgram_ops {
  /* Close d (taxi_io_destroy: no close callback); lock not held. */
  int (*close)(taxi_dgram_t *d);
  /* The socket is readable / writable (in a dispatching thread).  Over a
   * Proactor: receives completed (readable takes them with the driver's
   * recv). */
  void (*readable)(taxi_dgram_t *d);
  void (*writable)(taxi_dgram_t *d);
  /* Over a Proactor: the driver sent the send queue's head itself (its
   * want_write started the send), with `status` 0 or the send's error;
   * the head leaves the queue.  In a dispatching thread, no lock held. */
  void (*sent)(taxi_dgram_t *d, int status);
  /* No hook of d runs any more, nor will. */
  void (*released)(taxi_dgram_t *d);
} taxi__dgram_ops_t;

/* One datagram waiting in the send queue: len bytes at sbuf + off. */
typedef struct taxi__dgram_slot {
  size_t off, len;
  taxi_addr_t to; /* family 0: the connected peer */
} taxi__dgram_slot_t;

struct taxi_dgram {
  taxi_io_t *io;
  const taxi__dgram_ops_t *ops;
  taxi_handle_t fd;
  int family; /* TAXI_ADDR_IPV4 or _IPV6 */
  taxi__mutex_t lock, cb_lock;
  taxi_dgram_t *prev, *next; /* in io->dgrams, under io->lock */
  taxi_dgram_recv_fn fn;
  void *arg;
  taxi_dgram_close_fn close_fn; /* set by the close, under lock */
  void *close_arg;
  /* Closed: nothing starts any more.  Set under lock; atomic, as
   * taxi_io_destroy reads it under the context's lock instead. */
  atomic_bool closing;
  /* Released inline by a callback's close: written and read only by the
   * thread running that callback (dgram.c). */
  bool released;
  /* Under lock. */
  bool connected; /* taxi_dgram_connect: a default peer */
  /* The socket's local address (taxi_dgram_address): read once bound, and
   * again after a connect, which may pick the address of a wildcard. */
  taxi_addr_t local;
  bool writing; /* the driver watches for writability */
  bool gso;     /* TAXI_DGRAM_GSO: set at open */
  /* A receive batch is being delivered: sends of its callbacks are queued
   * and go in one batch after its last callback.  Written by the thread
   * that receives (cb_lock held), read only by that thread's callbacks. */
  bool hold_sends;
  /* The batch is one datagram, and its callback has not sent yet: its
   * first send goes at once if nothing is queued.  Written and read as
   * hold_sends. */
  bool hold_one;
  /* The batch's callbacks queued a send or kept an error (held_err):
   * there is something to flush after the batch.  As hold_sends. */
  bool held;
  int held_err; /* an error of a send flushed meanwhile (under lock) */
  /* The counters (taxi_dgram_counters): received and coalesced written
   * under cb_lock, segment_sends under lock, each by one thread at a
   * time; atomic for the readers. */
  atomic_uint_least64_t received, coalesced, segment_sends;
  /* The receive buffers (under cb_lock): rbatch of rsize bytes. */
  unsigned char *rbuf;
  size_t rsize;
  unsigned rbatch;
  taxi__dgram_msg_t *rmsg;
  /* On a reactor: the system's receive headers for rmsg, built once. */
  taxi__recv_prep_t *rprep;
  /* The send queue (under lock): datagrams in the byte ring sbuf, each
   * in one piece, their slots from qhead on. */
  unsigned char *sbuf;
  size_t scap;
  taxi__dgram_slot_t *slots;
  unsigned nslots, qhead, qcount;
  union {
    struct {
      taxi_handler_t h;
      /* Edge-triggered (under L/F): the receiving goes on from this timer,
       * due at once, when a report's rounds end with datagrams left. */
      taxi_timer_t more;
      /* The report being handled came with TAXI_EV_ERR or TAXI_EV_HUP:
       * only then may the reactor keep an error for d (kept_error).  Set
       * and read by the thread running d's hooks. */
      bool event_err;
    } r;
    /* Over a Proactor (core/stream/dgram_proactive.c), under lock. */
    struct {
      taxi_proactor_t *px;             /* the proactor d is attached to */
      struct taxi__dgram_rslot *slots; /* rbatch receives, one buffer each */
      taxi_op_t *sop;                  /* the send of the queue's head */
      taxi_op_t *gop; /* the retry timer (see dgram_proactive.c) */
      bool retry_pending;
      /* The slots in flight or completed, in the order they were started:
       * order[ohead .. ohead + ocount) modulo rbatch; the others, idle
       * (handed out, or their start refused), in idle[0 .. nidle). */
      unsigned *order, *idle;
      unsigned ohead, ocount, nidle;
      /* Operations in flight and completion handlers running: d is
       * released when it is 0 after the close (detached). */
      unsigned refs;
      bool sending, detached;
      /* One multishot receive into the proactor's pool (slot 0) instead
       * of the slots' single receives, into the buffers of `group` (0:
       * the pool; else a group sized for recv_size,
       * core/proactor/proactor_groups.h); handed: the buffers the last
       * recv handed out (nhanded of rbatch), given back at the next. */
      bool pooled;
      unsigned group;
      void **handed;
      unsigned nhanded;
    } p;
  } d;
};

/* One receive of an endpoint over a Proactor: its operation into rbuf's
 * slot, and the result kept until it is delivered in order. */
typedef struct taxi__dgram_rslot {
  taxi_op_t op;
  taxi_dgram_t *d;
  unsigned char *buf; /* rsize bytes of rbuf */
  void *lent;         /* pooled: the datagram, in a buffer of the pool */
  int status;
  size_t len;
  unsigned msg_flags;
  bool armed; /* in flight */
  bool done;  /* completed, not yet delivered */
} taxi__dgram_rslot_t;

/* What a driver does for endpoints (NULL in a driver without them). */
typedef struct taxi__dgram_driver {
  /* Watch d->fd for readability (its ops set): 0 or an error. */
  int (*open)(taxi_dgram_t *d);
  /* Watch for writability too (on) or not: 0 or an error.  Lock held. */
  int (*want_write)(taxi_dgram_t *d, bool on);
  /* Stop watching: ops->released follows, here or once the hooks
   * running in other threads return.  Lock not held. */
  void (*close)(taxi_dgram_t *d);
  /* Over a Proactor (NULL on a reactor, where the socket is read at
   * readiness): the datagrams received, oldest first, into m (at most
   * max; their bytes stay in the driver's buffers until the next call,
   * which starts those receives again), how many, an error a receive
   * completed with (alone), or TAXI_EAGAIN when none is left.  cb_lock
   * held (readable calls it until TAXI_EAGAIN), lock not held. */
  int (*recv)(taxi_dgram_t *d, taxi__dgram_msg_t *m, unsigned max);
  /* On a reactor (NULL over a Proactor): the error the readiness report
   * carried, asked for when it found nothing to receive: a backend that
   * reads the socket's error as it reports it (libkqueue) leaves the
   * receive only EAGAIN, and the reactor keeps the error instead.  0 or a
   * TAXI_E* code; cb_lock held. */
  int (*kept_error)(taxi_dgram_t *d);
  /* On a reactor (NULL over a Proactor): readable stopped with datagrams
   * perhaps left in the socket (its bound of rounds, or an error ahead of
   * them).  Level-triggered they are reported again; edge-triggered no
   * report comes for them, and the driver runs readable again from a timer
   * due at once.  cb_lock not held. */
  void (*more)(taxi_dgram_t *d);
  /* Free what the driver allocated for d (NULL: nothing), when d is
   * finished. */
  void (*fini)(taxi_dgram_t *d);
} taxi__dgram_driver_t;

extern const taxi__dgram_driver_t taxi__dgram_reactive;
extern const taxi__dgram_driver_t taxi__dgram_proactive;

/* For core/stream/dgram_segments.c, from core/stream/dgram.c: take the
 * lock of an open endpoint (0, or TAXI_EINVAL / TAXI_EBADF with who's
 * detail, then not held); queue a copy of a datagram (lock held: 0,
 * TAXI_ENOBUFS, TAXI_EAGAIN); send what is queued until the socket would
 * block (lock held; the latest error in *err). */
int taxi__dgram_lock_open(taxi_dgram_t *d, const char *who);
int taxi__dgram_enqueue(taxi_dgram_t *d, const void *data, size_t len,
                        const taxi_addr_t *to);
void taxi__dgram_flush(taxi_dgram_t *d, int *err);
/* One more of counter c (single writer: see the counters above). */
static inline void taxi__dgram_count(atomic_uint_least64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* The context's list of endpoints (core/stream/io_lists.c):
 * TAXI_ESTOPPED when destroying. */
int taxi__io_link_dgram(taxi_io_t *io, taxi_dgram_t *d);
void taxi__io_unlink_dgram(taxi_io_t *io, taxi_dgram_t *d);

#endif /* TAXI_CORE_STREAM_DGRAM_IMPL_H */
