/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/stream_write.c - writes on stream sockets: a write of
 * several megabytes completes only when every byte is sent, gathering
 * writes with empty buffers, several writes per handle in order (tests of
 * the stream suite, in stream.c).
 */
#define _GNU_SOURCE 1

#include "stream_helpers.h"

static size_t st_big_size(void) {
  return pt_small() ? (size_t)2 << 20 : (size_t)8 << 20;
}

/* The bytes the kernel may hold between fd and its peer. */
static size_t st_buffered_max(int fd, int peer) {
  int snd = 0, rcv = 0;
  socklen_t l = sizeof snd;
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l);
  l = sizeof rcv;
  getsockopt(peer, SOL_SOCKET, SO_RCVBUF, &rcv, &l);
  return (size_t)(snd > 0 ? snd : 0) + (size_t)(rcv > 0 ? rcv : 0);
}

static void st_reader_run(void *arg) {
  st_reader_t *r = arg;
  unsigned char *buf = malloc(r->chunk);
  r->first_bad = -1;
  if (!buf || !util_wait_flag(&r->go, 1, pt_wait_ms())) {
    r->failed = 1;
    free(buf);
    return;
  }
  size_t have = 0;
  unsigned reads = 0;
  while (have < r->len) {
    size_t want = r->len - have < r->chunk ? r->len - have : r->chunk;
    size_t got = 0;
    /* Some: whatever arrives, up to want. */
    ssize_t n = read(r->fd, buf, want);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (pt_peer_read(r->fd, buf, 1, &got) != 0) {
        r->failed = 1;
        break;
      }
      n = 1;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n <= 0) {
      r->failed = 1;
      break;
    }
    long d = pt_diff(buf, r->expect + have, (size_t)n);
    if (d >= 0 && r->first_bad < 0) r->first_bad = (long)have + d;
    have += (size_t)n;
    atomic_store(&r->got, (long)have);
    if (r->slow && ++reads % 8 == 0) pt_sleep_ms(1);
  }
  free(buf);
}

/* ---- writes -------------------------------------------------------------- */

/* A write of several megabytes - far more than the socket buffers hold -
 * completes only when every byte is sent: not while the peer reads
 * nothing, and once, with every byte, while the peer drains slowly. */
static void st_big_write(int tcp) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  if (tcp)
    pt_tcp_pair(p, sv);
  else
    pt_pair(p, sv);
  size_t len = st_big_size();
  unsigned char *data = malloc(len);
  CU_ASSERT_FATAL(data != NULL);
  pt_fill(data, len, 8);
  static st_reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = sv[1];
  r.expect = data;
  r.len = len;
  r.chunk = 32768;
  r.slow = 1;
  pt_thread_t t;
  pt_thread_start(&t, st_reader_run, &r);

  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  taxi_buf_t b = {data, len};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &b, 1, pt_on_done, &d), 0);
  /* The peer reads nothing yet: the write cannot have finished. */
  size_t buffered = st_buffered_max(sv[0], sv[1]);
  pt_settle(p, 50);
#if defined(_WIN32)
  tcp = 1; /* util_socketpair is loopback TCP there: buffering unbounded */
#endif
  if (!tcp && buffered * 4 < len) {
    CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  }
  atomic_store(&r.go, 1);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_thread_join(&t, 3, "the slow reader");
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, len);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_WRITE);
  CU_ASSERT_FALSE(r.failed);
  CU_ASSERT_EQUAL((size_t)atomic_load(&r.got), len);
  CU_ASSERT_EQUAL(r.first_bad, -1);
  if (r.first_bad >= 0) printf("\n    first wrong byte at %ld\n", r.first_bad);
  free(data);
  pt_close(&sv[1]);
  pt_destroy(p);
}

void test_big_write(void) { st_big_write(0); }
void test_big_write_tcp(void) { st_big_write(1); }

