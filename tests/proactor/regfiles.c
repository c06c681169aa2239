/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/regfiles.c - io_uring's table of registered files
 * (TAXI_PFEAT_REGISTERED_FILES): handles get slots, the slots change
 * nothing the application sees, and they never outlive their handles.
 *
 * What must hold where the feature is on: an accepted connection (and the
 * listener) is in a slot once an operation has started on it
 * (stats.registered_handles), and echoes byte for byte; a table too small
 * (TAXI_URING_FILES, the backend's test knob) leaves the other handles on
 * their descriptors (stats.register_failures), which work the same;
 * handles closed with operations pending, their numbers reused at once,
 * never see each other's bytes, and leave no slot behind; a handle
 * detached with a read pending and attached again at once works; a close
 * reaches the peer without a dispatch (the slot's reference to the socket
 * is dropped at once); a handle moved between a group's proactors leaves
 * one ring's table for the other's.  Where it is off (another backend, or
 * TAXI_PROACTOR_NO_REGISTERED_FILES), the counters stay 0.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- accepted connections ----------------------------------------------- */

static void test_accepted(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  int peer = util_tcp_connect_nb(port);
  CU_ASSERT_FATAL(peer >= 0);
  taxi_op_t aop;
  pt_done_t ad;
  taxi_op_init(&aop);
  pt_done_init(&ad);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_accept(p, &aop, lfd, 0, pt_on_done, &ad),
                        0);
  CU_ASSERT_FATAL(pt_run_done(p, &ad, 1));
  CU_ASSERT_EQUAL_FATAL(ad.status, 0);
  taxi_handle_t h = ad.accepted;
  /* The listener is in a slot since its accept; the connection gets one
   * with its first operation. */
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 1);
  CU_ASSERT_EQUAL(rf_echo(p, h, peer, 256 * 1024, 16 * 1024, 7), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 2);
    CU_ASSERT_EQUAL(st.register_failures, 0);
  }
  CU_ASSERT_EQUAL(taxi_proactor_close(p, h), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(peer), 0);
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 1);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  pt_close(&peer);
  pt_destroy(p);
}

/* ---- a full table -------------------------------------------------------- */

#define RF_FULL_PAIRS 5

static void test_table_full(void) {
  taxi_proactor_t *p = rf_proactor(2);
  int on = rf_on(p);
  int sv[RF_FULL_PAIRS][2];
  for (int i = 0; i < RF_FULL_PAIRS; i++) pt_pair(p, sv[i]);
  /* Each echoes: the first two from slots, the others from their fds. */
  for (int i = 0; i < RF_FULL_PAIRS; i++)
    CU_ASSERT_EQUAL(rf_echo(p, sv[i][0], sv[i][1], 8192, 1000, 100 + i), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 2);
    CU_ASSERT_EQUAL(st.register_failures, RF_FULL_PAIRS - 2);
  }
  /* A freed slot goes to the next new handle. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0][0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[0][1]), 0);
  pt_close(&sv[0][1]);
  pt_pair(p, sv[0]);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0][0], sv[0][1], 4096, 4096, 99), 0);
  if (on) {
    taxi_proactor_stats_t st = rf_stats(p);
    CU_ASSERT_EQUAL(st.registered_handles, 2);
    CU_ASSERT_EQUAL(st.register_failures, RF_FULL_PAIRS - 2);
  }
  /* Both kinds go the same way. */
  for (int i = 0; i < RF_FULL_PAIRS; i++) {
    CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[i][0]), 0);
    CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[i][1]), 0);
    pt_close(&sv[i][1]);
  }
  if (on) CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  pt_destroy(p);
}

/* ---- closed with operations pending, numbers reused --------------------- */

#define RF_ROUNDS 400
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

/* A table of a few slots, so that they are reused as often as the
 * numbers: each round opens a connection (perhaps on the number and the
 * slot of one just closed), starts a read whose peer writes at once, and
 * closes one connection, its read perhaps still pending. */
static void test_close_pending_reuse(void) {
  taxi_proactor_t *p = rf_proactor(4);
  int on = rf_on(p);
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
    CU_ASSERT_FATAL(util_socketpair(c[i].sv) == 0);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, c[i].sv[0]), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &c[i].rop, c[i].sv[0], c[i].rbuf, RF_MSG,
                           TAXI_READ_EXACT, rf_on_read, &c[i]),
        0);
    unsigned char out[RF_MSG];
    memset(out, c[i].tag, sizeof out);
    CU_ASSERT_EQUAL_FATAL(pt_peer_write(c[i].sv[1], out, sizeof out), 0);
    uint64_t r = rf_stats(p).registered_handles;
    if (r > max_registered) max_registered = r;
    if (i % 3 == 0) taxi_proactor_handle_events(p, 0);
    /* Close the previous one: its read done or pending. */
    if (live >= 0) {
      CU_ASSERT_EQUAL(taxi_proactor_close(p, c[live].sv[0]), 0);
      pt_close(&c[live].sv[1]);
    }
    live = i;
  }
  CU_ASSERT_EQUAL(taxi_proactor_close(p, c[live].sv[0]), 0);
  pt_close(&c[live].sv[1]);
  CU_ASSERT(pt_run_count(p, &done, rounds));
  CU_ASSERT_EQUAL(atomic_load(&foreign), 0);
  if (on) {
    CU_ASSERT(max_registered >= 1);
    CU_ASSERT_EQUAL(rf_stats(p).registered_handles, 0);
  }
  free(c);
  pt_destroy(p);
}

