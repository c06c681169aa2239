/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi.h - the whole public API of taxi, a portable event-dispatching
 * library: a Reactor over the native handle-set mechanisms (select, poll,
 * epoll, kqueue), with timers, cross-thread notification and signals, and
 * the Leader/Followers and half-sync/half-async thread pools over it.
 */
#ifndef TAXI_H
#define TAXI_H

#include "platform.h"
#include "error.h"
#include "alloc.h"
#include "backend.h"
#include "handler.h"
#include "reactor.h"
#include "lf.h"
#include "lf_bound.h"
#include "lf_sets.h"
#include "mqueue.h"
#include "hsha.h"
#include "proactor.h"
#include "proactor_group.h"
#include "io.h"
#include "stream.h"
#include "version.h"

#endif /* TAXI_H */
