/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/regfiles.c - io_uring's table of registered files
 * (TAXI_PFEAT_REGISTERED_FILES): handles get slots, the slots change
 * nothing the application sees, and they never outlive their handles.
 *
 * What must hold where the feature is on: a connection the proactor
 * accepted is in a slot once an operation has started on it
 * (stats.registered_handles), and echoes byte for byte, while handles the
 * application attaches (a listener, its own sockets) stay on their
 * descriptors; a table too small (TAXI_URING_FILES, the backend's test
 * knob) leaves the other connections on their descriptors
 * (stats.register_failures), which work the same; connections closed
 * with reads pending, their numbers and slots reused at once, never see
 * each other's bytes, and leave no slot behind; a connection detached
 * with a read pending and attached again at once works; a close reaches
 * the peer without a dispatch (the slot's reference to the socket is
 * dropped at once); a socket connected through a group's proactor, then
 * moved to another and back, leaves one ring's table for the other's.
 * Where it is off (another backend, or TAXI_PROACTOR_NO_REGISTERED_FILES),
 * the counters stay 0.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static taxi_proactor_stats_t rf_stats(taxi_proactor_t *p) {
  taxi_proactor_stats_t st;
  memset(&st, 0xff, sizeof st);
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  return st;
}

/* 1 when p has the table; else asserts the counters say nothing, prints
 * why the rest of the test does not apply, and returns 0. */
static int rf_on(taxi_proactor_t *p) {
  unsigned f = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p, &f), 0);
  if (pt_backend_is("uring") &&
      !(util_proactor_flags & TAXI_PROACTOR_NO_REGISTERED_FILES))
    /* io_uring has had the table since 5.5, FILES_UPDATE since 5.6. */
    CU_ASSERT(f & TAXI_PFEAT_REGISTERED_FILES);
  if (f & TAXI_PFEAT_REGISTERED_FILES) return 1;
  taxi_proactor_stats_t st = rf_stats(p);
  CU_ASSERT_EQUAL(st.registered_handles, 0);
  CU_ASSERT_EQUAL(st.register_failures, 0);
  printf("(no table of registered files here) ");
  return 0;
}

/* A proactor made with the table's size set through the backend's knob
 * (0: unset). */
static taxi_proactor_t *rf_proactor(unsigned slots) {
  char v[16];
  if (slots) {
    snprintf(v, sizeof v, "%u", slots);
    CU_ASSERT_FATAL(setenv("TAXI_URING_FILES", v, 1) == 0);
  }
  taxi_proactor_t *p = pt_proactor();
  unsetenv("TAXI_URING_FILES");
  return p;
}

/* Read exactly len bytes from h (attached to p) into buf. */
static int rf_read(taxi_proactor_t *p, taxi_handle_t h, void *buf, size_t len) {
  taxi_op_t op;
  pt_done_t d;
  taxi_op_init(&op);
  pt_done_init(&d);
  if (taxi_proactor_read(p, &op, h, buf, len, TAXI_READ_EXACT, pt_on_done,
                         &d) != 0)
    return -1;
  if (!pt_run_done(p, &d, 1)) return -1;
  return d.status == 0 && d.bytes == len ? 0 : -1;
}

static int rf_write(taxi_proactor_t *p, taxi_handle_t h, const void *buf,
                    size_t len) {
  taxi_op_t op;
  pt_done_t d;
  taxi_buf_t b = {(void *)buf, len};
  taxi_op_init(&op);
  pt_done_init(&d);
  if (taxi_proactor_write(p, &op, h, &b, 1, pt_on_done, &d) != 0) return -1;
  if (!pt_run_done(p, &d, 1)) return -1;
  return d.status == 0 && d.bytes == len ? 0 : -1;
}

/* Echo `len` pseudo-random bytes from peer through h and back, in chunks
 * of `chunk`; 0 when every byte came back in order. */
