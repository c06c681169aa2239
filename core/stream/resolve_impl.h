/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/resolve_impl.h - name resolution as the files of the stream
 * layer share it:
 *
 *   core/stream/resolve.c      taxi_resolve: host:port, the options, the
 *                              order of the addresses;
 *   core/stream/resolver.c     the context's resolver: its threads, its
 *                              queue, timeouts, cancelling, delivery;
 *   core/stream/stream_dial.c  taxi_stream_connect to a host name.
 *
 * Locks: a dial's lock is taken before the resolver's, the resolver's
 * before the context's post_lock; no callback runs under any of them.
 */
#ifndef TAXI_CORE_RESOLVE_IMPL_H
#define TAXI_CORE_RESOLVE_IMPL_H

#include "core/stream/io_impl.h"

/* A resolution (taxi_resolve_t): from taxi__resolve_start until its
 * callback returned and no resolver thread works on it. */
struct taxi_resolve {
  struct taxi__resolver *rs;
  taxi_resolve_t *next;          /* in the queue */
  taxi_resolve_t *wprev, *wnext; /* in the list of those not yet posted */
  taxi__post_t *post;            /* the record of its delivery */
  taxi_resolve_fn fn;
  void *arg;
  int family;
  unsigned port;
  taxi_time_t deadline; /* 0: none */
  bool queued;          /* waits in the queue */
  bool in_thread;       /* a resolver thread works on it */
  bool posted;          /* its delivery is posted: status is final */
  bool canceled;        /* taxi_resolve_cancel: delivered as TAXI_ECANCELED */
  bool running;         /* its callback is running */
  bool done;            /* its callback has returned */
  int status;
  size_t n;
  taxi_addr_t addrs[TAXI_RESOLVE_MAX];
  char host[TAXI_RESOLVE_NAME_MAX + 1];
};

/* Start resolving host (a name, or a numeric address: answered without a
 * thread) for port, as taxi_resolve says; `who` names the public function
 * in refusals.  0 and *out, or the error (then fn never runs). */
int taxi__resolve_start(taxi_resolve_t **out, taxi_io_t *io, const char *host,
                        unsigned port, int family, taxi_time_t timeout,
                        taxi_resolve_fn fn, void *arg, const char *who);

/* Keep the addresses of a[0 .. n) of `family` (0: IPv4 and IPv6) and
 * order them to be tried: with family 0 interleaved, IPv6 first, each
 * family in its order (RFC 8305, section 4).  Returns how many are left. */
size_t taxi__addrs_order(taxi_addr_t *a, size_t n, int family);

/* Whether text[0 .. len) is a numeric address of either family, and
 * then the address with port in *out. */
bool taxi__host_numeric(const char *host, unsigned port, taxi_addr_t *out);

#endif /* TAXI_CORE_RESOLVE_IMPL_H */
