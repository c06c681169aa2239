/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/address.c - address strings: the grammar here, the numeric
 * conversions in the ports (ports/sock.h).  Calls the ports only.
 */
#include "config.h"

#include "core/stream/io_impl.h"

#include <string.h>

/* Digits only, 0..65535. */
static int parse_port(const char *p, unsigned *port) {
  unsigned v = 0;
  if (!*p) return TAXI_EBADADDR;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return TAXI_EBADADDR;
    v = v * 10 + (unsigned)(*p - '0');
    if (v > 65535) return TAXI_EBADADDR;
  }
  *port = v;
  return 0;
}

int taxi_addr_parse(taxi_addr_t *out, const char *text) {
  unsigned port;
  if (!out || !text) return TAXI_EINVAL;
  if (strncmp(text, "unix:", 5) == 0)
    return taxi__sockaddr_unix(out, text + 5, strlen(text + 5));
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':') return TAXI_EBADADDR;
    int rc = parse_port(close + 2, &port);
    if (rc < 0) return rc;
    return taxi__sockaddr_ip(out, true, text + 1, (size_t)(close - text - 1),
                             port);
  }
  const char *colon = strrchr(text, ':');
  if (!colon) return TAXI_EBADADDR;
  int rc = parse_port(colon + 1, &port);
  if (rc < 0) return rc;
  size_t hlen = (size_t)(colon - text);
  if (hlen == 0 || (hlen == 1 && text[0] == '*'))
    return taxi__sockaddr_ip(out, true, NULL, 0, port);
  /* An IPv6 address needs its brackets: "::1:80" is ambiguous. */
  if (memchr(text, ':', hlen)) return TAXI_EBADADDR;
  return taxi__sockaddr_ip(out, false, text, hlen, port);
}

int taxi_addr_format(const taxi_addr_t *a, char *buf, size_t size) {
  if (!a || !buf || size == 0) return TAXI_EINVAL;
  return taxi__sockaddr_format(a, buf, size);
}

unsigned taxi_addr_port(const taxi_addr_t *a) {
  return a ? taxi__sockaddr_port(a) : 0;
}
