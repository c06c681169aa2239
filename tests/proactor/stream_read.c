/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/stream_read.c - reads on stream sockets: a read-some
 * returns what arrived, an exact read gathers many small segments, several
 * reads per handle complete in order (tests of the stream suite, in
 * stream.c).
 */
#define _GNU_SOURCE 1

#include "stream_helpers.h"

static void st_writer_run(void *arg) {
  st_writer_t *w = arg;
  uint64_t s = w->seed;
  size_t off = 0;
  unsigned pieces = 0;
  while (off < w->len) {
    size_t n = 1 + (size_t)(pt_rand(&s) % w->max_piece);
    if (n > w->len - off) n = w->len - off;
    if (pt_peer_write(w->fd, w->data + off, n) != 0) {
      w->failed = 1;
      return;
    }
    off += n;
    if (w->pause_every && ++pieces % w->pause_every == 0) pt_sleep_ms(1);
  }
}

/* ---- reads --------------------------------------------------------------- */

/* A read without TAXI_READ_EXACT completes with what arrived (fewer bytes
 * than asked), and the following reads get the rest, in order. */
void test_read_some_returns_what_arrived(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  unsigned char msg[10], got[4096];
  pt_fill(msg, sizeof msg, 1);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], got, sizeof got, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(pt_settle(p, 20), 0); /* nothing arrived: no completion */
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_READ);
  CU_ASSERT_EQUAL(d.handle, sv[0]);
  CU_ASSERT(d.bytes >= 1 && d.bytes <= sizeof msg);
  size_t have = d.bytes <= sizeof msg ? d.bytes : 0;
  CU_ASSERT_EQUAL(memcmp(got, msg, have), 0);
  /* The rest, if the first read did not take all of it. */
  int rounds = 0;
  while (have < sizeof msg && rounds++ < 20) {
    pt_done_init(&d);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &op, sv[0], got + have, sizeof got - have, 0,
                           pt_on_done, &d),
        0);
    CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
    CU_ASSERT_EQUAL_FATAL(d.status, 0);
    CU_ASSERT_FATAL(d.bytes >= 1 && have + d.bytes <= sizeof msg);
    have += d.bytes;
  }
  CU_ASSERT_EQUAL(have, sizeof msg);
  CU_ASSERT_EQUAL(memcmp(got, msg, sizeof msg), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A peer writing a message in many small pieces with pauses: repeated
 * read-some operations each complete with some bytes, and together they
 * make up the message. */
void test_read_some_pieces(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { LEN = 20000 };
  static unsigned char msg[LEN], got[LEN];
  pt_fill(msg, LEN, 2);
  memset(got, 0, LEN);
  st_writer_t w = {sv[1], msg, LEN, 300, 7, 4, 0};
  pt_thread_t t;
  pt_thread_start(&t, st_writer_run, &w);
  taxi_op_t op;
  taxi_op_init(&op);
  size_t have = 0;
  int reads = 0, bad = 0;
  while (have < LEN && !bad) {
    pt_done_t d;
    pt_done_init(&d);
    size_t want = LEN - have < 1000 ? LEN - have : 1000;
    if (taxi_proactor_read(p, &op, sv[0], got + have, want, 0, pt_on_done,
                           &d) != 0 ||
        !pt_run_done(p, &d, 1) || d.status != 0 || d.bytes == 0 ||
        d.bytes > want) {
      printf("\n    read %d: status %d bytes %zu\n", reads, d.status, d.bytes);
      bad = 1;
      break;
    }
    have += d.bytes;
    reads++;
  }
  pt_thread_join(&t, 2, "the writer thread");
  CU_ASSERT_FALSE(bad);
  CU_ASSERT_FALSE(w.failed);
  CU_ASSERT_EQUAL(have, LEN);
  CU_ASSERT_EQUAL(pt_diff(got, msg, LEN), -1);
  CU_ASSERT(reads >= LEN / 1000);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* One exact read gathers a message the peer sends in `max_piece`-byte (or
 * smaller, random) pieces: exactly one completion, with every byte. */
static void st_exact_read(size_t len, size_t max_piece, unsigned pause_every,
                          int tcp) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  if (tcp)
    pt_tcp_pair(p, sv);
  else
    pt_pair(p, sv);
  unsigned char *msg = malloc(len), *got = calloc(1, len);
  CU_ASSERT_FATAL(msg && got);
  pt_fill(msg, len, len);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], got, len,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  st_writer_t w = {sv[1], msg, len, max_piece, len * 31, pause_every, 0};
  pt_thread_t t;
  pt_thread_start(&t, st_writer_run, &w);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_thread_join(&t, 2, "the writer thread");
  pt_settle(p, 10);
  CU_ASSERT_FALSE(w.failed);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, len);
  CU_ASSERT_EQUAL(pt_diff(got, msg, len), -1);
  free(msg);
  free(got);
  pt_close(&sv[1]);
  pt_destroy(p);
}

void test_read_exact_byte_at_a_time(void) { st_exact_read(512, 1, 16, 0); }

void test_read_exact_random_segments(void) {
  st_exact_read(pt_small() ? 64 * 1024 : 256 * 1024, 1500, 8, 0);
}

void test_read_exact_random_segments_tcp(void) {
  st_exact_read(pt_small() ? 64 * 1024 : 256 * 1024, 3000, 8, 1);
}

