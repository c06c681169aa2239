/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/net_helpers.h - the blocking TCP client side that several test
 * programs drive their servers with (the stream and pool-set suites,
 * tests/relay_check).  Plain sockets only, no taxi and no CUnit, so that
 * a program that does not link libtaxi can use it too.
 *
 * Each returns 0 (or a descriptor) on success, -1 with errno set on
 * failure.  The caller owns the descriptors.
 */
#ifndef TAXI_TESTS_NET_HELPERS_H
#define TAXI_TESTS_NET_HELPERS_H

#include <stddef.h>

/* Send all n bytes of buf (no SIGPIPE); -1 on an error, an end of the
 * connection or a time-out. */
int net_send_all(int fd, const void *buf, size_t n);

/* Receive exactly n bytes into buf; -1 on an error, the end of the stream
 * or a time-out. */
int net_recv_all(int fd, void *buf, size_t n);

/* A blocking TCP connection to 127.0.0.1:port with send and receive
 * time-outs of timeout_s seconds, a receive buffer of rcvbuf bytes if not
 * 0 (set before connecting, so the window is sized by it), and
 * TCP_NODELAY if nodelay.  A connect interrupted by a signal is waited
 * for (bounded by the time-out) rather than failed. */
int net_connect_loopback(int port, int rcvbuf, int timeout_s, int nodelay);

/* A TCP socket bound to the loopback address of family (AF_INET or
 * AF_INET6) and never listening: a connect to *port is refused for as
 * long as the caller keeps the descriptor, and no other socket can take
 * the port meanwhile (a port merely bound and closed again can be handed
 * to a test running beside this one, whose listener then accepts). */
int net_refusing_port(int family, int *port);

/* A UDP port of 127.0.0.1 that nothing has bound now, for a datagram that
 * must meet ICMP port unreachable.  It is taken below the system's
 * ephemeral range (Linux: ip_local_port_range; 32768 where it cannot
 * tell), where no program running beside this one binding port 0 lands:
 * a port bound and closed again there could be given to one of theirs.
 * Never 0. */
unsigned net_quiet_udp_port(void);

#endif /* TAXI_TESTS_NET_HELPERS_H */