static int rf_echo(taxi_proactor_t *p, taxi_handle_t h, int peer, size_t len,
                   size_t chunk, uint64_t seed) {
  unsigned char *out = malloc(len), *mid = malloc(chunk), *back = malloc(len);
  int rc = -1;
  if (!out || !mid || !back) goto done;
  pt_fill(out, len, seed);
  for (size_t off = 0; off < len; off += chunk) {
    size_t n = len - off < chunk ? len - off : chunk;
    size_t got = 0;
    if (pt_peer_write(peer, out + off, n) != 0) goto done;
    if (rf_read(p, h, mid, n) != 0) goto done;
    if (rf_write(p, h, mid, n) != 0) goto done;
    if (pt_peer_read(peer, back + off, n, &got) != 0) goto done;
  }
  rc = pt_diff(out, back, len) < 0 ? 0 : -1;
done:
  free(out);
  free(mid);
  free(back);
  return rc;
}

/* ---- connections the proactor made -------------------------------------- */

/* A listener attached to p (the application's own handle). */
static taxi_handle_t rf_listener(taxi_proactor_t *p, int *port) {
  int lfd = util_tcp_listener(port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  return lfd;
}

/* A connection accepted by p from lfd: sv[0] (attached, the proactor's
 * own), its peer sv[1] (a plain non-blocking socket). */
static void rf_accepted(taxi_proactor_t *p, taxi_handle_t lfd, int port,
                        int sv[2]) {
  taxi_op_t op;
  pt_done_t d;
  taxi_op_init(&op);
  pt_done_init(&d);
  sv[1] = util_tcp_connect_nb(port);
  CU_ASSERT_FATAL(sv[1] >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_accept(p, &op, lfd, 0, pt_on_done, &d),
                        0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL_FATAL(d.status, 0);
  sv[0] = d.accepted;
}

static void test_accepted(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  int port = 0, sv[2];
  taxi_handle_t lfd = rf_listener(p, &port);
  rf_accepted(p, lfd, port, sv);
  /* The listener is the application's: no slot; the connection gets one
   * with its first operation. */
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 256 * 1024, 16 * 1024, 7), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 1);
    CU_ASSERT_EQUAL(st.register_failures, 0);
  }
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

/* Handles the application attaches stay on their descriptors. */
static void test_user_handles(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  int sv[2], tv[2];
  pt_pair(p, sv);
  pt_tcp_pair(p, tv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 8192, 1000, 1), 0);
  CU_ASSERT_EQUAL(rf_echo(p, tv[0], tv[1], 8192, 1000, 2), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 0);
    CU_ASSERT_EQUAL(st.register_failures, 0);
  }
  /* Detached, then closed by the application: the peer sees the end. */
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, tv[0]), 0);
  pt_close(&tv[0]);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(tv[1]), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  pt_close(&tv[1]);
  pt_destroy(p);
}

/* ---- a full table -------------------------------------------------------- */

#define RF_FULL_CONNS 5

static void test_table_full(void) {
  taxi_proactor_t *p = rf_proactor(2);
  int on = rf_on(p);
  int port = 0, sv[RF_FULL_CONNS][2];
  taxi_handle_t lfd = rf_listener(p, &port);
  for (int i = 0; i < RF_FULL_CONNS; i++) rf_accepted(p, lfd, port, sv[i]);
  /* Each echoes: the first two from slots, the others from their fds. */
  for (int i = 0; i < RF_FULL_CONNS; i++)
    CU_ASSERT_EQUAL(rf_echo(p, sv[i][0], sv[i][1], 8192, 1000, 100 + i), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 2);
    CU_ASSERT_EQUAL(st.register_failures, RF_FULL_CONNS - 2);
  }
  /* A freed slot goes to the next new connection. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0][0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[0][1]), 0);
  pt_close(&sv[0][1]);
  rf_accepted(p, lfd, port, sv[0]);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0][0], sv[0][1], 4096, 4096, 99), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 2);
    CU_ASSERT_EQUAL(st.register_failures, RF_FULL_CONNS - 2);
  }
  /* Both kinds end the same way. */
  for (int i = 0; i < RF_FULL_CONNS; i++) {
    CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[i][0]), 0);
    CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[i][1]), 0);
    pt_close(&sv[i][1]);
  }
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

/* ---- closed with operations pending, numbers reused --------------------- */

#define RF_ROUNDS 300
#define RF_MSG 16

typedef struct rf_conn {
  int sv[2];
  unsigned char tag;
  taxi_op_t rop;
  unsigned char rbuf[RF_MSG];
  atomic_int *foreign;
  atomic_int *done;
} rf_conn_t;

