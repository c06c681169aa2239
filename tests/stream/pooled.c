/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/pooled.c - a stream's reads through the proactor's pool
 * where the backend picks the buffers (io_uring's provided buffers): each
 * read callback is lent a buffer of the pool and there is no request per
 * read; bytes a stream must keep (a read_into, a stop of reading) are
 * neither lost nor reordered; a close with the multishot read armed, a
 * reset and an end give every buffer back and call nothing after the
 * close callback.  Over every pair: elsewhere the same exchanges run, and
 * only the pool's assertions are skipped.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the context's proactors ----------------------------------------------
 */

/* The proactors of c's context (none for a reactor's), in px. */
static unsigned proactors_of(const st_io_t *c, taxi_proactor_t **px,
                             unsigned cap) {
  taxi_proactor_group_t *g = taxi_io_proactor_group(c->io);
  if (g) {
    unsigned n = taxi_proactor_group_count(g);
    if (n > cap) n = cap;
    for (unsigned i = 0; i < n; i++) px[i] = taxi_proactor_group_at(g, i);
    return n;
  }
  px[0] = taxi_io_proactor(c->io);
  return px[0] ? 1 : 0;
}

/* Whether every proactor of the context reads into provided buffers. */
static bool provided_buffers(const st_io_t *c) {
  taxi_proactor_t *px[8];
  unsigned n = proactors_of(c, px, 8);
  for (unsigned i = 0; i < n; i++) {
    unsigned f = 0;
    if (taxi_proactor_features(px[i], &f) < 0 ||
        !(f & TAXI_PFEAT_PROVIDED_BUFFERS))
      return false;
  }
  return n > 0;
}

/* The sum of a counter over the context's proactors. */
enum { PS_HELD, PS_SQES };
static uint64_t pstat(const st_io_t *c, int which) {
  taxi_proactor_t *px[8];
  unsigned n = proactors_of(c, px, 8);
  uint64_t sum = 0;
  for (unsigned i = 0; i < n; i++) {
    taxi_proactor_stats_t st;
    if (taxi_proactor_stats(px[i], &st) < 0) continue;
    sum += which == PS_HELD ? st.buffers_held : st.sqes;
  }
  return sum;
}

static int none_held(void *arg) { return pstat(arg, PS_HELD) == 0; }

/* ---- lent buffers, no request per read ------------------------------------
 */

struct lent {
  const st_io_t *c;
  atomic_int reads, lent, closed;
};

static void ln_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  struct lent *l = taxi_stream_data(s);
  if (status < 0) {
    taxi_stream_end(s);
    return;
  }
  atomic_fetch_add(&l->reads, 1);
  /* The bytes are in a buffer of the pool, lent for this call. */
  if (pstat(l->c, PS_HELD) > 0) atomic_fetch_add(&l->lent, 1);
  if (taxi_stream_write(s, d, n, NULL, NULL) < 0) taxi_stream_close(s);
}

static void ln_closed(taxi_stream_t *s, int reason) {
  struct lent *l = taxi_stream_data(s);
  (void)reason;
  atomic_store(&l->closed, 1);
}

static void ln_accept(taxi_listener_t *ls, taxi_stream_t *s, void *arg) {
  (void)ls;
  taxi_stream_set_data(s, arg);
  taxi_stream_on_close(s, ln_closed);
  taxi_stream_read_start(s, ln_read);
}

