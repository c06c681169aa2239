/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/bound.c - bound and hybrid handle/thread associations
 * (taxi/lf_bound.h): replies handed to the thread that asked, early and
 * late replies, giving up, every pool thread waiting at once, and no
 * allocation per reply.
 */
#define _GNU_SOURCE 1

#include "bound_fixture.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- many threads, one connection ---------------------------------------- */

typedef struct bd_asker {
  bd_test_t *t;
  unsigned index;
  int requests;
  atomic_int wrong; /* replies with the wrong id or body */
  atomic_int failed;
  int first_error;
  /* Warm-up first: so many requests, then wait for *go. */
  int warmup;
  atomic_int *warmed, *go;
} bd_asker_t;

/* One round trip: expect, send, await, check.  0, 1 (wrong reply), or the
 * error. */
static int bd_ask(bd_test_t *t, uint64_t id) {
  unsigned char want[BD_MAX_BODY], got[BD_MAX_BODY];
  size_t len = bd_len(id);
  bd_fill(id, want, len);
  taxi_lf_expect_t e;
  int rc = taxi_lf_expect_init(&e, id, got, sizeof got);
  if (rc == 0) rc = taxi_lf_mux_expect(t->m, &e);
  if (rc == 0) rc = bd_send(t->m, id, 0, want, len);
  if (rc < 0) {
    taxi_lf_mux_forget(t->m, &e);
    return rc;
  }
  rc = taxi_lf_mux_await(t->m, &e, POOLS_WAIT_MS);
  if (rc < 0) return rc;
  return (size_t)rc == len && e.length == len && memcmp(got, want, len) == 0
             ? 0
             : 1;
}

static void bd_asker_main(void *arg) {
  bd_asker_t *a = arg;
  bool reached = false;
  for (int i = 0; i < a->warmup + a->requests; i++) {
    if (i == a->warmup && a->warmed) {
      reached = true;
      atomic_fetch_add(a->warmed, 1);
      util_wait_flag(a->go, 1, 20 * POOLS_WAIT_MS);
    }
    uint64_t id = ((uint64_t)a->index << 32) | (uint64_t)i;
    int rc = bd_ask(a->t, id);
    if (rc == 1) atomic_fetch_add(&a->wrong, 1);
    if (rc < 0) {
      if (!atomic_fetch_add(&a->failed, 1)) a->first_error = rc;
      break;
    }
  }
  /* One that failed in its warm-up must not hold the others up. */
  if (a->warmed && !reached) atomic_fetch_add(a->warmed, 1);
}

/* What happens between the askers' warm-up and the rest. */
typedef struct bd_phase {
  int warmup;
  util_alloc_counts_t before, after;
} bd_phase_t;

/* Run n askers of `requests` each (after ph->warmup each, if ph: the
 * allocation counts are taken around the rest); returns the failures,
 * printing the first. */
static int bd_run_askers(bd_test_t *t, unsigned n, int requests,
                         bd_phase_t *ph) {
  atomic_int warmed, go;
  atomic_init(&warmed, 0);
  atomic_init(&go, 0);
  bd_asker_t a[8];
  util_thread_t th[8];
  memset(a, 0, sizeof a);
  for (unsigned i = 0; i < n; i++) {
    a[i].t = t;
    a[i].index = i + 1;
    a[i].requests = requests;
    if (ph) {
      a[i].warmup = ph->warmup;
      a[i].warmed = &warmed;
      a[i].go = &go;
    }
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&th[i], bd_asker_main, &a[i]), 0);
  }
  if (ph) {
    CU_ASSERT(util_wait_flag(&warmed, (int)n, 20 * POOLS_WAIT_MS));
    ph->before = util_alloc_counts();
    atomic_store(&go, 1);
  }
  int bad = 0;
  for (unsigned i = 0; i < n; i++) {
    util_thread_join(&th[i], 20 * POOLS_WAIT_MS, "bound asker");
    if (a[i].failed) {
      printf("\n    asker %u: %s\n", i, taxi_error_name(a[i].first_error));
      bad++;
    }
    if (a[i].wrong) {
      printf("\n    asker %u: %d wrong replies\n", i, (int)a[i].wrong);
      bad++;
    }
  }
  if (ph) ph->after = util_alloc_counts();
  return bad;
}

