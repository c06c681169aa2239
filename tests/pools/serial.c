/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/serial.c - a handler's hooks never run at the same time:
 * its handle's, its timers' and its signals' hooks, under the
 * Leader/Followers pool (8 threads, one leader and, where the backend can,
 * several) and the half-sync/half-async pool (8 workers).
 *
 * The stress test gives one handler a 1 ms periodic timer, a signal sent
 * again as soon as it was dispatched, and input kept coming by a writer
 * thread; every hook does atomic_exchange on an "inside" flag and counts
 * it when it finds the flag set.  The ordered tests hold the handle's hook
 * on a gate while the handler's timer (or signal) falls due, prove with a
 * second handler whose later timer (higher signal) has run that the
 * first was taken meanwhile, and check that it ran only after the handle's
 * hook returned, exactly once.  The turns test holds a signal hook while
 * the same signal and the handler's timer are set aside, and checks that
 * the timer runs before the signal's second hook: the kinds set aside
 * take turns, so a signal raised again and again cannot starve the rest.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if !defined(_WIN32)

#define MS (TAXI_NSEC_PER_MSEC)

typedef struct serial {
  taxi_handler_t h;
  taxi_timer_t timer;
  int sv[2];
  atomic_int inside;   /* 1 while one of its hooks runs */
  atomic_int overlaps; /* hooks that found it 1 already */
  atomic_int inputs, timeouts, signals;
  atomic_long bytes;
  /* The ordered tests. */
  pools_gate_t *gate;    /* the input hook waits here once, if set */
  atomic_int held;       /* the input hook is on the gate, or was */
  atomic_int input_done; /* ... and has returned */
  atomic_int early;      /* timer/signal hooks that ran in between */
  atomic_int closes;
  /* The turns test. */
  pools_gate_t *sig_gate; /* the signal hook waits here once, if set */
  atomic_int reraise;     /* signal hooks after the gate send it again */
  atomic_int order[16];   /* the kinds of the hooks run, in turn */
  atomic_int ran;         /* how many of order[] are filled */
} serial_t;

enum { RAN_INPUT = 1, RAN_TIMER, RAN_SIGNAL };

/* Called inside a hook (never two at once): notes its kind. */
static void note_ran(serial_t *s, int kind) {
  int i = atomic_load(&s->ran);
  if (i < 16) atomic_store(&s->order[i], kind);
  atomic_store(&s->ran, i + 1);
}

#define SERIAL(hp) TAXI_CONTAINER_OF(hp, serial_t, h)

/* A little work inside each hook, so that an overlap has room to show. */
static void busy_inside(void) {
  for (int i = 0; i < 50; i++) sched_yield();
}

static void enter(serial_t *s) {
  if (atomic_exchange(&s->inside, 1)) atomic_fetch_add(&s->overlaps, 1);
}

static void leave(serial_t *s) { atomic_store(&s->inside, 0); }

static int on_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  serial_t *s = SERIAL(h);
  (void)ev;
  enter(s);
  pools_gate_t *gate = s->gate;
  if (gate) {
    s->gate = NULL; /* once: read and written only by the handler's hooks */
    atomic_store(&s->held, 1);
    pools_gate_pass(gate);
  }
  atomic_fetch_add(&s->bytes, pools_drain(fd));
  atomic_fetch_add(&s->inputs, 1);
  note_ran(s, RAN_INPUT);
  busy_inside();
  if (gate) atomic_store(&s->input_done, 1);
  leave(s);
  return 0;
}

static int on_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  serial_t *s = SERIAL(h);
  (void)t;
  (void)act;
  enter(s);
  if (atomic_load(&s->held) && !atomic_load(&s->input_done))
    atomic_fetch_add(&s->early, 1);
  atomic_fetch_add(&s->timeouts, 1);
  note_ran(s, RAN_TIMER);
  busy_inside();
  leave(s);
  return 0;
}

