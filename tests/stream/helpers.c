/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/helpers.c - contexts per pair, plain-socket clients, and the
 * echo server the tests talk to.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

taxi_io_dispatcher_t st_dispatcher;
const char *st_backend;

/* The pair from the running suite's name, "stream[lf:epoll]": each suite
 * runs in a process of its own (tests/runner.c). */
void st_pair_load(void) {
  static char backend[64];
  CU_pSuite suite = CU_get_current_suite();
  const char *open = suite && suite->pName ? strchr(suite->pName, '[') : NULL;
  const char *colon = open ? strchr(open, ':') : NULL;
  const char *close = suite ? strrchr(suite->pName, ']') : NULL;
  if (!colon || !close || close < colon) return;
  char head[16];
  size_t n = (size_t)(colon - open - 1);
  if (n >= sizeof head || (size_t)(close - colon - 1) >= sizeof backend) return;
  memcpy(head, open + 1, n);
  head[n] = '\0';
  if (taxi_io_dispatcher_parse(head, &st_dispatcher) < 0) return;
  memcpy(backend, colon + 1, (size_t)(close - colon - 1));
  backend[close - colon - 1] = '\0';
  st_backend = backend;
}

int st_io_create(st_io_t *c) {
  return st_io_create_spread(c, TAXI_SPREAD_ROUND_ROBIN);
}

int st_io_create_spread(st_io_t *c, taxi_group_spread_t spread) {
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.spread = spread;
  return st_io_create_with(c, &o);
}

int st_io_create_with(st_io_t *c, const taxi_io_options_t *base) {
  memset(c, 0, sizeof *c);
  st_pair_load();
  taxi_io_options_t o = *base;
  o.dispatcher = st_dispatcher;
  o.backend = st_backend;
  o.threads = st_dispatcher == TAXI_IO_LF        ? 3
              : st_dispatcher == TAXI_IO_REACTOR ? 1
                                                 : 2;
  int rc = taxi_io_create(&c->io, &o);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) {
    printf("taxi_io_create: %s\n", taxi_strerror(rc));
    c->io = NULL;
    return -1;
  }
  return 0;
}

static void run_main(void *arg) {
  st_io_t *c = arg;
  c->run_rc = taxi_io_run(c->io);
}

void st_io_run(st_io_t *c) {
  CU_ASSERT_EQUAL(util_thread_start(&c->thread, run_main, c), 0);
}

int st_io_stop(st_io_t *c) {
  if (!c->thread.started) return TAXI_ESTOPPED;
  CU_ASSERT_EQUAL(taxi_io_stop(c->io), 0);
  int rc = taxi_io_wait(c->io, 20000);
  util_thread_join(&c->thread, 20000, "taxi_io_run after taxi_io_stop");
  CU_ASSERT_EQUAL(rc, c->run_rc); /* the same result, to every waiter */
  c->thread.started = 0;
  return c->run_rc;
}

void st_io_destroy(st_io_t *c) {
  if (!c->io) return;
  CU_ASSERT_EQUAL(st_io_stop(c), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_io_destroy(c->io), 0);
  c->io = NULL;
}

int st_listen(st_io_t *c, const taxi_listener_options_t *o, taxi_accept_fn fn,
              void *arg, taxi_listener_t **out) {
  taxi_listener_t *l;
  int rc = taxi_listener_create(&l, c->io, "127.0.0.1:0", o, fn, arg);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) {
    printf("taxi_listener_create: %s\n", taxi_strerror(rc));
    return -1;
  }
  taxi_addr_t a;
  CU_ASSERT_EQUAL(taxi_listener_address(l, &a), 0);
  if (out) *out = l;
  return (int)taxi_addr_port(&a);
}

int st_connect(int port) { return st_connect_rcvbuf(port, 0); }

int st_connect_rcvbuf(int port, int rcvbuf) {
  return net_connect_loopback(port, rcvbuf, 10, 1);
}

long st_recv_to_eof(int fd, void *buf, size_t cap) {
  size_t got = 0;
  for (;;) {
    char tmp[4096];
    ssize_t k = recv(fd, tmp, sizeof tmp, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) return (long)got;
    size_t take = (size_t)k;
    if (got + take > cap) take = cap - got;
    memcpy((char *)buf + got, tmp, take);
    got += take;
  }
}

