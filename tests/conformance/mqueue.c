/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/mqueue.c - message queues as event sources of the
 * reactor: exactly once and in order from many producers, a turn of
 * `batch` items beside the handles, a bound that refuses, items handed
 * back at the end, no allocation per item, and bad input.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 10000

typedef struct item {
  taxi_mq_item_t link;
  int producer, seq;
} item_t;

typedef struct sink {
  atomic_int run, dropped, out_of_order, wrong_queue;
  int next_seq[8];
  taxi_mq_t *expect_q;
  taxi_mq_t *destroy_in_run; /* run destroys this queue at its first item */
} sink_t;

static void sink_run(taxi_mq_t *q, taxi_mq_item_t *it, void *arg) {
  sink_t *s = arg;
  item_t *i = TAXI_CONTAINER_OF(it, item_t, link);
  if (q != s->expect_q) atomic_fetch_add(&s->wrong_queue, 1);
  if (i->seq != s->next_seq[i->producer]) atomic_fetch_add(&s->out_of_order, 1);
  s->next_seq[i->producer] = i->seq + 1;
  atomic_fetch_add(&s->run, 1);
  if (s->destroy_in_run) {
    taxi_mq_t *d = s->destroy_in_run;
    s->destroy_in_run = NULL;
    CU_ASSERT_EQUAL(taxi_mq_destroy(d), 0);
  }
}

static void sink_drop(taxi_mq_t *q, taxi_mq_item_t *it, void *arg) {
  (void)q;
  (void)it;
  atomic_fetch_add(&((sink_t *)arg)->dropped, 1);
}

static taxi_mq_t *make_queue(taxi_reactor_t *r, sink_t *s, unsigned capacity,
                             unsigned batch) {
  taxi_mq_options_t o = TAXI_MQ_OPTIONS_INIT;
  o.capacity = capacity;
  o.batch = batch;
  o.run = sink_run;
  o.drop = sink_drop;
  o.arg = s;
  taxi_mq_t *q = NULL;
  int rc = taxi_mq_create(&q, r, &o);
  if (rc != 0) printf("\n    taxi_mq_create = %s\n", taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  s->expect_q = q;
  return q;
}

/* ---- many producers ----------------------------------------------------- */

enum { PRODUCERS = 4, PER_PRODUCER = 5000 };

typedef struct producer {
  taxi_mq_t *q;
  item_t *items;
  int index;
  atomic_int *go;
  int errors;
} producer_t;

static void *produce(void *arg) {
  producer_t *p = arg;
  util_wait_flag(p->go, 1, WAIT_MS);
  for (int i = 0; i < PER_PRODUCER; i++) {
    int rc;
    /* Full: the producer waits its turn, as the contract asks. */
    while ((rc = taxi_mq_push(p->q, &p->items[i].link)) == TAXI_EAGAIN)
      sched_yield();
    if (rc != 0) p->errors++;
  }
  return NULL;
}

/* Four threads push 5,000 items each into a queue of 64 while the main
 * thread dispatches: each item runs once, each producer's in its order,
 * and the counters agree. */
static void test_producers_exactly_once_in_order(void) {
  taxi_reactor_t *r = conf_reactor();
  static sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_t *q = make_queue(r, &s, 64, 8);
  static item_t items[PRODUCERS][PER_PRODUCER];
  producer_t p[PRODUCERS];
  pthread_t t[PRODUCERS];
  atomic_int go = 0;
  for (int i = 0; i < PRODUCERS; i++) {
    for (int k = 0; k < PER_PRODUCER; k++) {
      memset(&items[i][k], 0, sizeof items[i][k]);
      items[i][k].producer = i;
      items[i][k].seq = k;
    }
    p[i] = (producer_t){q, items[i], i, &go, 0};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, produce, &p[i]), 0);
  }
  atomic_store(&go, 1);
  conf_count_goal_t g = {&s.run, PRODUCERS * PER_PRODUCER};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, 60000), 1);
  for (int i = 0; i < PRODUCERS; i++) {
    pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(p[i].errors, 0);
  }
  CU_ASSERT(run_for(r, 20) >= 0); /* a duplicate would show now */
  CU_ASSERT_EQUAL(atomic_load(&s.run), PRODUCERS * PER_PRODUCER);
  CU_ASSERT_EQUAL(atomic_load(&s.out_of_order), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.wrong_queue), 0);
  for (int i = 0; i < PRODUCERS; i++)
    CU_ASSERT_EQUAL(s.next_seq[i], PER_PRODUCER);
  taxi_mq_stats_t st;
  CU_ASSERT_EQUAL(taxi_mq_stats(q, &st), 0);
  CU_ASSERT_EQUAL(st.pushed, (uint64_t)PRODUCERS * PER_PRODUCER);
  CU_ASSERT_EQUAL(st.run, st.pushed);
  CU_ASSERT_EQUAL(st.queued, 0);
  CU_ASSERT(st.high_water <= 64);
  CU_ASSERT(st.dispatches >= st.run / 8);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.dropped), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- a turn beside the handles ------------------------------------------ */

