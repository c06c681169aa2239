/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram_helpers.c - the plain UDP sockets the datagram tests
 * talk to an endpoint with (tests/stream/suites.h).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

unsigned st_dgram_port(taxi_dgram_t *d) {
  taxi_addr_t a;
  CU_ASSERT_EQUAL(taxi_dgram_address(d, &a), 0);
  return taxi_addr_port(&a);
}

int st_udp_socket(unsigned *port) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  CU_ASSERT_FATAL(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CU_ASSERT_EQUAL(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  CU_ASSERT_EQUAL(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  struct timeval tv = {.tv_sec = 10};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (port) *port = ntohs(a.sin_port);
  return fd;
}

/* Again after EINTR: io_uring's task work for requests this thread
 * submitted interrupts a receive that has a time-out (SO_RCVTIMEO) with
 * EINTR instead of restarting it. */
ssize_t st_udp_recv(int fd, void *buf, size_t len) {
  ssize_t n;
  do n = recv(fd, buf, len, 0);
  while (n < 0 && errno == EINTR);
  return n;
}

void st_udp_send(int fd, unsigned port, const void *buf, size_t len) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  CU_ASSERT_EQUAL(sendto(fd, buf, len, 0, (struct sockaddr *)&a, sizeof a),
                  (ssize_t)len);
}
