/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/sock.h - the socket calls of the stream layer (core/io*.c,
 * core/stream*.c, core/stream/listener.c): socket addresses, listening,
 * connecting, accepting, non-blocking transfers and socket options.
 * What is alike on every system is one file both ports compile (the
 * addresses: ports/sockaddr.c; the errors of sockets: ports/sockerr.c);
 * the rest is one implementation per operating system family:
 * ports/posix/sock.c, ports/win32/sock.c.
 *
 * Conventions as in ports/port.h: 0 (or a byte count) on success, a
 * negative TAXI_E* code on failure, the OS error recorded first.  Every
 * handle made here is non-blocking and not inherited by child processes.
 * Interrupted calls are retried inside.
 */
#ifndef TAXI_PORTS_SOCK_H
#define TAXI_PORTS_SOCK_H

#include "port.h"
#include "taxi/proactor.h" /* taxi_buf_t */
#include "taxi/stream.h"   /* taxi_addr_t, TAXI_LISTEN_* */

/* ---- addresses ---------------------------------------------------------- */

/* An IPv4 (v6 false) or IPv6 address from the numeric text host[0..hlen)
 * (no names are resolved), or the address of every interface when host is
 * NULL, and port.  TAXI_EBADADDR when the text is not a numeric address of
 * that family. */
int taxi__sockaddr_ip(taxi_addr_t *out, bool v6, const char *host, size_t hlen,
                      unsigned port);
/* A Unix-domain address for path[0..len); a leading '@' names an address in
 * Linux's abstract namespace.  TAXI_EBADADDR when empty or too long,
 * TAXI_ENOTSUP where the system has no such addresses. */
int taxi__sockaddr_unix(taxi_addr_t *out, const char *path, size_t len);
/* Write "1.2.3.4:80", "[::1]:80" or "unix:/path" ("unix:@name").  Returns
 * the length, or TAXI_EINVAL when it does not fit in cap bytes with its
 * terminating zero. */
int taxi__sockaddr_format(const taxi_addr_t *a, char *buf, size_t cap);
/* The port of an IP address, 0 for others. */
unsigned taxi__sockaddr_port(const taxi_addr_t *a);
/* Fill *out from a struct sockaddr of len bytes (as the system gave it). */
void taxi__sockaddr_set(taxi_addr_t *out, const void *sa, unsigned len);
/* The same for len bytes the system wrote in place into a->sa.bytes,
 * whose bytes past a->len were zero (a record of taxi__sockaddr_set's, or
 * cleared): what *a leaves as taxi__sockaddr_set would, without clearing
 * and copying the whole record. */
void taxi__sockaddr_written(taxi_addr_t *a, unsigned len);
/* The AF_* family of a socket for `a`, or -1 where the system has none
 * (an address of no family; a Unix-domain one on Windows). */
int taxi__sockaddr_family(const taxi_addr_t *a);

/* Set the port of an IPv4 or IPv6 address (others are left alone). */
void taxi__sockaddr_set_port(taxi_addr_t *a, unsigned port);
/* IPv4 address a as IPv6 sees it (::ffff:a.b.c.d, the same port), for a
 * dual-stack IPv6 socket to send to. */
void taxi__sockaddr_v4_mapped(const taxi_addr_t *a, taxi_addr_t *out);

/* ---- names -------------------------------------------------------------- */

/* The addresses of host name `host` (a numeric address is one too) for
 * stream sockets to `port`, of `family` (0: any, TAXI_ADDR_IPV4,
 * TAXI_ADDR_IPV6), in the order the system's resolver gives them (RFC
 * 6724's on most), at most max of them, into out.  Blocks for as long as
 * the resolver takes: call it from a thread that dispatches nothing
 * (ports/resolve.c).  Returns how many (> 0),
 * or TAXI_ENONAME (no such name), TAXI_ETRYAGAIN (a temporary failure: no
 * answer from a name server), TAXI_ENOADDR (no address of that family),
 * TAXI_ENOMEM, TAXI_ESYS. */
int taxi__sock_resolve(const char *host, unsigned port, int family,
                       taxi_addr_t *out, size_t max);

/* ---- sockets ------------------------------------------------------------ */

/* A stream socket listening on `a` with `backlog` (<= 0: the system's
 * maximum) and the TAXI_LISTEN_* flags: every listening socket taxi makes
 * (listeners, taxi_lf_sets_listen) is made here.  The wildcard IPv6
 * address falls back to IPv4's where the system has no IPv6.
 * TAXI_EADDRINUSE, TAXI_EPERM, TAXI_ENOTSUP (TAXI_LISTEN_REUSEPORT where
 * no option balances), ... */
int taxi__sock_listen(const taxi_addr_t *a, int backlog, unsigned flags,
                      taxi_handle_t *out);