/* 8 threads x 10,000 requests over one connection, answered in a random
 * order: each reply reaches the thread that asked, with its body. */
static void test_many_threads_one_connection(void) {
  const int requests = pools_small() ? 2000 : 10000;
  bd_test_t *t = bd_new(2, 1, 6, 0);
  CU_ASSERT_EQUAL(bd_run_askers(t, 8, requests, NULL), 0);
  bd_stop_backend(t);
  CU_ASSERT_EQUAL(atomic_load(&t->replies), 8L * requests);
  CU_ASSERT_EQUAL(atomic_load(&t->unknown), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), 0);
  bd_free(t);
}

/* The hand-off under every promotion order, and with several leaders
 * where the backend allows: a thread woken for its reply leaves the
 * followers (or its wait) without taking a promotion from anybody. */
static void test_every_promotion_order(void) {
  const int requests = pools_small() ? 300 : 1500;
  const taxi_promotion_t orders[] = {TAXI_PROMOTE_LIFO, TAXI_PROMOTE_FIFO,
                                     TAXI_PROMOTE_PRIORITY,
                                     TAXI_PROMOTE_SHARED};
  for (int many = 0; many < 2; many++) {
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
      taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
      o.promotion = orders[i];
      if (many) {
        taxi_reactor_t *r = pools_reactor();
        int can = pools_can_many_leaders(r);
        CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
        if (!can) break;
        o.leaders = TAXI_LEADERS_MANY;
        o.max_leaders = i == 0 ? 0 : 2;
      }
      bd_test_t *t = bd_new_with(3, 1, 4, 0, &o);
      int bad = bd_run_askers(t, 4, requests, NULL);
      if (bad) printf("\n    promotion %d, many leaders %d\n", (int)i, many);
      CU_ASSERT_EQUAL(bad, 0);
      CU_ASSERT_EQUAL(atomic_load(&t->unknown), 0);
      bd_free(t);
    }
  }
}

/* ---- early and late replies ---------------------------------------------- */

/* A reply that comes before await waits in its record. */
static void test_reply_before_await(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  unsigned char buf[16];
  taxi_lf_expect_t e;
  CU_ASSERT_EQUAL(taxi_lf_expect_init(&e, 42, buf, sizeof buf), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 42, 0, "early", 5), 0);
  /* Frames are read in order: once the next one reached the unknown-id
   * hook, the first was delivered. */
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 43, 0, "x", 1), 0);
  CU_ASSERT(bd_wait_unknown(t, 1));
  CU_ASSERT_EQUAL(atomic_load(&t->unknown_id), 43);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, 0), 5);
  CU_ASSERT_EQUAL(memcmp(buf, "early", 5), 0);
  /* Consumed: no longer registered. */
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, 0), TAXI_ENOENT);
  bd_free(t);
}

/* A time-out leaves no entry behind: the late reply goes to the unknown-id
 * hook, and the id may be expected again. */
static void test_timeout_then_late_reply(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  unsigned char buf[16];
  taxi_lf_expect_t e;
  CU_ASSERT_EQUAL(taxi_lf_expect_init(&e, 7, buf, sizeof buf), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, 20), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &e), TAXI_ENOENT);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 7, 0, "late", 4), 0);
  CU_ASSERT(bd_wait_unknown(t, 1));
  CU_ASSERT_EQUAL(atomic_load(&t->unknown_id), 7);
  CU_ASSERT_EQUAL(atomic_load(&t->unknown_len), 4);
  /* Expected again, and this time answered. */
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 7, 0, "again", 5), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, POOLS_WAIT_MS), 5);
  CU_ASSERT_EQUAL(atomic_load(&t->unknown), 1);
  bd_free(t);
}

/* ---- giving up while others wait ----------------------------------------- */