static void test_lent_buffers(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  bool pooled = provided_buffers(&c);
  struct lent l = {.c = &c};
  int port = st_listen(&c, NULL, ln_accept, &l, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  enum { ROUNDS = 300, MAXLEN = 6000 };
  static unsigned char out[MAXLEN], back[MAXLEN];
  unsigned seed = 7;
  uint64_t at = 0, sqes0 = 0;
  int reads0 = 0, bad = 0;
  for (int r = 0; r < ROUNDS && !bad; r++) {
    if (r == 10) { /* past the start: the multishot read is armed */
      sqes0 = pstat(&c, PS_SQES);
      reads0 = atomic_load(&l.reads);
    }
    size_t n = 1 + (size_t)(rand_r(&seed) % MAXLEN);
    for (size_t i = 0; i < n; i++) out[i] = st_byte(3, at + i);
    at += n;
    if (net_send_all(fd, out, n) < 0 || net_recv_all(fd, back, n) < 0 ||
        memcmp(out, back, n) != 0)
      bad = 1;
  }
  CU_ASSERT_EQUAL(bad, 0);
  uint64_t sqes = pstat(&c, PS_SQES) - sqes0;
  int reads = atomic_load(&l.reads) - reads0;
  close(fd);
  CU_ASSERT(util_wait_flag(&l.closed, 1, 10000));
  if (pooled) {
    /* Every read was lent a pool buffer, and the requests are about one
     * per echo (its write): reads of their own would double them. */
    CU_ASSERT_EQUAL(atomic_load(&l.lent), atomic_load(&l.reads));
    CU_ASSERT(reads > 0);
    CU_ASSERT(sqes < (uint64_t)reads + (uint64_t)reads / 2 + 8);
    CU_ASSERT(st_wait(none_held, &c, 10000));
    printf("(%d reads, %llu requests) ", reads, (unsigned long long)sqes);
  } else {
    printf("(no provided buffers: exchange only) ");
  }
  st_io_destroy(&c);
}

/* ---- many streams at once --------------------------------------------------
 */

/* Every connection sends at once, round after round: the arrivals
 * outnumber the pool's first buffers and a ring's default share of
 * completions (1,024 entries at depth 256).  Once the pool has grown,
 * each read is still lent a pool buffer and the requests stay about one
 * per echo: a read ended by a full completion ring or by a pool that ran
 * dry, and armed again per arrival, would double them. */
static void test_many_at_once(void) {
  enum { ROUNDS = 6, WARM = 2, LEN = 64 };
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  bool pooled = provided_buffers(&c);
  /* Elsewhere the exchange alone, on fewer: select takes descriptors
   * below FD_SETSIZE (1,024) only. */
  const int n = util_test_small() || !pooled ? 300 : 1200;
  if (!util_raise_nofile((unsigned long)n * 2 + 64)) {
    printf("(no descriptors for %d connections: skipped) ", n);
    st_io_destroy(&c);
    return;
  }
  struct lent l = {.c = &c};
  int port = st_listen(&c, NULL, ln_accept, &l, NULL);
  st_io_run(&c);
  int *fd = calloc((size_t)n, sizeof *fd);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fd);
  int opened = 0, bad = 0;
  while (opened < n && (fd[opened] = st_connect(port)) >= 0) opened++;
  CU_ASSERT_EQUAL(opened, n);
  uint64_t sqes0 = 0;
  int reads0 = 0;
  unsigned char out[LEN], back[LEN];
  for (int r = 0; r < ROUNDS && opened == n && !bad; r++) {
    if (r == WARM) {
      sqes0 = pstat(&c, PS_SQES);
      reads0 = atomic_load(&l.reads);
    }
    for (int i = 0; i < n && !bad; i++) {
      for (int j = 0; j < LEN; j++) out[j] = st_byte(7, (uint64_t)(r + i + j));
      if (net_send_all(fd[i], out, LEN) < 0) bad = 1;
    }
    for (int i = 0; i < n && !bad; i++) {
      for (int j = 0; j < LEN; j++) out[j] = st_byte(7, (uint64_t)(r + i + j));
      if (net_recv_all(fd[i], back, LEN) < 0 || memcmp(out, back, LEN) != 0)
        bad = 2;
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
  uint64_t sqes = pstat(&c, PS_SQES) - sqes0;
  int reads = atomic_load(&l.reads) - reads0;
  for (int i = 0; i < opened; i++) close(fd[i]);
  free(fd);
  if (pooled && opened == n && !bad) {
    CU_ASSERT_EQUAL(atomic_load(&l.lent), atomic_load(&l.reads));
    CU_ASSERT(reads >= (ROUNDS - WARM) * n);
    CU_ASSERT(sqes < (uint64_t)reads + (uint64_t)reads / 2 + 8);
    printf("(%d connections: %d reads, %llu requests) ", n, reads,
           (unsigned long long)sqes);
  } else if (!pooled) {
    printf("(no provided buffers: exchange only) ");
  }
  st_io_destroy(&c);
}

/* ---- bytes kept: read_into and stops at random sizes -----------------------
 */

#define KEEP_TOTAL (256u * 1024u)

struct keep {
  const st_io_t *c;
  unsigned seed;
  uint64_t got;
  atomic_int bad, closed, done_eof;
  unsigned char into[20000];
};

static void kp_next(taxi_stream_t *s, struct keep *k);

static void kp_check(struct keep *k, const unsigned char *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (d[i] != st_byte(5, k->got + i)) {
      atomic_store(&k->bad, 1);
      break;
    }
  k->got += n;
}

static void kp_eof(taxi_stream_t *s, struct keep *k) {
  atomic_store(&k->done_eof, 1);
  taxi_stream_close(s);
}

static void kp_resume(taxi_stream_t *s, int status, void *arg) {
  if (status == 0) kp_next(s, arg);
}

static void kp_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  struct keep *k = taxi_stream_data(s);
  if (status < 0) {
    kp_eof(s, k);
    return;
  }
  kp_check(k, d, n);
  /* Now and then stop reading for a while: what arrives meanwhile is
   * kept, and comes next. */
  if (rand_r(&k->seed) % 3 == 0) {
    taxi_stream_read_stop(s);
    if (taxi_stream_post(s, kp_resume, k) < 0) atomic_store(&k->bad, 2);
  }
}

static void kp_into(taxi_stream_t *s, int status, size_t n, void *arg) {
  struct keep *k = arg;
  kp_check(k, k->into, n);
  if (status < 0) {
    kp_eof(s, k);
    return;
  }
  kp_next(s, k);
}

/* Read on: into a buffer of random size (all of it or some), or through
 * the callback. */
static void kp_next(taxi_stream_t *s, struct keep *k) {
  unsigned r = (unsigned)rand_r(&k->seed);
  if (r % 2 == 0) {
    size_t len = 1 + r / 2 % sizeof k->into;
    unsigned fl = r % 4 == 0 ? TAXI_STREAM_READ_EXACT : 0;
    if (taxi_stream_read_into(s, k->into, len, fl, kp_into, k) < 0)
      atomic_store(&k->bad, 3);
  } else if (taxi_stream_read_start(s, kp_read) < 0) {
    atomic_store(&k->bad, 4);
  }
}

static void kp_closed(taxi_stream_t *s, int reason) {
  struct keep *k = taxi_stream_data(s);
  (void)reason;
  atomic_store(&k->closed, 1);
}

static void kp_accept(taxi_listener_t *ls, taxi_stream_t *s, void *arg) {
  (void)ls;
  taxi_stream_set_data(s, arg);
  taxi_stream_on_close(s, kp_closed);
  kp_next(s, arg);
}

static void test_bytes_kept(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  struct keep *k = calloc(1, sizeof *k);
  CU_ASSERT_FATAL(k != NULL);
  k->c = &c;
  k->seed = 11;
  int port = st_listen(&c, NULL, kp_accept, k, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  static unsigned char out[KEEP_TOTAL];
  for (size_t i = 0; i < KEEP_TOTAL; i++) out[i] = st_byte(5, i);
  unsigned seed = 13;
  int sent_ok = 1;
  for (size_t at = 0; at < KEEP_TOTAL && sent_ok;) {
    size_t n = 1 + (size_t)(rand_r(&seed) % 9000);
    if (n > KEEP_TOTAL - at) n = KEEP_TOTAL - at;
    if (net_send_all(fd, out + at, n) < 0) sent_ok = 0;
    at += n;
  }
  CU_ASSERT(sent_ok);
  shutdown(fd, SHUT_WR);
  CU_ASSERT(util_wait_flag(&k->closed, 1, 20000));
  CU_ASSERT_EQUAL(atomic_load(&k->done_eof), 1);
  CU_ASSERT_EQUAL(atomic_load(&k->bad), 0);
  CU_ASSERT_EQUAL(k->got, KEEP_TOTAL);
  CU_ASSERT(st_wait(none_held, &c, 10000));
  close(fd);
  st_io_destroy(&c);
  free(k);
}

/* ---- a close with the read armed; a reset ---------------------------------
 */

struct armed {
  taxi_stream_t *s;
  atomic_int reads, closed, after_close, reason;
};

static void ar_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  struct armed *a = taxi_stream_data(s);
  (void)d;
  (void)n;
  if (atomic_load(&a->closed)) atomic_fetch_add(&a->after_close, 1);
  if (status == 0) atomic_fetch_add(&a->reads, 1);
  if (status < 0) taxi_stream_close(s); /* the end of a reset stream */
}

static void ar_closed(taxi_stream_t *s, int reason) {
  struct armed *a = taxi_stream_data(s);
  atomic_store(&a->reason, reason);
  atomic_store(&a->closed, 1);
}

static void ar_accept(taxi_listener_t *ls, taxi_stream_t *s, void *arg) {
  struct armed *a = arg;
  (void)ls;
  taxi_stream_ref(s); /* closed from the test's thread */
  a->s = s;
  taxi_stream_set_data(s, arg);
  taxi_stream_on_close(s, ar_closed);
  taxi_stream_read_start(s, ar_read);
}

/* reset: the client resets the connection, else the stream is closed
 * while bytes go on arriving. */
static void armed_case(bool reset) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  struct armed a = {0};
  int port = st_listen(&c, NULL, ar_accept, &a, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  unsigned char buf[4096];
  memset(buf, 'x', sizeof buf);
  CU_ASSERT_EQUAL(net_send_all(fd, buf, sizeof buf), 0);
  /* The first bytes read: the read is armed from now on. */
  for (int i = 0; i < 10000 && atomic_load(&a.reads) == 0; i++)
    util_sleep_ms(1);
  CU_ASSERT_FATAL(atomic_load(&a.reads) > 0);
  if (reset) {
    struct linger lg = {1, 0};
    CU_ASSERT_EQUAL(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(fd);
    fd = -1;
  } else {
    for (int i = 0; i < 8; i++)
      CU_ASSERT_EQUAL(net_send_all(fd, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(taxi_stream_close(a.s), 0);
    (void)send(fd, buf, sizeof buf, MSG_NOSIGNAL);
  }
  CU_ASSERT(util_wait_flag(&a.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.after_close), 0);
  if (reset) {
    /* A reset, or (the reset's bytes racing) an end of stream, which the
     * read callback answers with a close. */
    int why = atomic_load(&a.reason);
    CU_ASSERT(why == TAXI_ECONNRESET || why == 0);
  } else {
    CU_ASSERT_EQUAL(atomic_load(&a.reason), 0);
  }
  /* Every buffer back in the pool (none on the other backends). */
  CU_ASSERT(st_wait(none_held, &c, 10000));
  if (fd >= 0) close(fd);
  st_io_destroy(&c);
  if (a.s) taxi_stream_unref(a.s);
}

static void test_close_armed(void) { armed_case(false); }

static void test_reset_armed(void) { armed_case(true); }

CU_TestInfo st_tests_pooled[] = {
    {"pooled reads: each lent a pool buffer, no request per read",
     test_lent_buffers},
    {"pooled reads: many streams at once, a request per echo",
     test_many_at_once},
    {"pooled reads: read_into and stops at random sizes, every byte",
     test_bytes_kept},
    {"pooled reads: closed with the read armed, buffers back",
     test_close_armed},
    {"pooled reads: a reset with the read armed, buffers back",
     test_reset_armed},
    CU_TEST_INFO_NULL,
};
