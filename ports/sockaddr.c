/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/sockaddr.c - socket addresses (see ports/sock.h): numeric IPv4 and
 * IPv6 addresses, Unix-domain paths, their text and ports.  One file for
 * every system: what it uses (inet_pton, inet_ntop, struct sockaddr_in and
 * sockaddr_in6) is the same in POSIX and Winsock.  Unix-domain addresses
 * are TAXI_ENOTSUP on Windows: Windows 10 has AF_UNIX stream sockets, but
 * neither WSAPoll nor the emulated and iocp Proactor paths of taxi have
 * been checked with them, and wine lacks them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* strnlen() under -std=c11 */
#endif
#include "config.h"

#if defined(_WIN32)
#include "win32/win32_impl.h"
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#endif

#include "sock.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(_WIN32)
#define OS_SOCKET(h) ((SOCKET)(h))
#else
#define OS_SOCKET(h) (h)
#endif

_Static_assert(sizeof(struct sockaddr_storage) <=
                   sizeof(((taxi_addr_t *)0)->sa.bytes),
               "taxi_addr_t holds any socket address");

int taxi__sockaddr_ip(taxi_addr_t *out, bool v6, const char *host, size_t hlen,
                      unsigned port) {
  char text[INET6_ADDRSTRLEN + 1];
  if (port > 65535) return TAXI_EBADADDR;
  if (host && (hlen == 0 || hlen >= sizeof text)) return TAXI_EBADADDR;
  if (host) {
    memcpy(text, host, hlen);
    text[hlen] = '\0';
  }
  memset(out, 0, sizeof *out);
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)out->sa.bytes;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    a->sin6_addr = in6addr_any;
    if (host && inet_pton(AF_INET6, text, &a->sin6_addr) != 1)
      return TAXI_EBADADDR;
    out->family = TAXI_ADDR_IPV6;
    out->len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)(void *)out->sa.bytes;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    if (host && inet_pton(AF_INET, text, &a->sin_addr) != 1)
      return TAXI_EBADADDR;
    out->family = TAXI_ADDR_IPV4;
    out->len = sizeof *a;
  }
  return 0;
}

#if defined(_WIN32)
int taxi__sockaddr_unix(taxi_addr_t *out, const char *path, size_t len) {
  (void)out;
  if (len == 0 || (path[0] == '@' && len == 1)) return TAXI_EBADADDR;
  return TAXI_ENOTSUP;
}
#else
int taxi__sockaddr_unix(taxi_addr_t *out, const char *path, size_t len) {
  struct sockaddr_un *a = (struct sockaddr_un *)(void *)out->sa.bytes;
  if (len == 0 || (path[0] == '@' && len == 1)) return TAXI_EBADADDR;
  /* Room for the terminating zero the kernel does not need but other
   * programs reading the name expect. */
  if (len >= sizeof a->sun_path) return TAXI_EBADADDR;
  if (memchr(path, '\0', len)) return TAXI_EBADADDR;
  memset(out, 0, sizeof *out);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path, path, len);
  out->family = TAXI_ADDR_UNIX;
  out->len = (unsigned)(offsetof(struct sockaddr_un, sun_path) + len + 1);
  if (path[0] == '@') {
#if defined(__linux__)
    /* Linux's abstract namespace: a leading zero byte, and the length says
     * where the name ends (no terminating zero). */
    a->sun_path[0] = '\0';
    out->len = (unsigned)(offsetof(struct sockaddr_un, sun_path) + len);
#else
    return TAXI_ENOTSUP;
#endif
  }
  return 0;
}

/* "unix:/path", or "unix:@name" for an abstract one. */
static int format_unix(const taxi_addr_t *a, char *buf, size_t cap) {
  const struct sockaddr_un *un =
      (const struct sockaddr_un *)(const void *)a->sa.bytes;
  size_t off = offsetof(struct sockaddr_un, sun_path);
  size_t len = a->len > off ? a->len - off : 0;
  if (len > sizeof un->sun_path) len = sizeof un->sun_path;
  if (len && un->sun_path[0] == '\0') /* abstract */
    return snprintf(buf, cap, "unix:@%.*s", (int)(len - 1), un->sun_path + 1);
  return snprintf(buf, cap, "unix:%.*s", (int)strnlen(un->sun_path, len),
                  un->sun_path);
}
#endif