typedef struct bd_waiter {
  bd_test_t *t;
  uint64_t id;
  int timeout_ms;
  atomic_int registered;
  int rc;
  unsigned char buf[16];
} bd_waiter_t;

static void bd_waiter_main(void *arg) {
  bd_waiter_t *w = arg;
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, w->id, w->buf, sizeof w->buf);
  w->rc = taxi_lf_mux_expect(w->t->m, &e);
  atomic_store(&w->registered, 1);
  if (w->rc == 0) w->rc = taxi_lf_mux_await(w->t->m, &e, w->timeout_ms);
}

static void test_give_up_while_others_wait(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  bd_waiter_t w[3];
  util_thread_t th[3];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 3; i++) {
    w[i].t = t;
    w[i].id = 100 + (uint64_t)i;
    w[i].timeout_ms = i == 1 ? 20 : POOLS_WAIT_MS;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&th[i], bd_waiter_main, &w[i]), 0);
  }
  for (int i = 0; i < 3; i++)
    CU_ASSERT(util_wait_flag(&w[i].registered, 1, POOLS_WAIT_MS));
  /* The second gives up; the others still wait. */
  util_thread_join(&th[1], POOLS_WAIT_MS, "giving-up waiter");
  CU_ASSERT_EQUAL(w[1].rc, TAXI_ETIMEDOUT);
  /* A forgotten record: nothing left behind either. */
  taxi_lf_expect_t f;
  taxi_lf_expect_init(&f, 200, NULL, 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &f), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &f), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &f), TAXI_ENOENT);
  for (int i = 2; i >= 0; i--)
    CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 100 + (uint64_t)i, 0, "r", 1), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 200, 0, "f", 1), 0);
  util_thread_join(&th[0], POOLS_WAIT_MS, "waiter 0");
  util_thread_join(&th[2], POOLS_WAIT_MS, "waiter 2");
  CU_ASSERT_EQUAL(w[0].rc, 1);
  CU_ASSERT_EQUAL(w[2].rc, 1);
  CU_ASSERT(bd_wait_unknown(t, 2)); /* 101 and 200 */
  bd_free(t);
}

/* ---- every pool thread waiting ------------------------------------------- */

/* A front-end connection: a request is one byte; its handler calls out to
 * the back end over the mux, awaits the answer, then answers one byte. */
typedef struct bd_front {
  taxi_handler_t h;
  int sv[2];
  bd_test_t *t;
  unsigned index;
  unsigned seq;
  atomic_int *waiting, *most_waiting, *errors;
  /* Pool threads awaiting now (bit per id), and the most at once. */
  atomic_ullong *threads;
  atomic_int *most_threads;
  atomic_int closed; /* its close hook ran (and closed sv[0]) */
} bd_front_t;

static void bd_note_threads(bd_front_t *c, unsigned long long now) {
  int n = __builtin_popcountll(now);
  int most = atomic_load(c->most_threads);
  while (n > most && !atomic_compare_exchange_weak(c->most_threads, &most, n)) {
  }
}

static int bd_front_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  bd_front_t *c = TAXI_CONTAINER_OF(h, bd_front_t, h);
  (void)ev;
  while (util_read_byte(fd) == 1) {
    uint64_t id = ((uint64_t)c->index << 40) | c->seq++;
    int now = atomic_fetch_add(c->waiting, 1) + 1;
    int most = atomic_load(c->most_waiting);
    while (now > most &&
           !atomic_compare_exchange_weak(c->most_waiting, &most, now)) {
    }
    int self = taxi_lf_current_thread(c->t->p);
    unsigned long long bit = self >= 0 && self < 64 ? 1ull << self : 0;
    /* Nested awaits of one thread count once: only the outermost sets and
     * clears its bit. */
    bool outer = bit && !(atomic_fetch_or(c->threads, bit) & bit);
    if (outer) bd_note_threads(c, atomic_load(c->threads));
    int rc = bd_ask(c->t, id);
    if (outer) atomic_fetch_and(c->threads, ~bit);
    atomic_fetch_sub(c->waiting, 1);
    if (rc != 0) atomic_fetch_add(c->errors, 1);
    util_write_byte(fd);
  }
  return 0;
}

