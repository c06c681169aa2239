/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/host_names.c - host names as the resolver and connecting by
 * name take them: "host:port" split and checked (each refusal with its
 * detail), a host that is a numeric address, and the order in which a
 * name's addresses are tried (RFC 8305).  Calls common and the ports only:
 * resolve.c, resolver.c and stream_make.c call it.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/resolve_impl.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

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
