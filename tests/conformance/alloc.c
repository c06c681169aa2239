/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/alloc.c - taxi's allocator hook: every allocation goes
 * through it, steady-state dispatching allocates nothing, destroy frees
 * everything, and allocation failures surface as TAXI_ENOMEM without
 * leaks.
 *
 * The suite runs in a process of its own (see runner.c), so installing the
 * allocator while no taxi object exists is easy: each test installs it
 * before creating its reactor and restores the default after destroying.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000

enum { PAIRS = 50, WARMUP = 1000, EVENTS_FULL = 100000, EVENTS_SMALL = 10000 };

typedef struct pinger {
  taxi_handler_t h;
  taxi_timer_t timer;
  int fd;
  atomic_int reads;
  atomic_int timeouts;
  atomic_int closes;
} pinger_t;

static atomic_int notes;

static void note(void *arg) {
  (void)arg;
  atomic_fetch_add(&notes, 1);
}

static int pinger_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pinger_t *p = TAXI_CONTAINER_OF(h, pinger_t, h);
  char c;
  (void)ev;
  while (read(fd, &c, 1) == 1) atomic_fetch_add(&p->reads, 1);
  return 0;
}

static int pinger_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  pinger_t *p = TAXI_CONTAINER_OF(h, pinger_t, h);
  (void)t;
  (void)act;
  atomic_fetch_add(&p->timeouts, 1);
  return 0;
}

static void pinger_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, pinger_t, h)->closes, 1);
}

static const taxi_handler_ops_t pinger_ops = {
    .input = pinger_input, .timeout = pinger_timeout, .close = pinger_close};

typedef struct bench {
  taxi_reactor_t *r;
  pinger_t p[PAIRS];
  int peer[PAIRS];
} bench_t;

static int total_reads(bench_t *b) {
  int n = 0;
  for (int i = 0; i < PAIRS; i++) n += atomic_load(&b->p[i].reads);
  return n;
}

/* One byte into pair i, dispatch until it was read, plus one notification
 * posted from this thread.  Returns 0, or -1 when it did not arrive. */
static int ping(bench_t *b, int i) {
  int before = atomic_load(&b->p[i].reads);
  if (util_write_byte(b->peer[i]) != 1) return -1;
  if (taxi_reactor_notify(b->r, note, NULL) != 0) return -1;
  taxi_time_t start = taxi_now();
  while (atomic_load(&b->p[i].reads) == before) {
    if (taxi_reactor_handle_events(b->r, 1000) < 0) return -1;
    if (util_elapsed_ms(start) > WAIT_MS) return -1;
  }
  return 0;
}

static int timer_fired(void *arg) {
  conf_count_goal_t *g = arg;
  return atomic_load(g->counter) >= g->goal;
}

/* After a warm-up, 100,000 handle events, timer firings and notifications
 * allocate nothing. */