/* Its hook may still run in another thread when it is removed: the
 * handle is closed here, after the last one returned. */
static void bd_front_close(taxi_handler_t *h, taxi_handle_t fd) {
  bd_front_t *c = TAXI_CONTAINER_OF(h, bd_front_t, h);
  close(fd);
  atomic_store(&c->closed, 1);
}

static const taxi_handler_ops_t bd_front_ops = {.input = bd_front_input,
                                                .close = bd_front_close};

/* 4 threads, `clients` front-end connections, and a back end that
 * answers only when a request from each waits: every round has that many
 * handlers awaiting at once (with 8, some nested: a thread that awaits
 * takes more requests meanwhile), and still requests and replies flow. */
static void all_threads_waiting(int clients) {
  enum { CLIENTS = 8 };
  const int rounds = pools_small() ? 50 : 300;
  bd_test_t *t = bd_new(4, 1, clients, 1);
  bd_front_t c[CLIENTS];
  atomic_int waiting, most, errors, most_threads;
  atomic_ullong threads;
  atomic_init(&threads, 0);
  atomic_init(&most_threads, 0);
  atomic_init(&waiting, 0);
  atomic_init(&most, 0);
  atomic_init(&errors, 0);
  int peers[CLIENTS];
  for (int i = 0; i < clients; i++) {
    memset(&c[i], 0, sizeof c[i]);
    pools_pair(c[i].sv);
    c[i].t = t;
    c[i].index = (unsigned)i + 1;
    c[i].waiting = &waiting;
    c[i].most_waiting = &most;
    c[i].errors = &errors;
    c[i].threads = &threads;
    c[i].most_threads = &most_threads;
    taxi_handler_init(&c[i].h, &bd_front_ops);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(t->r, c[i].sv[0], &c[i].h, TAXI_EV_READ), 0);
    peers[i] = c[i].sv[1];
  }
  int failed = 0;
  for (int i = 0; i < rounds && !failed; i++)
    if (pools_ping_all(peers, clients) != 0) failed = i + 1;
  if (failed) printf("\n    round %d did not complete\n", failed);
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(atomic_load(&errors), 0);
  /* The back end answers only a full batch, so all were waiting. */
  CU_ASSERT_EQUAL(atomic_load(&most), clients);
  /* Which threads those handlers ran in is the scheduler's choice: told,
   * not checked. */
  printf("(%d handlers awaiting at once, in up to %d of 4 threads) ",
         atomic_load(&most), atomic_load(&most_threads));
  bd_stop_backend(t);
  CU_ASSERT_EQUAL(atomic_load(&t->replies), (long)rounds * clients);
  for (int i = 0; i < clients; i++) {
    CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &c[i].h), 0);
    CU_ASSERT(util_wait_flag(&c[i].closed, 1, POOLS_WAIT_MS));
    c[i].sv[0] = -1;
    pools_close_pair(c[i].sv);
  }
  bd_free(t);
}

static void test_all_threads_waiting(void) { all_threads_waiting(4); }

static void test_more_waiting_than_threads(void) { all_threads_waiting(8); }

/* ---- writes larger than the socket takes at once ------------------------ */

#define BD_BIG (256 * 1024)

typedef struct bd_big_sender {
  bd_test_t *t;
  unsigned index;
  int frames;
  int rc;
} bd_big_sender_t;

static void bd_big_sender_main(void *arg) {
  bd_big_sender_t *s = arg;
  unsigned char *buf = malloc(BD_BIG);
  if (!buf) {
    s->rc = TAXI_ENOMEM;
    return;
  }
  bd_header_t h = {BD_BIG, BD_NOREPLY, s->index};
  memcpy(buf, &h, BD_HEADER);
  memset(buf + BD_HEADER, (int)s->index, BD_BIG - BD_HEADER);
  for (int i = 0; i < s->frames && s->rc == 0; i++)
    s->rc = taxi_lf_mux_send(s->t->m, buf, BD_BIG, 2 * POOLS_WAIT_MS);
  free(buf);
}