static int on_signal(taxi_handler_t *h, int signo) {
  serial_t *s = SERIAL(h);
  enter(s);
  if (atomic_load(&s->held) && !atomic_load(&s->input_done))
    atomic_fetch_add(&s->early, 1);
  pools_gate_t *gate = s->sig_gate;
  if (gate) {
    s->sig_gate = NULL; /* once, as in on_input */
    pools_gate_pass(gate);
  } else if (atomic_load(&s->reraise) > 0) {
    /* Raised again from its own hook: set aside again at once. */
    atomic_fetch_sub(&s->reraise, 1);
    (void)kill(getpid(), signo);
  }
  note_ran(s, RAN_SIGNAL);
  atomic_fetch_add(&s->signals, 1);
  busy_inside();
  leave(s);
  return 0;
}

static void on_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&SERIAL(h)->closes, 1);
}

static const taxi_handler_ops_t serial_ops = {.input = on_input,
                                              .timeout = on_timeout,
                                              .signal = on_signal,
                                              .close = on_close};

static void serial_init(serial_t *s) {
  memset(s, 0, sizeof *s);
  s->sv[0] = s->sv[1] = -1;
  CU_ASSERT_EQUAL(taxi_handler_init(&s->h, &serial_ops), 0);
  CU_ASSERT_EQUAL(taxi_timer_init(&s->timer), 0);
}

/* ---- the pools -------------------------------------------------------- */

typedef struct pool {
  taxi_reactor_t *r;
  taxi_lf_pool_t *lf;
  taxi_hsha_pool_t *hsha;
} pool_t;

/* 8 threads: lf with `leaders`, or hsha.  False when the backend cannot
 * have several leaders (nothing is made then). */
static bool pool_start(pool_t *p, bool hsha, taxi_leaders_t leaders) {
  memset(p, 0, sizeof *p);
  p->r = pools_reactor();
  if (hsha) {
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = 8;
    CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p->hsha, p->r, &o), 0);
    return true;
  }
  if (leaders == TAXI_LEADERS_MANY && !pools_can_many_leaders(p->r)) {
    CU_ASSERT_EQUAL(taxi_reactor_destroy(p->r), 0);
    return false;
  }
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = leaders;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p->lf, p->r, &o), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(p->lf, 8), 0);
  return true;
}

static void pool_end(pool_t *p) {
  if (p->lf) CU_ASSERT_EQUAL(taxi_lf_destroy(p->lf), 0);
  if (p->hsha) CU_ASSERT_EQUAL(taxi_hsha_destroy(p->hsha), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(p->r), 0);
}

/* ---- the stress test -------------------------------------------------- */

#define STRESS_TIMEOUTS 300
#define STRESS_SIGNALS 100
#define STRESS_INPUTS 300

typedef struct feeder {
  serial_t *s;
  atomic_int stop;
  atomic_int failed;
} feeder_t;

/* Keeps input coming: writes while the socket takes it, waits (bounded
 * by poll) for room when it does not. */
static void feed(void *arg) {
  feeder_t *f = arg;
  char buf[64];
  memset(buf, 'x', sizeof buf);
  while (!atomic_load(&f->stop)) {
    ssize_t n = write(f->s->sv[1], buf, sizeof buf);
    if (n > 0) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      atomic_store(&f->failed, 1);
      return;
    }
    struct pollfd pf = {f->s->sv[1], POLLOUT, 0};
    (void)poll(&pf, 1, 50);
  }
}

/* Sends SIGUSR2 again each time the last one was dispatched. */
static void signal_again(void *arg) {
  feeder_t *f = arg;
  while (!atomic_load(&f->stop)) {
    int seen = atomic_load(&f->s->signals);
    if (kill(getpid(), SIGUSR2) != 0) {
      atomic_store(&f->failed, 1);
      return;
    }
    while (!atomic_load(&f->stop) &&
           !util_wait_flag(&f->s->signals, seen + 1, 100)) {
    }
  }
}

static bool stress_done(serial_t *s) {
  return atomic_load(&s->timeouts) >= STRESS_TIMEOUTS &&
         atomic_load(&s->signals) >= STRESS_SIGNALS &&
         atomic_load(&s->inputs) >= STRESS_INPUTS;
}