static void rf_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  rf_conn_t *c = act;
  (void)op;
  (void)status;
  for (size_t i = 0; i < bytes; i++)
    if (c->rbuf[i] != c->tag) {
      atomic_fetch_add(c->foreign, 1);
      break;
    }
  atomic_fetch_add(c->done, 1);
}

static void rf_close_conn(taxi_proactor_t *p, rf_conn_t *c) {
  CU_ASSERT_EQUAL(taxi_proactor_close(p, c->sv[0]), 0);
  pt_close(&c->sv[1]);
}

/* A table of a few slots, so that slots are reused as often as numbers:
 * each round accepts a connection (on the number, and perhaps the slot,
 * of one closed before), starts a read on it and closes the one before;
 * by turns the read's peer has written, or not (the read is pending when
 * it is closed), or the new one is closed too before the next wait. */
static void test_close_pending_reuse(void) {
  taxi_proactor_t *p = rf_proactor(4);
  int on = rf_on(p);
  int port = 0;
  taxi_handle_t lfd = rf_listener(p, &port);
  int rounds = pt_small() ? RF_ROUNDS / 4 : RF_ROUNDS;
  rf_conn_t *c = calloc((size_t)rounds, sizeof *c);
  CU_ASSERT_FATAL(c != NULL);
  atomic_int foreign, done;
  atomic_init(&foreign, 0);
  atomic_init(&done, 0);
  int live = -1;
  uint64_t max_registered = 0;
  for (int i = 0; i < rounds; i++) {
    c[i].tag = (unsigned char)(1 + i % 251);
    c[i].foreign = &foreign;
    c[i].done = &done;
    taxi_op_init(&c[i].rop);
    rf_accepted(p, lfd, port, c[i].sv);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &c[i].rop, c[i].sv[0], c[i].rbuf, RF_MSG,
                           TAXI_READ_EXACT, rf_on_read, &c[i]),
        0);
    if (i % 3 != 1) {
      unsigned char out[RF_MSG];
      memset(out, c[i].tag, sizeof out);
      CU_ASSERT_EQUAL_FATAL(pt_peer_write(c[i].sv[1], out, sizeof out), 0);
    }
    uint64_t r = rf_stats(p).registered_handles;
    if (r > max_registered) max_registered = r;
    if (live >= 0) rf_close_conn(p, &c[live]);
    live = i;
    if (i % 3 == 2) {
      rf_close_conn(p, &c[i]);
      live = -1;
    }
  }
  if (live >= 0) rf_close_conn(p, &c[live]);
  CU_ASSERT(pt_run_count(p, &done, rounds));
  CU_ASSERT_EQUAL(atomic_load(&foreign), 0);
  if (on) {
    CU_ASSERT(max_registered >= 1);
    CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  }
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  free(c);
  pt_destroy(p);
}

/* ---- detached and attached again at once -------------------------------- */