/* Five items with batch 2 and a readable socket: the first dispatch runs
 * two items and the socket's hook, the rest come in later turns. */
static void test_batch_turns_beside_handles(void) {
  taxi_reactor_t *r = conf_reactor();
  sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_t *q = make_queue(r, &s, 0, 2);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t probe;
  conf_probe_init(&probe, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &probe.h, TAXI_EV_READ),
                        0);
  item_t items[5];
  memset(items, 0, sizeof items);
  for (int i = 0; i < 5; i++) {
    items[i].seq = i;
    CU_ASSERT_EQUAL(taxi_mq_push(q, &items[i].link), 0);
  }
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);

  CU_ASSERT(taxi_reactor_handle_events(r, WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&s.run), 2);
  CU_ASSERT_EQUAL(atomic_load(&probe.inputs), 1);
  conf_count_goal_t g = {&s.run, 5};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&s.out_of_order), 0);
  taxi_mq_stats_t st;
  CU_ASSERT_EQUAL(taxi_mq_stats(q, &st), 0);
  CU_ASSERT_EQUAL(st.dispatches, 3);

  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &probe.h), 0);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(sv[0]);
  close(sv[1]);
}

/* ---- bounds, the end, bad input ----------------------------------------- */

/* A queue of 3 refuses the fourth item (and counts it); the item is the
 * caller's again.  Destroying the queue hands back what it holds. */
static void test_full_refuses_destroy_drops(void) {
  taxi_reactor_t *r = conf_reactor();
  sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_t *q = make_queue(r, &s, 3, 0);
  item_t items[4];
  memset(items, 0, sizeof items);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(taxi_mq_push(q, &items[i].link), 0);
  CU_ASSERT_EQUAL(taxi_mq_push(q, &items[3].link), TAXI_EAGAIN);
  CU_ASSERT_EQUAL(taxi_mq_push(q, &items[0].link), TAXI_EBUSY);
  taxi_mq_stats_t st;
  CU_ASSERT_EQUAL(taxi_mq_stats(q, &st), 0);
  CU_ASSERT_EQUAL(st.refused, 1);
  CU_ASSERT_EQUAL(st.queued, 3);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.dropped), 3);
  CU_ASSERT_EQUAL(atomic_load(&s.run), 0);
  /* Handed back: the items may go to another queue. */
  taxi_mq_t *q2 = make_queue(r, &s, 0, 0);
  CU_ASSERT_EQUAL(taxi_mq_push(q2, &items[0].link), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, WAIT_MS) >= 1, 1);
  CU_ASSERT_EQUAL(atomic_load(&s.run), 1);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q2), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* The reactor destroyed first: its items are dropped then, pushes are
 * refused with TAXI_ESTOPPED, and the queue is still destroyed after. */
static void test_reactor_destroyed_first(void) {
  taxi_reactor_t *r = conf_reactor();
  sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_t *q = make_queue(r, &s, 0, 0);
  item_t items[3];
  memset(items, 0, sizeof items);
  CU_ASSERT_EQUAL(taxi_mq_push(q, &items[0].link), 0);
  CU_ASSERT_EQUAL(taxi_mq_push(q, &items[1].link), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.dropped), 2);
  CU_ASSERT_EQUAL(taxi_mq_push(q, &items[2].link), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.run), 0);
}

/* The run hook destroys its queue at the first item: that item finishes,
 * the others are dropped, nothing runs after. */
