/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/batch_clock.h - the time of the batch of events the calling
 * thread dispatches, so that a message costs no clock read; how many
 * messages its events delivered; and the buffer its receives land in.
 *
 * A reactor reads the clock once after each wait; the events that wait
 * reported are then dispatched one by one, and each used to read the clock
 * again (its stream's round, a write queued by its callback: the "now" of
 * the timeouts).  The dispatcher sets the batch's time here around each
 * event it runs instead, and the stream layer takes it from here; a thread
 * that dispatches nothing finds none and reads the clock.
 *
 * The price: a timeout measured from the batch's time starts earlier than
 * the event's own time by what the batch took before it (events that
 * block delay every later one, and make their timeouts that much
 * shorter).  Firing is never early by more than that.
 *
 * Per thread (C11 _Thread_local): no lock, and no other thread's batch.
 */
#ifndef TAXI_CORE_COMMON_BATCH_CLOCK_H
#define TAXI_CORE_COMMON_BATCH_CLOCK_H

#include "taxi/platform.h"

/* Read and written several times a message: initial-exec, where ELF has
 * it, makes each a plain load or store instead of a call into the
 * dynamic loader (__tls_get_addr), for 24 bytes of glibc's static TLS
 * surplus when the library is dlopen()ed (ports/os_error.c does the
 * same). */
#if defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define TAXI__TLS_HOT __attribute__((tls_model("initial-exec")))
#else
#define TAXI__TLS_HOT
#endif

/* 0 outside a dispatch (no time of this thread's): defined in
 * batch_clock.c. */
extern _Thread_local taxi_time_t taxi__batch_time TAXI__TLS_HOT;

/* Enter a batch read at `now` (a time of taxi_now()'s clock, above 0);
 * returns the time to give back to taxi__batch_leave (an outer batch's,
 * or 0). */
static inline taxi_time_t taxi__batch_enter(taxi_time_t now) {
  taxi_time_t outer = taxi__batch_time;
  taxi__batch_time = now;
  return outer;
}

static inline void taxi__batch_leave(taxi_time_t outer) {
  taxi__batch_time = outer;
}

/* The batch's time in a dispatching thread, else the clock's. */
static inline taxi_time_t taxi__batch_now(void) {
  taxi_time_t t = taxi__batch_time;
  return t > 0 ? t : taxi_now();
}

/* The messages the calling thread's dispatches have handed to the
 * application (a stream's read callbacks, a datagram endpoint's receive
 * callbacks), counted from where the dispatcher last set it to 0.  One
 * event of a handle the library drains may carry many messages (a batch of
 * datagrams, the reads of an edge-triggered stream): the Leader/Followers
 * pool measures the time per message, not per event, to tell callbacks
 * that do real work from a report that brought a lot of it
 * (core/pools/lf_pool.c).  Defined in batch_clock.c. */
extern _Thread_local unsigned taxi__batch_messages TAXI__TLS_HOT;

static inline void taxi__batch_delivered(void) { taxi__batch_messages++; }

/* The buffer the dispatcher running the calling thread's events lends
 * them, TAXI__SCRATCH_BYTES long, or NULL: set by the dispatcher for as
 * long as it runs events in this thread (its own, from the reactor's loop
 * or the pool thread's record), and NULL while a receive holds it.  A
 * stream's receive lands there rather than in the stream's own buffer
 * (core/stream/io_reactive.c): with many connections each stream's buffer
 * is cold, and the kernel's copy into it cost a cache miss a message,
 * where this one is reused by every receive of the thread.  Not a
 * thread-local array: every thread of a process linked with taxi would
 * carry (and clear, when it starts) the bytes, dispatching or not.
 * Defined in batch_clock.c. */
#define TAXI__SCRATCH_BYTES 16384
extern _Thread_local unsigned char *taxi__batch_scratch TAXI__TLS_HOT;

/* Lend buf (NULL: none) to what this thread runs from now on; returns what
 * was lent before, to give back to taxi__batch_scratch_leave. */
static inline unsigned char *taxi__batch_scratch_enter(unsigned char *buf) {
  unsigned char *outer = taxi__batch_scratch;
  taxi__batch_scratch = buf;
  return outer;
}

static inline void taxi__batch_scratch_leave(unsigned char *outer) {
  taxi__batch_scratch = outer;
}

#endif /* TAXI_CORE_COMMON_BATCH_CLOCK_H */