int taxi__sockaddr_format(const taxi_addr_t *a, char *buf, size_t cap) {
  char host[INET6_ADDRSTRLEN];
  int n = -1;
  switch (a->family) {
    case TAXI_ADDR_IPV4: {
      const struct sockaddr_in *in =
          (const struct sockaddr_in *)(const void *)a->sa.bytes;
      /* The cast: older MinGW-w64 headers take a pointer to non-const. */
      if (!inet_ntop(AF_INET, (void *)&in->sin_addr, host, sizeof host))
        return TAXI_EINVAL;
      n = snprintf(buf, cap, "%s:%u", host, (unsigned)ntohs(in->sin_port));
      break;
    }
    case TAXI_ADDR_IPV6: {
      const struct sockaddr_in6 *in =
          (const struct sockaddr_in6 *)(const void *)a->sa.bytes;
      if (!inet_ntop(AF_INET6, (void *)&in->sin6_addr, host, sizeof host))
        return TAXI_EINVAL;
      n = snprintf(buf, cap, "[%s]:%u", host, (unsigned)ntohs(in->sin6_port));
      break;
    }
#if !defined(_WIN32)
    case TAXI_ADDR_UNIX:
      n = format_unix(a, buf, cap);
      break;
#endif
    default:
      return TAXI_EINVAL;
  }
  if (n < 0 || (size_t)n >= cap) return TAXI_EINVAL;
  return n;
}

unsigned taxi__sockaddr_port(const taxi_addr_t *a) {
  if (a->family == TAXI_ADDR_IPV4)
    return ntohs(
        ((const struct sockaddr_in *)(const void *)a->sa.bytes)->sin_port);
  if (a->family == TAXI_ADDR_IPV6)
    return ntohs(
        ((const struct sockaddr_in6 *)(const void *)a->sa.bytes)->sin6_port);
  return 0;
}

/* a->family from the struct sockaddr in a->sa.bytes (the bytes past
 * a->len zero: a length too short for the family reads zero). */
static void family_from_bytes(taxi_addr_t *a) {
  const struct sockaddr *s = (const struct sockaddr *)(const void *)a->sa.bytes;
  switch (s->sa_family) {
    case AF_INET:
      a->family = TAXI_ADDR_IPV4;
      break;
    case AF_INET6:
      a->family = TAXI_ADDR_IPV6;
      break;
#if !defined(_WIN32)
    case AF_UNIX:
      a->family = TAXI_ADDR_UNIX;
      break;
#endif
    default:
      a->family = 0;
  }
}

void taxi__sockaddr_set(taxi_addr_t *out, const void *sa, unsigned len) {
  memset(out, 0, sizeof *out);
  if (len > sizeof out->sa.bytes) len = sizeof out->sa.bytes;
  memcpy(out->sa.bytes, sa, len);
  out->len = len;
  family_from_bytes(out);
}

void taxi__sockaddr_written(taxi_addr_t *a, unsigned len) {
  if (len > sizeof a->sa.bytes) len = sizeof a->sa.bytes;
  if (len < a->len) memset(a->sa.bytes + len, 0, a->len - len);
  a->len = len;
  family_from_bytes(a);
}

int taxi__sockaddr_family(const taxi_addr_t *a) {
  switch (a->family) {
    case TAXI_ADDR_IPV4:
      return AF_INET;
    case TAXI_ADDR_IPV6:
      return AF_INET6;
#if !defined(_WIN32)
    case TAXI_ADDR_UNIX:
      return AF_UNIX;
#endif
  }
  return -1;
}

/* The address s is bound to (peer false) or connected to (peer true). */
static int sock_name(taxi_handle_t s, bool peer, taxi_addr_t *out) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int r = peer ? getpeername(OS_SOCKET(s), (struct sockaddr *)&ss, &len)
               : getsockname(OS_SOCKET(s), (struct sockaddr *)&ss, &len);
  if (r != 0) return taxi__last_error();
  taxi__sockaddr_set(out, &ss, (unsigned)len);
  return 0;
}

int taxi__sock_local_addr(taxi_handle_t s, taxi_addr_t *out) {
  return sock_name(s, false, out);
}

int taxi__sock_peer_addr(taxi_handle_t s, taxi_addr_t *out) {
  return sock_name(s, true, out);
}

void taxi__sockaddr_v4_mapped(const taxi_addr_t *a, taxi_addr_t *out) {
  struct sockaddr_in in4;
  struct sockaddr_in6 in6;
  memcpy(&in4, a->sa.bytes, sizeof in4);
  memset(&in6, 0, sizeof in6);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = in4.sin_port;
  in6.sin6_addr.s6_addr[10] = 0xff;
  in6.sin6_addr.s6_addr[11] = 0xff;
  memcpy(&in6.sin6_addr.s6_addr[12], &in4.sin_addr, 4);
  taxi__sockaddr_set(out, &in6, sizeof in6);
}

void taxi__sockaddr_set_port(taxi_addr_t *a, unsigned port) {
  if (a->family == TAXI_ADDR_IPV4)
    ((struct sockaddr_in *)(void *)a->sa.bytes)->sin_port =
        htons((unsigned short)port);
  else if (a->family == TAXI_ADDR_IPV6)
    ((struct sockaddr_in6 *)(void *)a->sa.bytes)->sin6_port =
        htons((unsigned short)port);
}
