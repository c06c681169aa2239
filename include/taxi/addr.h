/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/addr.h - socket addresses as the stream layer (taxi/stream.h) and
 * its listeners take them: parsed from and written as text, independent of
 * the operating system's struct sockaddr spelling.
 *
 *     taxi_addr_t a;
 *     char text[TAXI_ADDR_STRLEN];
 *     if (taxi_addr_parse(&a, "[::1]:8080") == 0)
 *       taxi_addr_format(&a, text, sizeof text); // "[::1]:8080"
 *
 * Threads.  Every function here may be called from any thread; none keeps
 * a pointer to what it is given.
 */
#ifndef TAXI_ADDR_H
#define TAXI_ADDR_H

#include "platform.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Address families. */
#define TAXI_ADDR_IPV4 1 /* IPv4 */
#define TAXI_ADDR_IPV6 2 /* IPv6 */
#define TAXI_ADDR_UNIX 3 /* a Unix-domain path */

/* A socket address (a struct sockaddr of `len` bytes in sa.bytes). */
typedef struct taxi_addr {
  int family;   /* TAXI_ADDR_*, 0 when empty */
  unsigned len; /* bytes of sa in use */
  /* The struct sockaddr. */
  union {
    unsigned char bytes[128];
    uint64_t align_;
  } sa;
} taxi_addr_t;

/* Room taxi_addr_format() needs for any address, its zero included. */
#define TAXI_ADDR_STRLEN 128

/*
 * taxi_addr_parse - parse an address:
 *   "127.0.0.1:80"   an IPv4 address and port;
 *   "[::1]:80"       an IPv6 address (in brackets) and port;
 *   "*:80", ":80"    every address: IPv6's wildcard, which also takes IPv4
 *                    connections unless TAXI_LISTEN_V6ONLY (and falls back
 *                    to IPv4's on systems without IPv6);
 *   "unix:/path"     a Unix-domain socket; "unix:@name" one in Linux's
 *                    abstract namespace.
 * Addresses are numeric: names are not resolved here (taxi/resolve.h
 * resolves them, and taxi_stream_connect takes them).  Ports are
 * 0..65535 (0: any free port, for listening).
 *
 * Returns 0 and fills *out, or TAXI_EINVAL (NULL), TAXI_EBADADDR (empty,
 * no port, port not a number or above 65535, host not a numeric address,
 * unbalanced brackets, an IPv6 address without brackets, an empty or too
 * long path: at most 107 bytes), TAXI_ENOTSUP (unix: on a system without
 * Unix-domain sockets, unix:@ outside Linux).  Threads: any.
 */
TAXI_EXTERN int taxi_addr_parse(taxi_addr_t *out, const char *text);

/*
 * taxi_addr_format - write the address as taxi_addr_parse() reads it into
 * buf (size bytes; TAXI_ADDR_STRLEN is always enough).  Returns the length
 * written, or TAXI_EINVAL (NULL, an empty address, buf too small).
 */
TAXI_EXTERN int taxi_addr_format(const taxi_addr_t *a, char *buf, size_t size);

/* taxi_addr_port - the port of an IPv4 or IPv6 address; 0 otherwise. */
TAXI_EXTERN unsigned taxi_addr_port(const taxi_addr_t *a);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_ADDR_H */