/* Whether TAXI_LISTEN_REUSEPORT is available here: several sockets share a
 * port with the kernel balancing new connections over them. */
bool taxi__reuseport_balances(void);
/* An unconnected stream socket of a's family. */
int taxi__sock_open(const taxi_addr_t *a, taxi_handle_t *out);
/* Start connecting s to a: 0 when connected at once, TAXI_EAGAIN when in
 * progress (s becomes writable when it is over), else the error. */
int taxi__sock_connect(taxi_handle_t s, const taxi_addr_t *a);
/* Once a connect in progress is over: 0 when connected, else its error
 * (TAXI_ECONNREFUSED, TAXI_ETIMEDOUT, ...). */
int taxi__sock_connect_result(taxi_handle_t s);
/* The TAXI_E* code of a connect that failed with OS error os_error,
 * recorded: an unreachable network or host counts as TAXI_ECONNREFUSED. */
int taxi__sock_connect_error(int os_error);
/* The error pending on s (SO_ERROR), which reading clears: 0 in *err when
 * none or when s is not a socket, else its TAXI_E* code (TAXI_ECONNRESET,
 * TAXI_ECONNREFUSED, ...).  Returns 0, or the error of asking. */
int taxi__sock_pending_error(taxi_handle_t s, int *err);
/* Accept one connection: 0 with *out and *peer set; TAXI_EAGAIN when none
 * is waiting (or the one waiting was aborted); TAXI_ETOOMANY when out of
 * descriptors; TAXI_ENOMEM; others. */
int taxi__sock_accept(taxi_handle_t listener, taxi_handle_t *out,
                      taxi_addr_t *peer);
/* Whether s is a listening stream socket: 0 if it is, TAXI_EINVAL if it
 * is a socket that is not listening, TAXI_EBADF if it is not an open
 * socket. */
int taxi__sock_listening(taxi_handle_t s);
/* The address s is bound to, and the one it is connected to: 0, or the
 * error of asking (TAXI_EBADF, ...). */
int taxi__sock_local_addr(taxi_handle_t s, taxi_addr_t *out);
int taxi__sock_peer_addr(taxi_handle_t s, taxi_addr_t *out);

/* ---- transfers ---------------------------------------------------------- */

/* One receive: > 0 bytes, 0 at end of stream, TAXI_EAGAIN, or an error. */
int64_t taxi__sock_recv(taxi_handle_t s, void *buf, size_t len);
/* One gathering send of bufs[0..n) (n <= 16): bytes sent (> 0), TAXI_EAGAIN,
 * or an error (TAXI_EPIPE, TAXI_ECONNRESET, ...).  Never raises SIGPIPE. */
int64_t taxi__sock_sendv(taxi_handle_t s, const taxi_buf_t *bufs, size_t n);
/* Send up to len bytes of regular file `file` from `offset`: sendfile(2)
 * where the system has it, else reading into a buffer on the stack and
 * sending that (what is not taken is read again next time).  Bytes sent
 * (> 0), TAXI_EAGAIN, TAXI_EEOF (the file ended first), or an error. */
int64_t taxi__sock_sendfile(taxi_handle_t s, taxi_handle_t file, int64_t offset,
                            size_t len);
/* Shut the sending direction down (the peer reads end of stream). */
int taxi__sock_shutdown_write(taxi_handle_t s);
/* Send one byte, for waking a reader from any thread; a full buffer is
 * success (a byte is waiting already), an interrupted send is retried.
 * 0, or the TAXI_E* code of the failure (then nothing was sent).
 * Async-signal-safe on POSIX. */
int taxi__sock_poke(taxi_handle_t s);
/* Receive and discard what is waiting, without blocking. */
void taxi__sock_drain(taxi_handle_t s);

/* ---- options ------------------------------------------------------------ */

int taxi__sock_nodelay(taxi_handle_t s, bool on);
/* Hand connections of listening socket s over only once their first bytes
 * have arrived, waiting up to `seconds` for them (0: at once, as by
 * default): Linux's TCP_DEFER_ACCEPT.  0, TAXI_ENOTSUP where the system has
 * no such option or s is not a TCP socket, or the error. */
int taxi__sock_defer_accept(taxi_handle_t s, int seconds);
/* While on, hold back part-filled segments (Linux TCP_CORK); off sends
 * what is held.  TAXI_ENOTSUP where the system has no such option (the
 * BSDs' TCP_NOPUSH does not send what it held when cleared everywhere). */
int taxi__sock_cork(taxi_handle_t s, bool on);
/* Keep-alive probes after idle_s seconds without traffic, every
 * interval_s seconds, at most count of them (0: the system's default for
 * any of the three, which some systems do not let a program change). */
int taxi__sock_keepalive(taxi_handle_t s, bool on, unsigned idle_s,
                         unsigned interval_s, unsigned count);

