/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_consts.h - the constants every layer of the
 * proactor shares: the phases and flags of an operation record's state
 * word, the directions of the per-handle queues, the sentinels of the
 * operations table, and the limits.  Kept apart from proactor_impl.h so
 * that a file needing the vocabulary does not need the whole state.
 *
 * The life of an operation record (op->internal_.state & TAXI__OP_STATE):
 *
 *   IDLE ──start──> QUEUED ──becomes its handle's head──> SUBMITTED
 *                    (waits behind older ops of the       (given to the
 *                     same handle and direction)           backend; exactly
 *                                                          one completion
 *        ──timer──> TIMER (in the heap)                    comes from wait)
 *        ──post───> READY
 *   SUBMITTED (multishot accept, out of descriptors) ──> PAUSED ──the
 *             pause is over──> SUBMITTED again
 *   SUBMITTED ──partial transfer──> SUBMITTED again (the rest resubmitted)
 *   SUBMITTED / TIMER / QUEUED (cancelled) ──done──> READY (in the
 *             completion queue, result in internal_.status / done)
 *   READY ──taken by a dispatching thread──> TAKEN ──handler called──> IDLE
 *
 * A multishot accept stays in flight across its completions: each
 * connection takes it READY -> TAKEN -> (handler) -> SUBMITTED again (the
 * core re-issues it where the backend lacks TAXI__PCAP_MULTISHOT_ACCEPT)
 * until the final completion.  While it is READY or TAKEN it is still the
 * head of its listener's input queue, so later accepts keep waiting.
 */
#ifndef TAXI_CORE_PROACTOR_CONSTS_H
#define TAXI_CORE_PROACTOR_CONSTS_H

#include "taxi/proactor.h"

#include <stddef.h>
#include <stdint.h>

/* Operation phases (internal_.state & TAXI__OP_STATE). */
#define TAXI__OP_IDLE 0u
#define TAXI__OP_QUEUED 1u
#define TAXI__OP_SUBMITTED 2u
#define TAXI__OP_TIMER 3u
#define TAXI__OP_READY 4u
#define TAXI__OP_TAKEN 5u
/* Waiting out a pause before it is submitted again: a multishot accept
 * that failed for lack of descriptors (or another transient cause), or an
 * operation whose submission the OS refused for now.  On the proactor's
 * `paused` list, resumed at internal_.deadline; still the head of its
 * handle's queue (heap_index keeps its row). */
#define TAXI__OP_PAUSED 6u
#define TAXI__OP_STATE 0xffu

/* Flags kept with the phase. */
#define TAXI__OP_CANCEL 0x100u /* cancellation requested */
/* READY/TAKEN: a multishot accept delivery after which the op stays in
 * flight. */
#define TAXI__OP_MORE 0x200u
/* The backend owes a completion (set at submit, cleared by a completion
 * without TAXI__CQ_MORE). */
#define TAXI__OP_INBACKEND 0x400u
/* A kernel multishot accept the core asked the backend to end because
 * TAXI__ACCEPT_BACKLOG_MAX deliveries wait for its handler: its end
 * (TAXI_ECANCELED) submits it again, not completes it. */
#define TAXI__OP_THROTTLED 0x800u

/* Directions of the per-handle queues (internal_.dir). */
#define TAXI__DIR_NONE 0u
#define TAXI__DIR_IN 1u
#define TAXI__DIR_OUT 2u

/* internal_.heap_index of an operation that belongs to no row. */
#define TAXI__NO_ROW ((size_t)-1)
/* The end of a list of rows linked by index (free rows, rows waiting for
 * the loop), and the index no row has. */
#define TAXI__ROW_NIL 0xffffffffu

/* taxi__proactor_submit_locked: a pooled read found no free buffer (never
 * returned to the application). */
#define TAXI__NO_BUFFER (-1000)

/* Limits. */
/* Deliveries of kernel multishot accepts kept waiting for their handlers
 * before the core stops the kernel accepting (see TAXI_ACCEPT_MULTISHOT in
 * taxi/proactor.h). */
#define TAXI__ACCEPT_BACKLOG_MAX 64u
/* Completions one wait may report into the dispatcher's buffer. */
#define TAXI__PROACTOR_MAX_EVENTS 128u
/* Chunks of the buffer pool: doublings from the first size to the cap. */
#define TAXI__PBUF_CHUNKS 16

/* The state word, read without the lock by taxi_op_in_flight() and by the
 * EBUSY check of a record perhaps in flight on another proactor. */
static inline unsigned taxi__op_state_load(const taxi_op_t *op) {
#if defined(__GNUC__) || defined(__clang__)
  return __atomic_load_n(&op->internal_.state, __ATOMIC_ACQUIRE);
#else
  return *(const volatile unsigned *)&op->internal_.state;
#endif
}

static inline void taxi__op_state_store(taxi_op_t *op, unsigned v) {
#if defined(__GNUC__) || defined(__clang__)
  __atomic_store_n(&op->internal_.state, v, __ATOMIC_RELEASE);
#else
  *(volatile unsigned *)&op->internal_.state = v;
#endif
}

static inline unsigned taxi__op_phase(const taxi_op_t *op) {
  return op->internal_.state & TAXI__OP_STATE;
}

/* Set the phase, keeping the flags. */
static inline void taxi__op_set_phase(taxi_op_t *op, unsigned phase) {
  taxi__op_state_store(op, (op->internal_.state & ~TAXI__OP_STATE) | phase);
}

#endif /* TAXI_CORE_PROACTOR_CONSTS_H */
