/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/mqueue.c - message queues dispatched by the pools beside
 * socket events: under the Leader/Followers pool (one leader, and several
 * where the backend allows) and the half-sync/half-async pool, every
 * queued item runs exactly once and in its producer's order, every byte
 * written to the sockets is read, and a queue's items never run two at
 * a time.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each producer writes to a connection of its own (under wine, sends from
 * several threads on one socket may fail). */
enum { QUEUES = 2, PRODUCERS = 4, CONNS = PRODUCERS };
#define WAIT_MS 60000

typedef struct mix mix_t;

typedef struct job {
  taxi_mq_item_t link;
  int producer, seq;
} job_t;

typedef struct queue_side {
  taxi_mq_t *q;
  mix_t *m;
  atomic_int running; /* run hooks in progress: never above 1 */
  atomic_int overlaps;
  int next_seq[PRODUCERS];
  atomic_int out_of_order;
} queue_side_t;

typedef struct conn {
  taxi_handler_t h;
  int sv[2];
  atomic_long bytes;
} conn_t;

struct mix {
  queue_side_t side[QUEUES];
  conn_t conn[CONNS];
  atomic_int run;
  atomic_int go;
  int per_producer;
  job_t *jobs; /* [QUEUES][PRODUCERS][per_producer] */
};

static void job_run(taxi_mq_t *q, taxi_mq_item_t *it, void *arg) {
  (void)q;
  queue_side_t *s = arg;
  if (atomic_fetch_add(&s->running, 1) != 0) atomic_fetch_add(&s->overlaps, 1);
  job_t *j = TAXI_CONTAINER_OF(it, job_t, link);
  if (j->seq != s->next_seq[j->producer]) atomic_fetch_add(&s->out_of_order, 1);
  s->next_seq[j->producer] = j->seq + 1;
  sched_yield(); /* room for another thread to take the queue, wrongly */
  atomic_fetch_sub(&s->running, 1);
  atomic_fetch_add(&s->m->run, 1);
}

static int conn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)ev;
  conn_t *c = TAXI_CONTAINER_OF(h, conn_t, h);
  char buf[256];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      atomic_fetch_add(&c->bytes, n);
      continue;
    }
    return n == 0 ? -1 : 0; /* EAGAIN: wait for more */
  }
}

static const taxi_handler_ops_t conn_ops = {.input = conn_input};

typedef struct producer {
  mix_t *m;
  int index;
  int errors;
  int first_error; /* taxi_mq_push's code, or 1 for a failed write */
} producer_t;

static void producer_error(producer_t *p, int code) {
  if (p->errors++ == 0) p->first_error = code;
}

/* Pushes its jobs to both queues in turn and writes a byte to its socket
 * every tenth job, so sockets and queues are ready at once. */
static void *produce(void *arg) {
  producer_t *p = arg;
  mix_t *m = p->m;
  util_wait_flag(&m->go, 1, WAIT_MS);
  for (int k = 0; k < m->per_producer; k++) {
    for (int qi = 0; qi < QUEUES; qi++) {
      job_t *j = &m->jobs[(qi * PRODUCERS + p->index) * m->per_producer + k];
      int rc;
      while ((rc = taxi_mq_push(m->side[qi].q, &j->link)) == TAXI_EAGAIN)
        sched_yield();
      if (rc != 0) producer_error(p, rc);
    }
    if (k % 10 == 0 && util_write_byte(m->conn[p->index].sv[1]) != 1)
      producer_error(p, 1);
  }
  return NULL;
}

static mix_t *mix_new(taxi_reactor_t *r) {
  mix_t *m = calloc(1, sizeof *m);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  m->per_producer = pools_small() ? 500 : 3000;
  m->jobs = calloc((size_t)QUEUES * PRODUCERS * m->per_producer, sizeof(job_t));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m->jobs);
  for (int qi = 0; qi < QUEUES; qi++)
    for (int p = 0; p < PRODUCERS; p++)
      for (int k = 0; k < m->per_producer; k++) {
        job_t *j = &m->jobs[(qi * PRODUCERS + p) * m->per_producer + k];
        j->producer = p;
        j->seq = k;
      }
  for (int qi = 0; qi < QUEUES; qi++) {
    taxi_mq_options_t o = TAXI_MQ_OPTIONS_INIT;
    o.capacity = 128;
    o.batch = (unsigned)qi * 3; /* 0 (one per turn) and 3 */
    o.run = job_run;
    o.arg = &m->side[qi];
    m->side[qi].m = m;
    CU_ASSERT_EQUAL_FATAL(taxi_mq_create(&m->side[qi].q, r, &o), 0);
  }
  for (int c = 0; c < CONNS; c++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(m->conn[c].sv), 0);
    taxi_handler_init(&m->conn[c].h, &conn_ops);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(r, m->conn[c].sv[0], &m->conn[c].h, TAXI_EV_READ),
        0);
  }
  return m;
}