unsigned char st_byte(unsigned seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (unsigned char)(x >> 56);
}

int st_echo_client(int port, size_t total, size_t max_seg, unsigned seed) {
  int fd = st_connect(port);
  if (fd < 0) {
    printf("echo client: connect: %s\n", strerror(errno));
    return -1;
  }
  util_set_nonblock(fd);
  uint64_t sent = 0, got = 0, seg_end = 0;
  unsigned rnd = seed * 2654435761u + 1;
  unsigned char out[65536], in[65536];
  taxi_time_t start = taxi_now();
  int rc = 0;
  while (got < total) {
    if (util_elapsed_ms(start) > 30000) {
      printf("echo client %u: stuck at %llu of %zu bytes echoed\n", seed,
             (unsigned long long)got, total);
      rc = -1;
      break;
    }
    if (sent == seg_end && sent < total) {
      rnd = rnd * 1103515245u + 12345u;
      size_t seg = 1 + (rnd >> 8) % max_seg;
      if (seg > total - sent) seg = total - sent;
      seg_end = sent + seg;
    }
    struct pollfd p = {fd, POLLIN | (sent < seg_end ? POLLOUT : 0), 0};
    if (poll(&p, 1, 100) < 0 && errno != EINTR) {
      rc = -1;
      break;
    }
    if ((p.revents & POLLOUT) && sent < seg_end) {
      size_t n = seg_end - sent;
      if (n > sizeof out) n = sizeof out;
      for (size_t i = 0; i < n; i++) out[i] = st_byte(seed, sent + i);
      ssize_t k = send(fd, out, n, MSG_NOSIGNAL);
      if (k > 0) sent += (uint64_t)k;
      if (k < 0 && errno != EAGAIN && errno != EINTR) {
        printf("echo client %u: send: %s\n", seed, strerror(errno));
        rc = -1;
        break;
      }
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = recv(fd, in, sizeof in, 0);
      if (k == 0) {
        printf("echo client %u: EOF after %llu bytes\n", seed,
               (unsigned long long)got);
        rc = -1;
        break;
      }
      if (k < 0 && errno != EAGAIN && errno != EINTR) {
        printf("echo client %u: recv: %s\n", seed, strerror(errno));
        rc = -1;
        break;
      }
      for (ssize_t i = 0; i < k; i++)
        if (in[i] != st_byte(seed, got + (uint64_t)i)) {
          printf("echo client %u: byte %llu differs\n", seed,
                 (unsigned long long)(got + (uint64_t)i));
          close(fd);
          return -1;
        }
      if (k > 0) got += (uint64_t)k;
      if (got > sent) {
        printf("echo client %u: more echoed than sent\n", seed);
        rc = -1;
        break;
      }
    }
  }
  close(fd);
  return rc;
}

int st_wait(int (*pred)(void *), void *arg, int max_ms) {
  taxi_time_t start = taxi_now();
  while (!pred(arg)) {
    if (util_elapsed_ms(start) > max_ms) return 0;
    util_sleep_ms(1);
  }
  return 1;
}

/* ---- the echo server ----------------------------------------------------- */

static void echo_read(taxi_stream_t *s, int status, const void *data,
                      size_t len) {
  st_echo_t *e = taxi_stream_data(s);
  if (status == TAXI_EEOF) {
    /* Echo what is still queued, then close. */
    atomic_fetch_add(&e->eofs, 1);
    taxi_stream_end(s);
    return;
  }
  if (taxi_stream_write(s, data, len, NULL, NULL) < 0) {
    atomic_fetch_add(&e->write_errors, 1);
    taxi_stream_close(s);
    return;
  }
  long q = (long)taxi_stream_write_queued(s);
  long m = atomic_load(&e->max_queued);
  while (q > m && !atomic_compare_exchange_weak(&e->max_queued, &m, q)) {
  }
}

static void echo_closed(taxi_stream_t *s, int reason) {
  st_echo_t *e = taxi_stream_data(s);
  (void)reason;
  atomic_fetch_add(&e->closed, 1);
}

void st_echo_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  st_echo_t *e = arg;
  atomic_fetch_add(&e->accepted, 1);
  taxi_stream_set_data(s, e);
  taxi_stream_on_close(s, echo_closed);
  taxi_stream_read_start(s, echo_read);
}