/* ---- detached and attached again at once -------------------------------- */

static void test_detach_reattach(void) {
  taxi_proactor_t *p = pt_proactor();
  int on = rf_on(p);
  int sv[2];
  pt_pair(p, sv);
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
  pt_destroy(p);
}

/* ---- a close reaches the peer without a dispatch ------------------------- */

static void test_close_without_dispatch(void) {
  taxi_proactor_t *p = pt_proactor();
  (void)rf_on(p);
  int sv[2];
  pt_tcp_pair(p, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 100, 100, 5), 0);
  /* Nothing pending: the descriptor is closed in the call, and the slot,
   * which holds the socket too, is emptied in it. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  /* Detached: the application's close ends it the same way. */
  pt_tcp_pair(p, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 100, 100, 6), 0);
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, sv[0]), 0);
  pt_close(&sv[0]);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* ---- moved between a group's proactors ----------------------------------- */

typedef struct rf_move {
  taxi_proactor_group_t *g;
  int sv[2];
  taxi_op_t post, rop, wop;
  char in[2];
  int rc[4], status[2];
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
  m->status[1] = status;
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
  m->status[0] = status;
  rf_note(m, 0);
  m->rc[2] = taxi_proactor_move(p1, m->sv[0], p0);
  m->rc[3] = taxi_proactor_read(p0, &m->rop, m->sv[0], &m->in[1], 1, 0,
                                rf_move_read2, m);
  if (m->rc[2] || m->rc[3] || pt_peer_write(m->sv[1], "b", 1))
    taxi_proactor_group_stop(m->g);
}

/* In proactor 0's thread: the handle, in 0's table since a read there,
 * moves to 1 and reads there. */
static void rf_move_start(taxi_op_t *op, int status, size_t bytes, void *act) {
  rf_move_t *m = act;
  (void)op;
  (void)status;
  (void)bytes;
  taxi_proactor_t *p0 = taxi_proactor_group_at(m->g, 0);
  taxi_proactor_t *p1 = taxi_proactor_group_at(m->g, 1);
  m->rc[0] = taxi_proactor_move(p0, m->sv[0], p1);
  m->rc[1] = taxi_proactor_read(p1, &m->rop, m->sv[0], &m->in[0], 1, 0,
                                rf_move_read1, m);
  if (m->rc[0] || m->rc[1] || pt_peer_write(m->sv[1], "a", 1))
    taxi_proactor_group_stop(m->g);
}

static void rf_move_first(taxi_op_t *op, int status, size_t bytes, void *act) {
  rf_move_t *m = act;
  (void)bytes;
  /* The first read, on 0, done: move from this handler. */
  if (status != 0) {
    taxi_proactor_group_stop(m->g);
    return;
  }
  rf_move_start(op, status, bytes, act);
}

static void test_move(void) {
  if (pt_backend_is("iocp")) {
    printf("(iocp: handles cannot move) ");
    return;
  }
  static rf_move_t m;
  memset(&m, 0, sizeof m);
  m.status[0] = m.status[1] = 1;
  m.g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  taxi_proactor_t *p0 = taxi_proactor_group_at(m.g, 0);
  unsigned f = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p0, &f), 0);
  int on = (f & TAXI_PFEAT_REGISTERED_FILES) != 0;
  pt_tcp_pair(p0, m.sv);
  taxi_op_init(&m.post);
  taxi_op_init(&m.rop);
  static char first;
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p0, &m.post, m.sv[0], &first, 1, 0, rf_move_first, &m),
      0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(m.sv[1], "0", 1), 0);
  CU_ASSERT_EQUAL(gr_run(m.g), 0);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(m.rc[i], 0);
  CU_ASSERT_EQUAL(m.status[0], 0);
  CU_ASSERT_EQUAL(m.status[1], 0);
  CU_ASSERT_EQUAL(first, '0');
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
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(m.sv[1]), 0);
  pt_close(&m.sv[1]);
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
  int sv[2];
  pt_pair(p, sv);
  CU_ASSERT_EQUAL(rf_echo(p, sv[0], sv[1], 4096, 1024, 11), 0);
  taxi_proactor_stats_t st = rf_stats(p);
  CU_ASSERT_EQUAL(st.registered_handles, 0);
  CU_ASSERT_EQUAL(st.register_failures, 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(sv[1]), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

static CU_TestInfo regfiles_tests[] = {
    {"accepted connections get slots and echo byte for byte", test_accepted},
    {"a full table leaves the rest on their descriptors, working the same",
     test_table_full},
    {"closed with reads pending, numbers and slots reused: no byte crosses",
     test_close_pending_reuse},
    {"detached with a read pending and attached again at once",
     test_detach_reattach},
    {"a close reaches the peer without a dispatch",
     test_close_without_dispatch},
    {"a moved handle leaves one ring's table for the other's", test_move},
    {"TAXI_PROACTOR_NO_REGISTERED_FILES: no table", test_off},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_regfiles = {"registered files", regfiles_tests,
                                             120, NULL};