static void test_detach_reattach(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  int port = 0, sv[2];
  taxi_handle_t lfd = rf_listener(p, &port);
  rf_accepted(p, lfd, port, sv);
  char b1[8], b2[8];
  taxi_op_t o1, o2;
  pt_done_t d1, d2;
  taxi_op_init(&o1);
  taxi_op_init(&o2);
  pt_done_init(&d1);
  pt_done_init(&d2);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &o1, sv[0], b1, 4,
                                           TAXI_READ_EXACT, pt_on_done, &d1),
                        0);
  /* The read still pending, its slot still named: the new attachment
   * shares the slot until the old one's read has completed. */
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, sv[0]), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &o2, sv[0], b2, 4,
                                           TAXI_READ_EXACT, pt_on_done, &d2),
                        0);
  CU_ASSERT(pt_run_done(p, &d1, 1));
  CU_ASSERT_EQUAL(d1.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(pt_peer_write(sv[1], "abcd", 4), 0);
  CU_ASSERT(pt_run_done(p, &d2, 1));
  CU_ASSERT_EQUAL(d2.status, 0);
  CU_ASSERT_EQUAL(memcmp(b2, "abcd", 4), 0);
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 1);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 4096, 512, 3), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  pt_close(&sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

/* ---- an install the kernel refuses -------------------------------------- */

/* The application closes the descriptor behind taxi's back between the
 * start of the first read (its install still only queued) and the next
 * wait: the install fails, the handle is counted and goes back to its
 * fd, and the read ends with an error, once. */
static void test_install_refused(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  if (!on) {
    /* A closed descriptor's read may never complete elsewhere (the
     * emulated proactor's reactor stops watching it): io_uring only. */
    pt_destroy(p);
    return;
  }
  int port = 0, sv[2];
  taxi_handle_t lfd = rf_listener(p, &port);
  rf_accepted(p, lfd, port, sv);
  char buf[8];
  taxi_op_t op;
  pt_done_t d;
  taxi_op_init(&op);
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, pt_on_done, &d), 0);
  int h = sv[0];
  pt_close(&sv[0]);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT(d.status < 0);
  taxi_proactor_stats_t st = rf_stats(p);
  CU_ASSERT_EQUAL(st.registered_handles, 0);
  CU_ASSERT_EQUAL(st.register_failures, 1);
  /* Detached, not closed: the number is no longer the proactor's. */
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, h), 0);
  pt_settle(p, 20);
  /* The slot is free again for the next connection. */
  rf_accepted(p, lfd, port, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 1000, 100, 8), 0);
  CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 1);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  pt_close(&sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

/* ---- a close reaches the peer without a dispatch ------------------------- */

static void test_close_without_dispatch(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  int port = 0, sv[2];
  taxi_handle_t lfd = rf_listener(p, &port);
  rf_accepted(p, lfd, port, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 100, 100, 5), 0);
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 1);
  /* Nothing pending: the descriptor is closed in the call, and the slot,
   * which holds the socket too, is emptied in it. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  /* Detached: the application's close ends it the same way. */
  rf_accepted(p, lfd, port, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 100, 100, 6), 0);
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, sv[0]), 0);
  pt_close(&sv[0]);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

/* ---- connected, then moved between a group's proactors ------------------ */

typedef struct rf_move {
  taxi_proactor_group_t *g;
  int lfd;
  int sv[2];
  taxi_op_t cop, rop;
  char in[2];
  int rc[4], status[3];
  uint64_t reg[2][2]; /* [step][proactor]: registered_handles */
} rf_move_t;

static void rf_note(rf_move_t *m, int step) {
  for (unsigned i = 0; i < 2; i++) {
    taxi_proactor_stats_t st;
    m->reg[step][i] =
        taxi_proactor_stats(taxi_proactor_group_at(m->g, i), &st) == 0
            ? st.registered_handles
            : 99;
  }
}

static void rf_move_read2(taxi_op_t *op, int status, size_t bytes, void *act) {
  rf_move_t *m = act;
  (void)op;
  (void)bytes;
  m->status[2] = status;
  rf_note(m, 1);
  taxi_proactor_group_stop(m->g);
}

/* In proactor 1's thread: back to 0, and read there. */
static void rf_move_read1(taxi_op_t *op, int status, size_t bytes, void *act) {
  rf_move_t *m = act;
  (void)op;
  (void)bytes;
  taxi_proactor_t *p0 = taxi_proactor_group_at(m->g, 0);
  taxi_proactor_t *p1 = taxi_proactor_group_at(m->g, 1);
  m->status[1] = status;
  rf_note(m, 0);
  m->rc[2] = taxi_proactor_move(p1, m->sv[0], p0);
  m->rc[3] = taxi_proactor_read(p0, &m->rop, m->sv[0], &m->in[1], 1, 0,
                                rf_move_read2, m);
  if (m->rc[2] || m->rc[3] || pt_peer_write(m->sv[1], "b", 1))
    taxi_proactor_group_stop(m->g);
}

/* In proactor 0's thread, connected (in 0's table since the connect):
 * take the other end, move to 1 and read there. */
