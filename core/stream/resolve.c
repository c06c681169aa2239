/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/resolve.c - taxi_resolve (taxi/resolve.h): the call and the
 * options read and checked, each refusal with its detail.  The resolving
 * itself is core/stream/resolver.c's; "host:port" and the order of a
 * name's addresses are core/stream/host_names.c's.  Calls resolver.c,
 * host_names.c and common.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/stream/resolve_impl.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#define MAX_THREADS 64u
#define MAX_QUEUE 65536u

int taxi__io_resolve_options(taxi_io_t *io, const taxi_io_options_t *o) {
  if (o->resolve_threads > MAX_THREADS)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.resolve_threads: 0 (2) to "
                        "%u; got %u",
                        MAX_THREADS, o->resolve_threads);
  if (o->resolve_queue > MAX_QUEUE)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_create: options.resolve_queue: 0 (256) to "
                        "%u; got %u",
                        MAX_QUEUE, o->resolve_queue);
  io->resolve_threads = o->resolve_threads ? o->resolve_threads : 2;
  io->resolve_queue = o->resolve_queue ? o->resolve_queue : 256;
  io->resolve_hook = o->resolve_hook;
  io->resolve_hook_arg = o->resolve_hook_arg;
  return 0;
}

void taxi_resolve_options_init(taxi_resolve_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi_resolve(taxi_resolve_t **out, taxi_io_t *io, const char *host_port,
                 const taxi_resolve_options_t *opts, taxi_resolve_fn fn,
                 void *arg) {
  taxi_resolve_options_t o;
  if (!io || !host_port || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_resolve: %s: NULL",
                        !io          ? "io"
                        : !host_port ? "host_port"
                                     : "fn");
  taxi_resolve_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o, "taxi_resolve: options",
                         "taxi_resolve_options_init") < 0)
    return TAXI_EINVAL;
  if (o.family != 0 && o.family != TAXI_ADDR_IPV4 && o.family != TAXI_ADDR_IPV6)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_resolve: options.family: 0, TAXI_ADDR_IPV4 or "
                        "TAXI_ADDR_IPV6; got %d",
                        o.family);
  if (taxi__io_span_check(o.timeout) < 0)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_resolve: options.timeout: 0 to "
                        "TAXI_TIME_SPAN_MAX ns; got %" PRId64,
                        (int64_t)o.timeout);
  if (taxi__io_stopping(io))
    return taxi__refuse(TAXI_ESTOPPED,
                        "taxi_resolve: io: stopped, or being destroyed");
  char host[TAXI_RESOLVE_NAME_MAX + 1];
  unsigned port;
  taxi_addr_t a;
  /* "[::1]:80" and the like: the brackets are the address's. */
  if (host_port[0] == '[' && taxi_addr_parse(&a, host_port) == 0 &&
      a.family == TAXI_ADDR_IPV6) {
    size_t len = (size_t)(strchr(host_port, ']') - host_port - 1);
    memcpy(host, host_port + 1, len);
    host[len] = '\0';
    port = taxi_addr_port(&a);
  } else {
    int rc = taxi__host_port_split(host_port, host, &port, "taxi_resolve");
    if (rc < 0) return rc;
  }
  return taxi__resolve_start(out, io, host, port, o.family, o.timeout, fn, arg,
                             "taxi_resolve");
}