/* ---- datagrams (ports/posix/dgram.c, ports/win32/dgram.c) --------------- */

/* One datagram of a batch: buf (cap bytes) and, for a send, len bytes of
 * it to `addr` (family 0: the connected peer); a receive fills len, addr,
 * truncated (the datagram was longer than cap: the rest is lost) and seg
 * (a receive the kernel coalesced, UDP_GRO: datagrams of seg bytes each,
 * the last one possibly shorter; 0 when it is one datagram). */
typedef struct taxi__dgram_msg {
  void *buf;
  size_t cap, len;
  taxi_addr_t addr;
  bool truncated;
  size_t seg;
} taxi__dgram_msg_t;

/* Socket options of taxi__sock_dgram. */
#define TAXI__DG_V6ONLY 0x1u    /* an IPv6 socket takes no IPv4 traffic */
#define TAXI__DG_REUSEADDR 0x2u /* bind where others are bound too */

/* A non-blocking, close-on-exec datagram socket bound to `local`.  0 or
 * TAXI_EADDRINUSE, TAXI_EPERM, TAXI_EBADADDR (family), TAXI_ESYS ... */
int taxi__sock_dgram(const taxi_addr_t *local, unsigned flags,
                     taxi_handle_t *out);
/* Receive up to n datagrams into records whose buffers stay: with
 * recvmmsg (Linux) through the system's headers for them, built once by
 * taxi__sock_recv_prepare rather than at every call (a batch of 64
 * headers costs more to fill than the one datagram a ping-pong peer
 * sends); elsewhere one recvfrom per datagram (ports/dgram_plain.c, with
 * taxi__sock_recv_batch of the port).  prep_size: the bytes the headers
 * for n records take, which the caller allocates (with taxi's allocator,
 * suitably for any type) and frees once done.  prepare: builds them in
 * mem for records m[0 .. n) (n at most 64), which must outlive it and
 * keep their buf and cap.  recv_prepared: how many (>= 1), TAXI_EAGAIN
 * when none waits, or the error the socket reported (an ICMP error on a
 * connected socket: TAXI_ECONNREFUSED ...), which ends the batch.  One
 * thread at a time per prepared batch. */
typedef struct taxi__recv_prep taxi__recv_prep_t;
size_t taxi__sock_recv_prep_size(unsigned n);
taxi__recv_prep_t *taxi__sock_recv_prepare(void *mem, taxi__dgram_msg_t *m,
                                           unsigned n);
int taxi__sock_recv_prepared(taxi_handle_t s, taxi__recv_prep_t *p);
#if !defined(__linux__)
/* The port's receive of up to n datagrams, one recvfrom each, as
 * taxi__sock_recv_prepared. */
int taxi__sock_recv_batch(taxi_handle_t s, taxi__dgram_msg_t *m, unsigned n);
#endif
/* Send up to n datagrams in order (sendmmsg, else one sendto each): how
 * many went (>= 1), TAXI_EAGAIN when the first would block, or the first
 * one's error (TAXI_EMSGSIZE, TAXI_ECONNREFUSED ...). */
int taxi__sock_send_batch(taxi_handle_t s, const taxi__dgram_msg_t *m,
                          unsigned n);
/* Let the kernel coalesce the datagrams this socket receives (UDP_GRO,
 * Linux 5.0 on): 0, TAXI_ENOTSUP where the system has no such option, or
 * the error. */
int taxi__sock_udp_gro(taxi_handle_t s, bool on);
/* Whether this socket can send segments (UDP_SEGMENT, Linux 4.18 on): 0 or
 * TAXI_ENOTSUP. */
int taxi__sock_udp_gso(taxi_handle_t s);
/* Send the len bytes at buf as datagrams of seg bytes (the last one
 * possibly shorter) to `to` (NULL: the connected peer), in one call that
 * sends all of them or none (UDP_SEGMENT).  0, TAXI_EAGAIN (none went),
 * TAXI_ENOTSUP (not as segments here: the system, the device or the
 * path's MTU refused; send them one by one), or the error. */
int taxi__sock_send_segments(taxi_handle_t s, const void *buf, size_t len,
                             size_t seg, const taxi_addr_t *to);
/* Permit sending to broadcast addresses (SO_BROADCAST): 0 or the error. */
int taxi__sock_broadcast(taxi_handle_t s, bool on);
/* Join (or leave) the multicast group `group` (its port ignored) on the
 * interface with address `iface` (NULL: the system's choice; IPv6: the
 * default interface).  0, TAXI_EBADADDR (not a multicast address, the
 * families differ from the socket's), TAXI_ESYS ... */
int taxi__sock_multicast(taxi_handle_t s, const taxi_addr_t *group,
                         const taxi_addr_t *iface, bool join);
#endif /* TAXI_PORTS_SOCK_H */