static void stress(bool hsha, taxi_leaders_t leaders) {
  pool_t p;
  if (!pool_start(&p, hsha, leaders)) return;
  serial_t s;
  serial_init(&s);
  pools_pair(s.sv);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(p.r, s.sv[0], &s.h, TAXI_EV_READ),
                        0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(p.r, SIGUSR2, &s.h), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_schedule(p.r, &s.timer, &s.h, MS, MS, NULL), 0);
  feeder_t f;
  memset(&f, 0, sizeof f);
  f.s = &s;
  util_thread_t writer, sender;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&writer, feed, &f), 0);
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&sender, signal_again, &f), 0);

  taxi_time_t start = taxi_now();
  while (!stress_done(&s) && util_elapsed_ms(start) < 4 * POOLS_WAIT_MS)
    util_sleep_ms(5);
  atomic_store(&f.stop, 1);
  util_thread_join(&writer, POOLS_WAIT_MS, "serial: writer");
  util_thread_join(&sender, POOLS_WAIT_MS, "serial: signal sender");

  if (!stress_done(&s))
    printf("\n    %d timeouts, %d signals, %d inputs\n",
           atomic_load(&s.timeouts), atomic_load(&s.signals),
           atomic_load(&s.inputs));
  CU_ASSERT(stress_done(&s));
  CU_ASSERT_EQUAL(atomic_load(&f.failed), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.overlaps), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(p.r, &s.h), 0);
  CU_ASSERT(pools_wait_count(&s.closes, 1, POOLS_WAIT_MS));
  pool_end(&p);
  pools_close_pair(s.sv);
  CU_ASSERT_EQUAL(atomic_load(&s.closes), 1);
}

/* ---- a timer or a signal due while the handle's hook runs ------------- */

typedef struct marker {
  taxi_handler_t h;
  taxi_timer_t timer;
  atomic_int fired;
} marker_t;

static int marker_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  (void)t;
  (void)act;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, marker_t, h)->fired, 1);
  return 0;
}

static int marker_signal(taxi_handler_t *h, int signo) {
  (void)signo;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, marker_t, h)->fired, 1);
  return 0;
}

static const taxi_handler_ops_t marker_ops = {.timeout = marker_timeout,
                                              .signal = marker_signal};

/* What the ordered tests share: a pool, s with its handle's hook held on
 * the gate, and the marker whose hook proves that the pool went on. */
typedef struct ordered {
  pool_t p;
  serial_t s;
  pools_gate_t gate;
  marker_t m;
} ordered_t;

/* Starts the pool (8 threads, one leader), registers s (and, by_signal,
 * SIGUSR1 for s and SIGUSR2 for the marker), and returns once s's input
 * hook is on the gate. */
static void ordered_start(ordered_t *o, bool hsha, bool by_signal) {
  pool_start(&o->p, hsha, TAXI_LEADERS_ONE);
  serial_init(&o->s);
  pools_gate_init(&o->gate);
  o->s.gate = &o->gate;
  memset(&o->m, 0, sizeof o->m);
  CU_ASSERT_EQUAL(taxi_handler_init(&o->m.h, &marker_ops), 0);
  CU_ASSERT_EQUAL(taxi_timer_init(&o->m.timer), 0);
  pools_pair(o->s.sv);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(o->p.r, o->s.sv[0], &o->s.h, TAXI_EV_READ), 0);
  if (by_signal) {
    CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(o->p.r, SIGUSR1, &o->s.h), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(o->p.r, SIGUSR2, &o->m.h), 0);
  }
  CU_ASSERT_EQUAL(util_write_byte(o->s.sv[1]), 1);
  CU_ASSERT_FATAL(pools_wait_count(&o->gate.entered, 1, POOLS_WAIT_MS));
}

/* With the handle's hook held on the gate: make s's timer (or SIGUSR1)
 * due, then the marker's later timer (or SIGUSR2, taken after SIGUSR1);
 * once the marker's hook ran, s's event was taken and set aside.  It runs
 * when the gate opens, after the hook, once. */