static void rf_move_connected(taxi_op_t *op, int status, size_t bytes,
                              void *act) {
  rf_move_t *m = act;
  (void)op;
  (void)bytes;
  taxi_proactor_t *p0 = taxi_proactor_group_at(m->g, 0);
  taxi_proactor_t *p1 = taxi_proactor_group_at(m->g, 1);
  m->status[0] = status;
  if (status == 0) {
    m->sv[1] = accept(m->lfd, NULL, NULL);
    if (m->sv[1] >= 0) (void)util_set_nonblock(m->sv[1]);
  }
  if (status != 0 || m->sv[1] < 0) {
    taxi_proactor_group_stop(m->g);
    return;
  }
  m->rc[0] = taxi_proactor_move(p0, m->sv[0], p1);
  m->rc[1] = taxi_proactor_read(p1, &m->rop, m->sv[0], &m->in[0], 1, 0,
                                rf_move_read1, m);
  if (m->rc[0] || m->rc[1] || pt_peer_write(m->sv[1], "a", 1))
    taxi_proactor_group_stop(m->g);
}

static void test_move(void) {
  if (pt_backend_is("iocp")) {
    printf("(iocp: handles cannot move) ");
    return;
  }
  static rf_move_t m;
  memset(&m, 0, sizeof m);
  m.status[0] = m.status[1] = m.status[2] = 1;
  m.sv[1] = -1;
  m.g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  taxi_proactor_t *p0 = taxi_proactor_group_at(m.g, 0);
  unsigned f = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p0, &f), 0);
  int on = (f & TAXI_PFEAT_REGISTERED_FILES) != 0;
  int port = 0;
  m.lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(m.lfd >= 0);
  /* A socket of the application's, connected through proactor 0. */
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  m.sv[0] = socket(AF_INET, SOCK_STREAM, 0);
  CU_ASSERT_FATAL(m.sv[0] >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p0, m.sv[0]), 0);
  taxi_op_init(&m.cop);
  taxi_op_init(&m.rop);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_connect(p0, &m.cop, m.sv[0], &a, sizeof a,
                                              rf_move_connected, &m),
                        0);
  CU_ASSERT_EQUAL(gr_run(m.g), TAXI_ESTOPPED);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(m.rc[i], 0);
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(m.status[i], 0);
  CU_ASSERT_EQUAL(m.in[0], 'a');
  CU_ASSERT_EQUAL(m.in[1], 'b');
  if (on) {
    /* On 1 (in its table, gone from 0's), then back on 0. */
    CU_ASSERT_EQUAL(m.reg[0][0], 0);
    CU_ASSERT_EQUAL(m.reg[0][1], 1);
    CU_ASSERT_EQUAL(m.reg[1][0], 1);
    CU_ASSERT_EQUAL(m.reg[1][1], 0);
  } else {
    printf("(no table of registered files here) ");
  }
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(m.g), 0);
  if (m.sv[1] >= 0) CU_ASSERT_EQUAL(pt_peer_read_to_eof(m.sv[1]), 0);
  pt_close(&m.sv[1]);
  pt_close(&m.lfd);
}

/* ---- turned off -----------------------------------------------------------
 */

static void test_off(void) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.flags = util_proactor_flags | TAXI_PROACTOR_NO_REGISTERED_FILES;
  taxi_proactor_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &o), 0);
  unsigned f = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p, &f), 0);
  CU_ASSERT_EQUAL(f & TAXI_PFEAT_REGISTERED_FILES, 0);
  int port = 0, sv[2];
  taxi_handle_t lfd = rf_listener(p, &port);
  rf_accepted(p, lfd, port, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 4096, 1024, 11), 0);
  taxi_proactor_stats_t st = rf_stats(p);
  CU_ASSERT_EQUAL(st.registered_handles, 0);
  CU_ASSERT_EQUAL(st.register_failures, 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

static CU_TestInfo regfiles_tests[] = {
    {"accepted connections get slots and echo byte for byte", test_accepted},
    {"handles the application attaches stay on their descriptors",
     test_user_handles},
    {"a full table leaves the rest on their descriptors, working the same",
     test_table_full},
    {"closed with reads pending, numbers and slots reused: no byte crosses",
     test_close_pending_reuse},
    {"detached with a read pending and attached again at once",
     test_detach_reattach},
    {"an install the kernel refuses: counted, back on the fd",
     test_install_refused},
    {"a close reaches the peer without a dispatch",
     test_close_without_dispatch},
    {"connected, then moved: one ring's table for the other's", test_move},
    {"TAXI_PROACTOR_NO_REGISTERED_FILES: no table", test_off},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_regfiles = {"registered files", regfiles_tests,
                                             120, NULL};
