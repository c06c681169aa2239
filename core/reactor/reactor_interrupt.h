/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_interrupt.h - the one internal call of the reactor that
 * the completion backends built over a reactor (backends/emulated.c) make
 * besides the public API.
 */
#ifndef TAXI_CORE_REACTOR_INTERRUPT_H
#define TAXI_CORE_REACTOR_INTERRUPT_H

#include "taxi/reactor.h"

/* Make the dispatch in progress (handle_events, handle_one) return, or
 * the next one return at once, with what it dispatched so far: how a
 * completion backend over the reactor wakes its waiting thread.  Takes no
 * lock (an atomic and at most one write to the wake-up channel), so any
 * thread may call it, and a signal handler.  Returns 0 or the error of
 * the write. */
int taxi__reactor_interrupt(taxi_reactor_t *r);

#endif /* TAXI_CORE_REACTOR_INTERRUPT_H */