static void aside(bool hsha, bool by_signal) {
  ordered_t o;
  ordered_start(&o, hsha, by_signal);
  pool_t *p = &o.p;
  serial_t *s = &o.s;
  marker_t *m = &o.m;
  atomic_int *ran = by_signal ? &s->signals : &s->timeouts;

  if (by_signal) {
    CU_ASSERT_EQUAL(kill(getpid(), SIGUSR1), 0);
    CU_ASSERT_EQUAL(kill(getpid(), SIGUSR2), 0);
  } else {
    CU_ASSERT_EQUAL(taxi_reactor_schedule(p->r, &s->timer, &s->h, MS, 0, NULL),
                    0);
    CU_ASSERT_EQUAL(
        taxi_reactor_schedule(p->r, &m->timer, &m->h, 2 * MS, 0, NULL), 0);
  }
  CU_ASSERT(pools_wait_count(&m->fired, 1, POOLS_WAIT_MS));
  /* Taken, not run: the handle's hook still holds the handler. */
  CU_ASSERT_EQUAL(atomic_load(ran), 0);
  pools_gate_open(&o.gate);
  CU_ASSERT(pools_wait_count(ran, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&s->input_done), 1);
  CU_ASSERT_EQUAL(atomic_load(&s->early), 0);
  CU_ASSERT_EQUAL(atomic_load(&s->overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&o.gate.timeouts), 0);

  /* Once only: after another round of the marker, still one. */
  if (by_signal) {
    CU_ASSERT_EQUAL(kill(getpid(), SIGUSR2), 0);
  } else {
    CU_ASSERT_EQUAL(taxi_reactor_schedule(p->r, &m->timer, &m->h, MS, 0, NULL),
                    0);
  }
  CU_ASSERT(pools_wait_count(&m->fired, 2, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(ran), 1);

  /* The close hook runs once every hook of s has returned (under HS/HA
   * the worker that ran the set-aside timer may still be finishing it
   * when the marker's second round is seen): still once then. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(p->r, &s->h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(p->r, &m->h), 0);
  CU_ASSERT(pools_wait_count(&s->closes, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(ran), 1);
  pool_end(p);
  pools_close_pair(s->sv);
}

/* Cancelled, or the handler removed, while set aside: it never runs. */
static void forgotten(bool hsha, bool remove) {
  ordered_t o;
  ordered_start(&o, hsha, false);
  pool_t *p = &o.p;
  serial_t *s = &o.s;
  marker_t *m = &o.m;

  CU_ASSERT_EQUAL(taxi_reactor_schedule(p->r, &s->timer, &s->h, MS, MS, NULL),
                  0);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(p->r, &m->timer, &m->h, 2 * MS, 0, NULL), 0);
  CU_ASSERT(pools_wait_count(&m->fired, 1, POOLS_WAIT_MS));
  if (remove) {
    CU_ASSERT_EQUAL(taxi_reactor_remove(p->r, &s->h), 0);
  } else {
    CU_ASSERT_EQUAL(taxi_reactor_cancel(p->r, &s->timer), 0);
  }
  pools_gate_open(&o.gate);
  CU_ASSERT(pools_wait_count(&o.gate.left, 1, POOLS_WAIT_MS));
  /* Another marker round: anything the gate let go has run by then. */
  CU_ASSERT_EQUAL(taxi_reactor_schedule(p->r, &m->timer, &m->h, MS, 0, NULL),
                  0);
  CU_ASSERT(pools_wait_count(&m->fired, 2, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&s->timeouts), 0);
  if (remove) {
    CU_ASSERT(pools_wait_count(&s->closes, 1, POOLS_WAIT_MS));
  } else {
    CU_ASSERT_EQUAL(taxi_reactor_remove(p->r, &s->h), 0);
  }
  CU_ASSERT_EQUAL(taxi_reactor_remove(p->r, &m->h), 0);
  pool_end(p);
  pools_close_pair(s->sv);
  CU_ASSERT_EQUAL(atomic_load(&s->closes), 1);
}

/* ---- set-aside kinds take turns --------------------------------------- */

/* s's first SIGUSR1 hook waits on the gate.  Meanwhile SIGUSR1 comes again
 * (the marker's SIGUSR2 after it proves it was taken) and s's timer falls
 * due (the marker's later timer proves it was taken): both are set aside.
 * When the gate opens, the timer must run next, before the signal's second
 * hook, though that hook sends SIGUSR1 again each time it runs; a fixed
 * order with signals first ran S S S S T here. */
static void turns(bool hsha) {
  pool_t p;
  pool_start(&p, hsha, TAXI_LEADERS_ONE);
  serial_t s;
  serial_init(&s);
  pools_gate_t gate;
  pools_gate_init(&gate);
  s.sig_gate = &gate;
  atomic_store(&s.reraise, 3);
  marker_t m;
  memset(&m, 0, sizeof m);
  CU_ASSERT_EQUAL(taxi_handler_init(&m.h, &marker_ops), 0);
  CU_ASSERT_EQUAL(taxi_timer_init(&m.timer), 0);
  pools_pair(s.sv);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(p.r, s.sv[0], &s.h, TAXI_EV_READ),
                        0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(p.r, SIGUSR1, &s.h), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(p.r, SIGUSR2, &m.h), 0);
  CU_ASSERT_EQUAL(kill(getpid(), SIGUSR1), 0);
  CU_ASSERT_FATAL(pools_wait_count(&gate.entered, 1, POOLS_WAIT_MS));

  /* SIGUSR1 again, taken before the marker's SIGUSR2 (lower first). */
  CU_ASSERT_EQUAL(kill(getpid(), SIGUSR1), 0);
  CU_ASSERT_EQUAL(kill(getpid(), SIGUSR2), 0);
  CU_ASSERT(pools_wait_count(&m.fired, 1, POOLS_WAIT_MS));
  /* s's timer, taken before the marker's later one. */
  CU_ASSERT_EQUAL(taxi_reactor_schedule(p.r, &s.timer, &s.h, MS, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(p.r, &m.timer, &m.h, 2 * MS, 0, NULL),
                  0);
  CU_ASSERT(pools_wait_count(&m.fired, 2, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 0);

  pools_gate_open(&gate);
  /* The first hook, the timer, the second and the three raised again. */
  CU_ASSERT(pools_wait_count(&s.signals, 5, POOLS_WAIT_MS));
  CU_ASSERT(pools_wait_count(&s.timeouts, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 6);
  CU_ASSERT_EQUAL(atomic_load(&s.order[0]), RAN_SIGNAL);
  CU_ASSERT_EQUAL(atomic_load(&s.order[1]), RAN_TIMER);
  for (int i = 2; i < 6; i++)
    CU_ASSERT_EQUAL(atomic_load(&s.order[i]), RAN_SIGNAL);
  CU_ASSERT_EQUAL(atomic_load(&s.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&gate.timeouts), 0);

  CU_ASSERT_EQUAL(taxi_reactor_remove(p.r, &s.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(p.r, &m.h), 0);
  CU_ASSERT(pools_wait_count(&s.closes, 1, POOLS_WAIT_MS));
  pool_end(&p);
  pools_close_pair(s.sv);
}

/* ---- the cases -------------------------------------------------------- */

/* One row a CUnit test: which test, on which pool, and its one flag. */
typedef enum {
  SERIAL_STRESS,
  SERIAL_ASIDE,
  SERIAL_FORGOTTEN,
  SERIAL_TURNS
} serial_kind_t;

typedef struct serial_case {
  serial_kind_t kind;
  bool hsha;
  taxi_leaders_t leaders; /* SERIAL_STRESS under lf */
  bool flag;              /* ASIDE: by a signal; FORGOTTEN: removed */
} serial_case_t;

static const serial_case_t serial_cases[] = {
    {SERIAL_STRESS, false, TAXI_LEADERS_ONE, false},
    {SERIAL_STRESS, false, TAXI_LEADERS_MANY, false},
    {SERIAL_STRESS, true, TAXI_LEADERS_ONE, false},
    {SERIAL_ASIDE, false, TAXI_LEADERS_ONE, false},
    {SERIAL_ASIDE, false, TAXI_LEADERS_ONE, true},
    {SERIAL_ASIDE, true, TAXI_LEADERS_ONE, false},
    {SERIAL_ASIDE, true, TAXI_LEADERS_ONE, true},
    {SERIAL_FORGOTTEN, false, TAXI_LEADERS_ONE, false},
    {SERIAL_FORGOTTEN, false, TAXI_LEADERS_ONE, true},
    {SERIAL_FORGOTTEN, true, TAXI_LEADERS_ONE, false},
    {SERIAL_FORGOTTEN, true, TAXI_LEADERS_ONE, true},
    {SERIAL_TURNS, false, TAXI_LEADERS_ONE, false},
    {SERIAL_TURNS, true, TAXI_LEADERS_ONE, false},
};

static void serial_run(size_t i) {
  const serial_case_t *c = &serial_cases[i];
  switch (c->kind) {
    case SERIAL_STRESS:
      stress(c->hsha, c->leaders);
      break;
    case SERIAL_ASIDE:
      aside(c->hsha, c->flag);
      break;
    case SERIAL_FORGOTTEN:
      forgotten(c->hsha, c->flag);
      break;
    case SERIAL_TURNS:
      turns(c->hsha);
      break;
  }
}

#define SERIAL_TEST(i) \
  static void test_serial_##i(void) { serial_run(i); }
SERIAL_TEST(0)
SERIAL_TEST(1)
SERIAL_TEST(2)
SERIAL_TEST(3)
SERIAL_TEST(4)
SERIAL_TEST(5)
SERIAL_TEST(6)
SERIAL_TEST(7)
SERIAL_TEST(8)
SERIAL_TEST(9)
SERIAL_TEST(10)
SERIAL_TEST(11)
SERIAL_TEST(12)

#endif /* !_WIN32 */

static CU_TestInfo serial_tests[] = {
    {"lf, 8 threads: timer, signal and input hooks never overlap",
     TAXI_TEST_POSIX_ONLY(test_serial_0)},
    {"lf, 8 threads, many leaders: timer, signal and input never overlap",
     TAXI_TEST_POSIX_ONLY(test_serial_1)},
    {"hsha, 8 workers: timer, signal and input hooks never overlap",
     TAXI_TEST_POSIX_ONLY(test_serial_2)},
    {"lf: a timer due while the input hook runs runs after it, once",
     TAXI_TEST_POSIX_ONLY(test_serial_3)},
    {"lf: a signal arriving while the input hook runs runs after it, once",
     TAXI_TEST_POSIX_ONLY(test_serial_4)},
    {"hsha: a timer due while the input hook runs runs after it, once",
     TAXI_TEST_POSIX_ONLY(test_serial_5)},
    {"hsha: a signal arriving while the input hook runs runs after it, once",
     TAXI_TEST_POSIX_ONLY(test_serial_6)},
    {"lf: a timer cancelled while set aside does not run",
     TAXI_TEST_POSIX_ONLY(test_serial_7)},
    {"lf: a handler removed with a timer set aside: it does not run",
     TAXI_TEST_POSIX_ONLY(test_serial_8)},
    {"hsha: a timer cancelled while set aside does not run",
     TAXI_TEST_POSIX_ONLY(test_serial_9)},
    {"hsha: a handler removed with a timer set aside: it does not run",
     TAXI_TEST_POSIX_ONLY(test_serial_10)},
    {"lf: kinds set aside take turns: a signal raised again in its own hook "
     "does not run before the timer",
     TAXI_TEST_POSIX_ONLY(test_serial_11)},
    {"hsha: kinds set aside take turns: a signal raised again in its own "
     "hook does not run before the timer",
     TAXI_TEST_POSIX_ONLY(test_serial_12)},
    CU_TEST_INFO_NULL,
};

#if defined(_WIN32)
#define SERIAL_SKIP "POSIX signals and socket pairs"
#else
#define SERIAL_SKIP NULL
#endif

const taxi_test_suite_t pools_suite_serial = {"one hook of a handler at a time",
                                              serial_tests, 180, SERIAL_SKIP};