static void test_destroy_from_run(void) {
  taxi_reactor_t *r = conf_reactor();
  sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_t *q = make_queue(r, &s, 0, 8);
  s.destroy_in_run = q;
  item_t items[4];
  memset(items, 0, sizeof items);
  for (int i = 0; i < 4; i++) {
    items[i].seq = i;
    CU_ASSERT_EQUAL(taxi_mq_push(q, &items[i].link), 0);
  }
  CU_ASSERT(taxi_reactor_handle_events(r, WAIT_MS) >= 1);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&s.run), 1);
  CU_ASSERT_EQUAL(atomic_load(&s.dropped), 3);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* Pushing and running allocate nothing once the queue exists. */
static void test_no_allocation_per_item(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  taxi_reactor_t *r = conf_reactor();
  sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_t *q = make_queue(r, &s, 0, 4);
  item_t items[200];
  memset(items, 0, sizeof items);
  CU_ASSERT(run_for(r, 5) >= 0); /* first waits may size the backend */
  util_alloc_counts_t c0 = util_alloc_counts();
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 20; i++) {
      items[round * 20 + i].seq = round * 20 + i;
      CU_ASSERT_EQUAL(taxi_mq_push(q, &items[round * 20 + i].link), 0);
    }
    conf_count_goal_t g = {&s.run, (round + 1) * 20};
    CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  }
  util_alloc_counts_t c = util_alloc_counts();
  CU_ASSERT_EQUAL(c.mallocs, c0.mallocs);
  CU_ASSERT_EQUAL(c.reallocs, c0.reallocs);
  CU_ASSERT_EQUAL(atomic_load(&s.run), 200);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

static void test_bad_input(void) {
  taxi_reactor_t *r = conf_reactor();
  sink_t s;
  memset(&s, 0, sizeof s);
  taxi_mq_options_t o = TAXI_MQ_OPTIONS_INIT;
  taxi_mq_t *q = (taxi_mq_t *)&s; /* must stay untouched on error */
  CU_ASSERT_EQUAL(taxi_mq_create(&q, r, &o), TAXI_EINVAL); /* no run hook */
  o.run = sink_run;
  CU_ASSERT_EQUAL(taxi_mq_create(NULL, r, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_mq_create(&q, NULL, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_mq_create(&q, r, NULL), TAXI_EINVAL);
  o.capacity = TAXI_MQ_MAX_CAPACITY + 1;
  CU_ASSERT_EQUAL(taxi_mq_create(&q, r, &o), TAXI_EINVAL);
  o.capacity = 0;
  o.batch = TAXI_MQ_MAX_BATCH + 1;
  CU_ASSERT_EQUAL(taxi_mq_create(&q, r, &o), TAXI_EINVAL);
  o.batch = 0;
  o.size = 4;
  CU_ASSERT_EQUAL(taxi_mq_create(&q, r, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_EQUAL(q, (taxi_mq_t *)&s);
  q = make_queue(r, &s, 0, 0);
  item_t it;
  memset(&it, 0, sizeof it);
  CU_ASSERT_EQUAL(taxi_mq_push(NULL, &it.link), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_mq_push(q, NULL), TAXI_EINVAL);
  taxi_mq_stats_t st;
  CU_ASSERT_EQUAL(taxi_mq_stats(NULL, &st), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_mq_stats(q, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_mq_destroy(NULL), TAXI_EINVAL);
  /* An item queued on one queue is refused by another. */
  sink_t s2;
  memset(&s2, 0, sizeof s2);
  taxi_mq_t *q2 = make_queue(r, &s2, 0, 0);
  CU_ASSERT_EQUAL(taxi_mq_push(q, &it.link), 0);
  CU_ASSERT_EQUAL(taxi_mq_push(q2, &it.link), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q2), 0);
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.dropped), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static CU_TestInfo mqueue_tests[] = {
    {"producers: exactly once, in order", test_producers_exactly_once_in_order},
    {"a turn of batch items beside the handles",
     test_batch_turns_beside_handles},
    {"full refuses; destroy hands the items back",
     test_full_refuses_destroy_drops},
    {"reactor destroyed first", test_reactor_destroyed_first},
    {"destroyed from its run hook", test_destroy_from_run},
    {"no allocation per item", test_no_allocation_per_item},
    {"bad input", test_bad_input},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_mqueue = {"message queues", mqueue_tests,
                                             120, NULL};
