/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_closing.h - the reactor's registration and removal for a
 * handle the library serves with hooks of its own, and perhaps made and
 * closes itself: for the stream driver (core/stream/io_reactive.c), which
 * cannot include the reactor's internals (their flag names overlap the
 * stream's), and the library's other users of a reactor.
 */
#ifndef TAXI_CORE_REACTOR_CLOSING_H
#define TAXI_CORE_REACTOR_CLOSING_H

#include "taxi/reactor.h"

#include <stdbool.h>

/* taxi_reactor_register for a handle the library has just accepted or
 * made, open for sure: a backend that checks an application's handle
 * itself (select, poll: their mechanisms would notice a closed one only
 * later) may skip that system call (TAXI__ARM_OPEN). */
int taxi__reactor_register_open(taxi_reactor_t *r, taxi_handle_t handle,
                                taxi_handler_t *h, unsigned events);

/* taxi_reactor_register for a handle the library serves with hooks that
 * never close it (a stream's, a listener's, a multiplexed connection's, a
 * proactor backend's, a wake-up channel's): the reactor does not watch it
 * for being closed under the reactor as it watches an application's
 * (core/reactor/reactor_closed.c), which saves the checks.
 * taxi__reactor_register_open implies it. */
int taxi__reactor_register_own(taxi_reactor_t *r, taxi_handle_t handle,
                               taxi_handler_t *h, unsigned events);

/* taxi__reactor_register_own (or _open, with `open`) for a handle whose
 * input and output hooks read, write or accept until the OS says EAGAIN,
 * or else see to it themselves that they run again (a listener's bounded
 * batch and a stream's bounded reading go on from a timer).  Under a
 * Leader/Followers pool, where the backend has edge triggering, such a handle
 * is armed once, edge-triggered, instead of being re-armed one-shot after every
 * event (see TAXI__S_DRAINS in core/reactor/reactor_impl.h); elsewhere it is
 * armed as any other. */
int taxi__reactor_register_drains(taxi_reactor_t *r, taxi_handle_t handle,
                                  taxi_handler_t *h, unsigned events,
                                  bool open);

/* Whether r arms the handles registered with taxi__reactor_register_drains
 * edge-triggered now: their hooks must then drain, as it says.  Any
 * thread, without r's lock: it changes only when a pool attaches to r or
 * detaches from it. */
bool taxi__reactor_drains_edge(taxi_reactor_t *r);

/* taxi_reactor_remove for a handle that h's close hook closes, and whose
 * socket no other descriptor shares (the library made it and gave no one
 * its number): that close ends the registration, so where the backend's
 * registrations die with the socket and arming is one-shot, the backend's
 * del is skipped (see close_ends_registration in core/reactor/reactor_table.c).
 * 0 or TAXI_ENOENT. */
int taxi__reactor_remove_closing(taxi_reactor_t *r, taxi_handler_t *h);

#endif /* TAXI_CORE_REACTOR_CLOSING_H */