/* Several exact reads queued on one socket complete in the order they were
 * started, each with its slice of the stream. */
void test_reads_in_issue_order(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { N = 8, SZ = 1000 };
  static unsigned char msg[N * SZ], got[N][SZ];
  pt_fill(msg, sizeof msg, 3);
  memset(got, 0, sizeof got);
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &ops[i], sv[0], got[i], SZ, TAXI_READ_EXACT,
                           pt_on_done, &d[i]),
        0);
  }
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT(pt_run_done(p, &d[N - 1], 1));
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, 0);
    CU_ASSERT_EQUAL(d[i].bytes, SZ);
    CU_ASSERT_EQUAL(memcmp(got[i], msg + i * SZ, SZ), 0);
    if (i > 0) CU_ASSERT(d[i].seq > d[i - 1].seq);
  }
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* Read-some operations queued on one socket: in completion order their
 * bytes are the stream, in order; those left when the peer closes end with
 * TAXI_EEOF. */
void test_read_some_in_issue_order(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { N = 8, SZ = 64, LEN = 300 };
  static unsigned char msg[LEN], got[N][SZ];
  pt_fill(msg, sizeof msg, 4);
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &ops[i], sv[0], got[i], SZ, 0, pt_on_done, &d[i]),
        0);
  }
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, 150), 0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg + 150, LEN - 150), 0);
  shutdown(sv[1], SHUT_WR);
  for (int i = 0; i < N; i++) CU_ASSERT(pt_run_done(p, &d[i], 1));
  size_t have = 0;
  int eof_seen = 0;
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    if (i > 0) CU_ASSERT(d[i].seq > d[i - 1].seq);
    if (d[i].status == 0) {
      CU_ASSERT_FALSE(eof_seen); /* no data after end of stream */
      CU_ASSERT(d[i].bytes >= 1 && d[i].bytes <= SZ &&
                have + d[i].bytes <= LEN);
      if (d[i].bytes <= SZ && have + d[i].bytes <= LEN) {
        CU_ASSERT_EQUAL(memcmp(got[i], msg + have, d[i].bytes), 0);
        have += d[i].bytes;
      }
    } else {
      CU_ASSERT_EQUAL(d[i].status, TAXI_EEOF);
      CU_ASSERT_EQUAL(d[i].bytes, 0);
      eof_seen = 1;
    }
  }
  /* 8 x 64 > 300, so the stream ends before the reads do. */
  CU_ASSERT_EQUAL(have, LEN);
  CU_ASSERT(eof_seen);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A read pending on a socket does not hold up a write on it: the two
 * directions are independent. */
void test_read_pending_write_proceeds(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  char in[16], out[] = "full duplex", peer[sizeof out];
  taxi_op_t r, w;
  taxi_op_init(&r);
  taxi_op_init(&w);
  pt_done_t dr, dw;
  pt_done_init(&dr);
  pt_done_init(&dw);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &r, sv[0], in, sizeof in,
                                           TAXI_READ_EXACT, pt_on_done, &dr),
                        0);
  taxi_buf_t b = {out, sizeof out};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &w, sv[0], &b, 1, pt_on_done, &dw), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &dw, 1));
  CU_ASSERT_EQUAL(dw.status, 0);
  CU_ASSERT_EQUAL(dw.bytes, sizeof out);
  CU_ASSERT_EQUAL(atomic_load(&dr.calls), 0);
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], peer, sizeof peer, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(peer, out, sizeof out), 0);
  char msg[16];
  pt_fill(msg, sizeof msg, 5);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &dr, 1));
  CU_ASSERT_EQUAL(dr.status, 0);
  CU_ASSERT_EQUAL(dr.bytes, sizeof in);
  CU_ASSERT_EQUAL(memcmp(in, msg, sizeof msg), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A handler may start the next operation with the record it was given:
 * a chain of 200 reads, each started from the previous one's handler. */
typedef struct st_chain {
  taxi_proactor_t *p;
  int fd;
  unsigned char buf[64];
  size_t total;
  atomic_int reads;
  atomic_int done;
  int status;
} st_chain_t;

static void st_on_chain(taxi_op_t *op, int status, size_t bytes, void *act) {
  st_chain_t *c = act;
  if (status != 0) {
    c->status = status;
    atomic_store(&c->done, 1);
    return;
  }
  c->total += bytes;
  atomic_fetch_add(&c->reads, 1);
  if (taxi_op_in_flight(op) ||
      taxi_proactor_read(c->p, op, c->fd, c->buf, 1, 0, st_on_chain, c) != 0) {
    c->status = -1000;
    atomic_store(&c->done, 1);
  }
}

void test_handler_restarts_record(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  static st_chain_t c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.fd = sv[0];
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], c.buf, 1, 0, st_on_chain, &c), 0);
  static unsigned char msg[200];
  pt_fill(msg, sizeof msg, 6);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT(pt_run_count(p, &c.reads, 200));
  CU_ASSERT_EQUAL(c.total, 200);
  CU_ASSERT_EQUAL(atomic_load(&c.done), 0);
  pt_close(&sv[1]); /* the 201st read ends with EOF */
  CU_ASSERT(pt_run_count(p, &c.done, 1));
  CU_ASSERT_EQUAL(c.status, TAXI_EEOF);
  pt_destroy(p);
}