/* Read frames from fd until `frames` came whole: each a header and a body
 * of its sender's byte, never another's in the middle.  The bad ones. */
static int bd_read_big(int fd, int frames) {
  unsigned char chunk[4096];
  size_t in_frame = 0; /* bytes of the current frame seen */
  bd_header_t h;
  unsigned char hb[BD_HEADER];
  int bad = 0;
  taxi_time_t start = taxi_now();
  while (frames > 0 && util_elapsed_ms(start) < 4 * POOLS_WAIT_MS) {
    /* Small reads, so that the senders meet a full socket. */
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) {
      util_sleep_ms(1);
      continue;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (in_frame < BD_HEADER) {
        hb[in_frame] = chunk[i];
        if (++in_frame == BD_HEADER) {
          memcpy(&h, hb, BD_HEADER);
          if (h.size != BD_BIG) bad++;
        }
        continue;
      }
      if (chunk[i] != (unsigned char)h.id) bad++;
      if (++in_frame == BD_BIG) {
        in_frame = 0;
        frames--;
      }
    }
  }
  return frames > 0 ? bad + 1 : bad;
}

/* Four threads write requests of 256 KiB at once: each goes out whole,
 * the writer waiting for room without spinning (it takes part in the
 * pool meanwhile). */
static void test_big_writes_whole(void) {
  enum { SENDERS = 4 };
  const int frames = pools_small() ? 4 : 16;
  bd_test_t *t = bd_new(1, 0, 1, 0);
  bd_big_sender_t s[SENDERS];
  util_thread_t th[SENDERS];
  for (unsigned i = 0; i < SENDERS; i++) {
    s[i] = (bd_big_sender_t){t, i + 1, frames, 0};
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&th[i], bd_big_sender_main, &s[i]),
                          0);
  }
  CU_ASSERT_EQUAL(bd_read_big(t->sv[1], SENDERS * frames), 0);
  for (unsigned i = 0; i < SENDERS; i++) {
    util_thread_join(&th[i], 4 * POOLS_WAIT_MS, "big sender");
    CU_ASSERT_EQUAL(s[i].rc, 0);
  }
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), 0);
  bd_free(t);
}

/* ---- allocations --------------------------------------------------------- */

/* After a warm-up, round trips allocate nothing: not the expectation, not
 * the hand-off, not the reading. */
static void test_zero_alloc_per_reply(void) {
  const int requests = pools_small() ? 2000 : 10000;
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  bd_test_t *t = bd_new(2, 1, 3, 0);
  CU_ASSERT(util_alloc_counts().mallocs > 0); /* the hook is used */
  bd_phase_t ph = {.warmup = 50};
  CU_ASSERT_EQUAL(bd_run_askers(t, 4, requests / 4, &ph), 0);
  uint64_t mallocs = ph.after.mallocs - ph.before.mallocs;
  uint64_t reallocs = ph.after.reallocs - ph.before.reallocs;
  printf("(%d round trips, %llu malloc, %llu realloc) ", requests,
         (unsigned long long)mallocs, (unsigned long long)reallocs);
  CU_ASSERT_EQUAL(mallocs, 0);
  CU_ASSERT_EQUAL(reallocs, 0);
  bd_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

static CU_TestInfo bound_tests[] = {
    {"8 threads, one connection, replies in random order",
     test_many_threads_one_connection},
    {"every promotion order, one or many leaders", test_every_promotion_order},
    {"a reply before await waits in its record", test_reply_before_await},
    {"a time-out, then the late reply to the unknown-id hook",
     test_timeout_then_late_reply},
    {"a thread gives up while others wait", test_give_up_while_others_wait},
    {"every pool thread awaiting: no deadlock", test_all_threads_waiting},
    {"more handlers awaiting than threads: no deadlock",
     test_more_waiting_than_threads},
    {"requests larger than the socket takes are written whole",
     test_big_writes_whole},
    {"zero allocations per reply", test_zero_alloc_per_reply},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_bound = {"bound", bound_tests, 300, NULL};