/* A gathering write of TAXI_OP_MAX_BUFS buffers, empty ones among them (at
 * the start, in the middle, at the end), larger than the socket buffers so
 * that partial writes stop inside buffers and at their edges: the peer
 * gets the concatenation. */
void test_gather_write_with_empty_buffers(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  static const size_t sizes[TAXI_OP_MAX_BUFS] = {0, 3, 0,      200000,
                                                 0, 1, 300000, 0};
  size_t total = 0;
  for (int i = 0; i < TAXI_OP_MAX_BUFS; i++) total += sizes[i];
  unsigned char *all = malloc(total);
  CU_ASSERT_FATAL(all != NULL);
  pt_fill(all, total, 9);
  static char empty[1];
  taxi_buf_t bufs[TAXI_OP_MAX_BUFS];
  size_t off = 0;
  for (int i = 0; i < TAXI_OP_MAX_BUFS; i++) {
    bufs[i].base = sizes[i] ? (void *)(all + off) : (void *)empty;
    bufs[i].len = sizes[i];
    off += sizes[i];
  }
  static st_reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = sv[1];
  r.expect = all;
  r.len = total;
  r.chunk = 7000;
  r.slow = 1;
  atomic_store(&r.go, 1);
  pt_thread_t t;
  pt_thread_start(&t, st_reader_run, &r);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_write(p, &op, sv[0], bufs,
                                            TAXI_OP_MAX_BUFS, pt_on_done, &d),
                        0);
  /* The array of taxi_buf_t is copied: scribbling on it changes nothing. */
  memset(bufs, 0, sizeof bufs);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_thread_join(&t, 2, "the reader thread");
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, total);
  CU_ASSERT_FALSE(r.failed);
  CU_ASSERT_EQUAL((size_t)atomic_load(&r.got), total);
  CU_ASSERT_EQUAL(r.first_bad, -1);

  /* A small one, all of it at once: "ab" "" "" "cde". */
  char a[] = "ab", c[] = "cde", got[5];
  taxi_buf_t small[4] = {{a, 2}, {empty, 0}, {empty, 0}, {c, 3}};
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], small, 4, pt_on_done, &d), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, 5);
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], got, 5, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(got, "abcde", 5), 0);
  free(all);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* Writes queued on one socket, more than the socket buffers hold in all:
 * the peer receives them in the order they were started, and they complete
 * in that order, each with its whole length. */
void test_writes_in_issue_order(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { N = 16 };
  size_t sizes[N], total = 0;
  uint64_t s = 10;
  for (int i = 0; i < N; i++) {
    sizes[i] = 1 + (size_t)(pt_rand(&s) % (pt_small() ? 60000 : 200000));
    total += sizes[i];
  }
  unsigned char *all = malloc(total);
  CU_ASSERT_FATAL(all != NULL);
  pt_fill(all, total, 11);
  static st_reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = sv[1];
  r.expect = all;
  r.len = total;
  r.chunk = 16384;
  r.slow = 1;
  pt_thread_t t;
  pt_thread_start(&t, st_reader_run, &r);
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  taxi_buf_t b;
  size_t off = 0;
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    b.base = all + off;
    b.len = sizes[i];
    off += sizes[i];
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_write(p, &ops[i], sv[0], &b, 1, pt_on_done, &d[i]), 0);
  }
  atomic_store(&r.go, 1);
  CU_ASSERT(pt_run_done(p, &d[N - 1], 1));
  pt_thread_join(&t, 3, "the reader thread");
  pt_settle(p, 10);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, 0);
    CU_ASSERT_EQUAL(d[i].bytes, sizes[i]);
    if (i > 0) CU_ASSERT(d[i].seq > d[i - 1].seq);
  }
  CU_ASSERT_FALSE(r.failed);
  CU_ASSERT_EQUAL((size_t)atomic_load(&r.got), total);
  CU_ASSERT_EQUAL(r.first_bad, -1);
  free(all);
  pt_close(&sv[1]);
  pt_destroy(p);
}
