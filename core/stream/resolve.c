/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/resolve.c - taxi_resolve (taxi/resolve.h): "host:port" and
 * the options read and checked, each refusal with its detail, and the
 * order in which a name's addresses are tried.  The resolving itself is
 * core/stream/resolver.c's.
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

/* A character a host name may have: letters, digits, '-', '.', and '_'
 * (not in DNS host names, but in other names resolvers serve). */
static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

int taxi__host_port_split(const char *text, char *host, unsigned *port,
                          const char *who) {
  if (strncmp(text, "unix:", 5) == 0)
    return taxi__refuse(TAXI_EBADADDR,
                        "%s: address: a Unix-domain address has no name to "
                        "resolve",
                        who);
  if (text[0] == '[')
    return taxi__refuse(TAXI_EBADADDR,
                        "%s: address: brackets hold a numeric IPv6 address "
                        "(\"[::1]:80\"), not a name",
                        who);
  const char *colon = strrchr(text, ':');
  if (!colon)
    return taxi__refuse(TAXI_EBADADDR, "%s: address: no port (\"host:port\")",
                        who);
  const char *p = colon + 1;
  unsigned v = 0;
  if (!*p) return taxi__refuse(TAXI_EBADADDR, "%s: address: empty port", who);
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || (v = v * 10 + (unsigned)(*p - '0')) > 65535)
      return taxi__refuse(TAXI_EBADADDR,
                          "%s: address: the port is a number from 0 to 65535",
                          who);
  }
  size_t hlen = (size_t)(colon - text);
  if (hlen == 0)
    return taxi__refuse(TAXI_EBADADDR, "%s: address: empty host", who);
  if (memchr(text, ':', hlen))
    return taxi__refuse(TAXI_EBADADDR,
                        "%s: address: an IPv6 address needs its brackets "
                        "(\"[::1]:80\")",
                        who);
  if (hlen > TAXI_RESOLVE_NAME_MAX)
    return taxi__refuse(TAXI_EBADADDR,
                        "%s: address: a host name is at most %d bytes; got "
                        "%" PRIu64,
                        who, TAXI_RESOLVE_NAME_MAX, (uint64_t)hlen);
  for (size_t i = 0; i < hlen; i++)
    if (!name_char(text[i]))
      return taxi__refuse(TAXI_EBADADDR,
                          "%s: address: byte %" PRIu64
                          " of the host is not one a host name has "
                          "(letters, digits, '-', '.', '_')",
                          who, (uint64_t)i);
  memcpy(host, text, hlen);
  host[hlen] = '\0';
  *port = v;
  return 0;
}

bool taxi__host_numeric(const char *host, unsigned port, taxi_addr_t *out) {
  size_t len = strlen(host);
  if (taxi__sockaddr_ip(out, false, host, len, port) == 0) return true;
  return taxi__sockaddr_ip(out, true, host, len, port) == 0;
}

size_t taxi__addrs_order(taxi_addr_t *a, size_t n, int family) {
  taxi_addr_t v6[TAXI_RESOLVE_MAX], v4[TAXI_RESOLVE_MAX];
  size_t n6 = 0, n4 = 0;
  for (size_t i = 0; i < n && i < TAXI_RESOLVE_MAX; i++) {
    if (a[i].family == TAXI_ADDR_IPV6 && family != TAXI_ADDR_IPV4)
      v6[n6++] = a[i];
    else if (a[i].family == TAXI_ADDR_IPV4 && family != TAXI_ADDR_IPV6)
      v4[n4++] = a[i];
  }
  /* RFC 8305, section 4: the families alternate, the preferred (IPv6)
   * first, so that a broken path of one costs one attempt delay at most
   * before the other is tried. */
  size_t k = 0, i6 = 0, i4 = 0;
  while (i6 < n6 || i4 < n4) {
    if (i6 < n6) a[k++] = v6[i6++];
    if (i4 < n4) a[k++] = v4[i4++];
  }
  return k;
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