static void test_steady_state_allocates_nothing(void) {
  /* Under TAXI_TEST_SMALL (wine, TSan) a tenth: still ten timer rounds. */
  const int EVENTS = util_test_small() ? EVENTS_SMALL : EVENTS_FULL;
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  static bench_t b;
  memset(&b, 0, sizeof b);
  atomic_store(&notes, 0);
  b.r = conf_reactor();
  CU_ASSERT_FATAL(util_alloc_counts().mallocs > 0); /* the hook is used */
  for (int i = 0; i < PAIRS; i++) {
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
    b.p[i].fd = sv[0];
    b.peer[i] = sv[1];
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&b.p[i].h, &pinger_ops), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_timer_init(&b.p[i].timer), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(b.r, sv[0], &b.p[i].h, TAXI_EV_READ), 0);
  }
  /* A periodic timer on one handler, a one-shot re-armed on another. */
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_schedule(b.r, &b.p[0].timer, &b.p[0].h, 0,
                                              TAXI_NSEC_PER_MSEC / 10, NULL),
                        0);

  int failed = 0;
  for (int i = 0; i < WARMUP && !failed; i++)
    if (ping(&b, i % PAIRS) != 0) failed = 1;
  CU_ASSERT_EQUAL_FATAL(failed, 0);
  conf_count_goal_t g = {&b.p[0].timeouts, atomic_load(&b.p[0].timeouts) + 2};
  CU_ASSERT_EQUAL_FATAL(run_until(b.r, timer_fired, &g, WAIT_MS), 1);
  /* The one-shot, too, so the timer heap has room for both. */
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_schedule(b.r, &b.p[1].timer, &b.p[1].h, 0, 0, NULL), 0);
  conf_count_goal_t g1 = {&b.p[1].timeouts, 1};
  CU_ASSERT_EQUAL_FATAL(run_until(b.r, timer_fired, &g1, WAIT_MS), 1);

  util_alloc_counts_t before = util_alloc_counts();
  int timeouts_before = atomic_load(&b.p[0].timeouts);
  int notes_before = atomic_load(&notes);
  for (int i = 0; i < EVENTS && !failed; i++) {
    if (ping(&b, i % PAIRS) != 0) failed = 1;
    if (i % 10000 == 0) {
      /* Make sure timers fire inside the window, however fast it is. */
      g.goal = atomic_load(&b.p[0].timeouts) + 1;
      if (run_until(b.r, timer_fired, &g, WAIT_MS) != 1) failed = 2;
      if (taxi_reactor_schedule(b.r, &b.p[1].timer, &b.p[1].h, 0, 0, NULL) != 0)
        failed = 3;
    }
  }
  conf_count_goal_t gn = {&notes, notes_before + EVENTS};
  CU_ASSERT_EQUAL(run_until(b.r, conf_pred_reached, &gn, WAIT_MS), 1);
  util_alloc_counts_t after = util_alloc_counts();

  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT(atomic_load(&b.p[0].timeouts) > timeouts_before);
  CU_ASSERT(atomic_load(&b.p[1].timeouts) >= 2);
  CU_ASSERT_EQUAL(atomic_load(&notes), notes_before + EVENTS);
  uint64_t mallocs = after.mallocs - before.mallocs;
  uint64_t reallocs = after.reallocs - before.reallocs;
  if (mallocs || reallocs)
    printf("\n    %llu malloc and %llu realloc calls during %d events\n",
           (unsigned long long)mallocs, (unsigned long long)reallocs, EVENTS);
  CU_ASSERT_EQUAL(mallocs, 0);
  CU_ASSERT_EQUAL(reallocs, 0);
  CU_ASSERT_EQUAL(total_reads(&b), WARMUP + EVENTS);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(b.r), 0);
  for (int i = 0; i < PAIRS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&b.p[i].closes), 1);
    close(b.p[i].fd);
    close(b.peer[i]);
  }
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Everything a reactor allocated is freed by destroy (through the hook). */
static void test_destroy_frees_everything(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  taxi_reactor_t *r = conf_reactor();
  int sv[20][2];
  conf_probe_t p[20];
  taxi_timer_t t[20];
  for (int i = 0; i < 20; i++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv[i]), 0);
    conf_probe_init(&p[i], sv[i][0], NULL);
    CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[i][0], &p[i].h, TAXI_EV_READ),
                    0);
    CU_ASSERT_EQUAL(taxi_timer_init(&t[i]), 0);
    CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t[i], &p[i].h,
                                          TAXI_NSEC_PER_SEC * (i + 1), 0, NULL),
                    0);
  }
  for (int i = 0; i < 500; i++)
    CU_ASSERT_EQUAL(taxi_reactor_notify(r, note, NULL), 0);
  util_write_byte(sv[0][1]);
  CU_ASSERT(taxi_reactor_handle_events(r, 100) >= 0);
  CU_ASSERT(util_alloc_counts().live > 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  util_alloc_counts_t c = util_alloc_counts();
  if (c.live != 0)
    printf("\n    %lld blocks still allocated\n", (long long)c.live);
  CU_ASSERT_EQUAL(c.live, 0);
  for (int i = 0; i < 20; i++) {
    close(sv[i][0]);
    close(sv[i][1]);
  }
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* An allocator that fails at the n-th allocation, for every n until create
 * succeeds: each failure is TAXI_ENOMEM and leaves nothing allocated. */
static void test_create_allocation_failures(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  int succeeded = 0, wrong = 0;
  for (long n = 0; n < 500 && !succeeded; n++) {
    util_alloc_reset();
    util_alloc_fail_after(n);
    taxi_reactor_t *r = NULL;
    int rc = util_reactor_create(&r, taxi_test_backend);
    util_alloc_fail_after(-1);
    if (rc == 0) {
      succeeded = 1;
      CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    } else if (rc != TAXI_ENOMEM) {
      if (!wrong)
        printf("\n    failing allocation #%ld: create gave %s\n", n,
               taxi_error_name(rc));
      wrong++;
    }
    util_alloc_counts_t c = util_alloc_counts();
    if (c.live != 0) {
      printf("\n    failing allocation #%ld: %lld blocks leaked\n", n,
             (long long)c.live);
      CU_FAIL("leak after a failed create");
      break;
    }
  }
  CU_ASSERT_EQUAL(succeeded, 1);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Registrations made while every allocation fails: each either works
 * (room was there) or gives TAXI_ENOMEM and leaves the handler detached;
 * once memory is back, the refused ones register and everything
 * dispatches. */
static void test_register_allocation_failures(void) {
  enum { MAX_N = 2000 };
  /* Both ends of every pair use a descriptor: stay below a backend's
   * handle limit (select's FD_SETSIZE). */
  taxi_backend_info_t info;
  CU_ASSERT_EQUAL_FATAL(conf_backend_info(&info), 0);
  int N = MAX_N;
  if (info.max_handles && info.max_handles < 2 * MAX_N + 200)
    N = ((int)info.max_handles - 200) / 2;
  CU_ASSERT_FATAL(N >= 100);
  if (!util_raise_nofile(2 * MAX_N + 200))
    CU_FAIL_FATAL("RLIMIT_NOFILE cannot be raised to 4,200");
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  taxi_reactor_t *r = conf_reactor();
  static int sv[MAX_N][2];
  static conf_probe_t p[MAX_N];
  static int refused[MAX_N];
  util_alloc_fail_after(0); /* every allocation fails from now on */
  int enomem = 0, other = 0;
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv[i]), 0);
    conf_probe_init(&p[i], sv[i][0], NULL);
    int rc = taxi_reactor_register(r, sv[i][0], &p[i].h, TAXI_EV_READ);
    refused[i] = rc != 0;
    if (rc == TAXI_ENOMEM)
      enomem++;
    else if (rc != 0)
      other++;
  }
  util_alloc_fail_after(-1);
  printf("(%d of %d refused) ", enomem, N);
  CU_ASSERT_EQUAL(other, 0);
  int bad_state = 0;
  for (int i = 0; i < N; i++) {
    if (!refused[i]) continue;
    if (taxi_reactor_remove(r, &p[i].h) != TAXI_ENOENT) bad_state++;
    if (taxi_reactor_register(r, sv[i][0], &p[i].h, TAXI_EV_READ) != 0)
      bad_state++;
  }
  CU_ASSERT_EQUAL(bad_state, 0);
  taxi_reactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &st), 0);
  CU_ASSERT_EQUAL(st.handles, (size_t)N);
  for (int i = 0; i < N; i += 97) CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);
  for (int i = 0; i < N; i += 97)
    CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p[i].inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  int closes = 0;
  for (int i = 0; i < N; i++) closes += atomic_load(&p[i].closes);
  CU_ASSERT_EQUAL(closes, N);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  for (int i = 0; i < N; i++) {
    close(sv[i][0]);
    close(sv[i][1]);
  }
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

static CU_TestInfo alloc_tests[] = {
    {"steady state allocates nothing", test_steady_state_allocates_nothing},
    {"destroy frees everything", test_destroy_frees_everything},
    {"create: every allocation failure is ENOMEM",
     test_create_allocation_failures},
    {"register: allocation failure is ENOMEM",
     test_register_allocation_failures},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_alloc = {"alloc", alloc_tests, 90, NULL};