static int all_run(void *arg) {
  mix_t *m = arg;
  int want = QUEUES * PRODUCERS * m->per_producer;
  long bytes = 0;
  for (int c = 0; c < CONNS; c++) bytes += atomic_load(&m->conn[c].bytes);
  return atomic_load(&m->run) >= want &&
         bytes >= (long)PRODUCERS * ((m->per_producer + 9) / 10);
}

/* Runs the producers, waits until everything was dispatched, checks. */
static void mix_drive(mix_t *m) {
  pthread_t t[PRODUCERS];
  producer_t p[PRODUCERS];
  for (int i = 0; i < PRODUCERS; i++) {
    p[i] = (producer_t){m, i, 0, 0};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, produce, &p[i]), 0);
  }
  atomic_store(&m->go, 1);
  for (int i = 0; i < PRODUCERS; i++) {
    pthread_join(t[i], NULL);
    if (p[i].errors)
      printf("\n    producer %d: %d errors, the first %s ", i, p[i].errors,
             p[i].first_error == 1 ? "a failed write"
                                   : taxi_error_name(p[i].first_error));
    CU_ASSERT_EQUAL(p[i].errors, 0);
  }
  int ok = 0;
  for (int waited = 0; waited < WAIT_MS && !(ok = all_run(m)); waited += 5)
    util_sleep_ms(5);
  CU_ASSERT(ok);
  util_sleep_ms(20); /* a duplicate would show now */
  CU_ASSERT_EQUAL(atomic_load(&m->run), QUEUES * PRODUCERS * m->per_producer);
  for (int qi = 0; qi < QUEUES; qi++) {
    queue_side_t *s = &m->side[qi];
    CU_ASSERT_EQUAL(atomic_load(&s->overlaps), 0);
    CU_ASSERT_EQUAL(atomic_load(&s->out_of_order), 0);
    for (int i = 0; i < PRODUCERS; i++)
      CU_ASSERT_EQUAL(s->next_seq[i], m->per_producer);
    taxi_mq_stats_t st;
    CU_ASSERT_EQUAL(taxi_mq_stats(s->q, &st), 0);
    CU_ASSERT_EQUAL(st.run, (uint64_t)PRODUCERS * m->per_producer);
    CU_ASSERT(st.high_water <= 128);
  }
}

static void mix_free(taxi_reactor_t *r, mix_t *m) {
  for (int c = 0; c < CONNS; c++) {
    CU_ASSERT_EQUAL(taxi_reactor_remove(r, &m->conn[c].h), 0);
    close(m->conn[c].sv[0]);
    close(m->conn[c].sv[1]);
  }
  for (int qi = 0; qi < QUEUES; qi++)
    CU_ASSERT_EQUAL(taxi_mq_destroy(m->side[qi].q), 0);
  free(m->jobs);
  free(m);
}

static void lf_mix(taxi_leaders_t leaders) {
  taxi_reactor_t *r = pools_reactor();
  if (leaders == TAXI_LEADERS_MANY && !pools_can_many_leaders(r)) {
    printf("\n    %s: one leader only here; skipped ", pools_backend);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    return;
  }
  mix_t *m = mix_new(r);
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = leaders;
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, &o), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(p, 4), 0);
  mix_drive(m);
  CU_ASSERT_EQUAL(taxi_lf_stop(p), 0);
  CU_ASSERT_EQUAL(taxi_lf_wait(p, WAIT_MS), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  mix_free(r, m);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void test_lf_one_leader(void) { lf_mix(TAXI_LEADERS_ONE); }
static void test_lf_many_leaders(void) { lf_mix(TAXI_LEADERS_MANY); }

static void test_hsha(void) {
  taxi_reactor_t *r = pools_reactor();
  mix_t *m = mix_new(r);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 3;
  taxi_hsha_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, r, &o), 0);
  mix_drive(m);
  CU_ASSERT_EQUAL(taxi_hsha_stop(p), 0);
  CU_ASSERT_EQUAL(taxi_hsha_wait(p, WAIT_MS), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
  mix_free(r, m);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static CU_TestInfo mqueue_tests[] = {
    {"L/F, one leader: queued jobs and sockets, exactly once",
     test_lf_one_leader},
    {"L/F, many leaders: queued jobs and sockets, exactly once",
     test_lf_many_leaders},
    {"HS/HA: queued jobs and sockets, exactly once", test_hsha},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_mqueue = {"message queues", mqueue_tests,
                                              180, NULL};
