/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/group.c - the proactors dispatcher (a proactor per thread):
 * accepted streams are spread over every proactor of the group, and each
 * stream's completions then run in one thread, its proactor's, round
 * robin or least loaded first; the options it refuses.  Over the other
 * dispatchers the context has no group.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { G_STREAMS = 8, G_ROUNDS = 3, G_MSG = 32 };

/* What one stream saw: the threads its reads ran in. */
struct g_stream {
  pthread_t first;
  atomic_int reads, moved; /* moved: a read in a thread not its first's */
};

struct g_server {
  struct g_stream st[G_STREAMS];
  atomic_int accepted, closed;
};

static struct g_server *g_srv;

static void g_on_read(taxi_stream_t *s, int status, const void *data,
                      size_t len) {
  struct g_stream *g = taxi_stream_data(s);
  if (status < 0) {
    taxi_stream_close(s);
    return;
  }
  if (atomic_fetch_add(&g->reads, 1) == 0)
    g->first = pthread_self();
  else if (!pthread_equal(g->first, pthread_self()))
    atomic_fetch_add(&g->moved, 1);
  taxi_stream_write(s, data, len, NULL, NULL);
}

static void g_on_close(taxi_stream_t *s, int reason) {
  (void)s;
  (void)reason;
  atomic_fetch_add(&g_srv->closed, 1);
}

static void g_on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct g_server *srv = arg;
  (void)l;
  int i = atomic_fetch_add(&srv->accepted, 1);
  if (i >= G_STREAMS) {
    taxi_stream_close(s);
    return;
  }
  taxi_stream_set_data(s, &srv->st[i]);
  taxi_stream_on_close(s, g_on_close);
  taxi_stream_read_start(s, g_on_read);
}

static int g_all_closed(void *arg) {
  struct g_server *srv = arg;
  return atomic_load(&srv->closed) == atomic_load(&srv->accepted);
}

static void spread(taxi_group_spread_t how) {
  st_io_t c;
  if (st_io_create_spread(&c, how) < 0) return;
  taxi_proactor_group_t *g = taxi_io_proactor_group(c.io);
  if (st_dispatcher != TAXI_IO_PROACTORS) {
    CU_ASSERT_PTR_NULL(g);
    st_io_destroy(&c);
    return;
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  unsigned count = taxi_proactor_group_count(g);
  CU_ASSERT_EQUAL(count, taxi_io_threads(c.io));
  CU_ASSERT_PTR_EQUAL(taxi_proactor_group_at(g, 0), taxi_io_proactor(c.io));
  struct g_server *srv = calloc(1, sizeof *srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
  g_srv = srv;
  int port = st_listen(&c, NULL, g_on_accept, srv, NULL);
  st_io_run(&c);
  int fds[G_STREAMS];
  for (int i = 0; i < G_STREAMS; i++) {
    fds[i] = st_connect(port);
    CU_ASSERT(fds[i] >= 0);
  }
  /* Each connection talks in turn, every byte checked. */
  for (int r = 0; r < G_ROUNDS; r++)
    for (int i = 0; i < G_STREAMS; i++) {
      unsigned char out[G_MSG], in[G_MSG];
      for (size_t k = 0; k < sizeof out; k++)
        out[k] = st_byte((unsigned)i, (uint64_t)r * G_MSG + k);
      if (fds[i] < 0) continue;
      CU_ASSERT_EQUAL(net_send_all(fds[i], out, sizeof out), 0);
      CU_ASSERT_EQUAL(net_recv_all(fds[i], in, sizeof in), 0);
      CU_ASSERT_EQUAL(memcmp(in, out, sizeof out), 0);
    }
  for (int i = 0; i < G_STREAMS; i++)
    if (fds[i] >= 0) close(fds[i]);
  CU_ASSERT(st_wait(g_all_closed, srv, 10000));
  CU_ASSERT_EQUAL(atomic_load(&srv->accepted), G_STREAMS);
  /* Each stream's reads stayed in one thread; the streams, round robin
   * over the group, used as many threads as it has proactors. */
  pthread_t seen[G_STREAMS];
  unsigned distinct = 0;
  for (int i = 0; i < G_STREAMS; i++) {
    struct g_stream *s = &srv->st[i];
    CU_ASSERT(atomic_load(&s->reads) >= G_ROUNDS);
    CU_ASSERT_EQUAL(atomic_load(&s->moved), 0);
    bool known = false;
    for (unsigned k = 0; k < distinct; k++)
      if (pthread_equal(seen[k], s->first)) known = true;
    if (!known) seen[distinct++] = s->first;
  }
  CU_ASSERT_EQUAL(distinct, count < G_STREAMS ? count : G_STREAMS);
  printf("(%u proactors, %u threads) ", count, distinct);
  st_io_destroy(&c);
  free(srv);
}

static void test_spread(void) { spread(TAXI_SPREAD_ROUND_ROBIN); }
static void test_spread_least_loaded(void) { spread(TAXI_SPREAD_LEAST_LOADED); }

static void test_refusals(void) {
  taxi_io_dispatcher_t d;
  CU_ASSERT_EQUAL(taxi_io_dispatcher_parse("proactors", &d), 0);
  CU_ASSERT_EQUAL(d, TAXI_IO_PROACTORS);
  CU_ASSERT_STRING_EQUAL(taxi_io_dispatcher_name(TAXI_IO_PROACTORS),
                         "proactors");
  st_pair_load();
  if (st_dispatcher != TAXI_IO_PROACTORS) return;
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = TAXI_IO_PROACTORS;
  o.backend = st_backend;
  taxi_io_t *io = NULL;
  o.threads = 1025; /* beyond a group's 1024 */
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  o.threads = 2;
  taxi_proactor_t *p = NULL;
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.backend = st_backend;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &po), 0);
  o.proactor = p; /* the group is the context's own */
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(io);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
  o.proactor = NULL;
  o.spread = (taxi_group_spread_t)7; /* no such spread */
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(io);
  o.spread = TAXI_SPREAD_ROUND_ROBIN;
  /* One proactor is a group too; created and destroyed unrun. */
  o.proactor = NULL;
  o.threads = 1;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_EQUAL(taxi_io_threads(io), 1);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
}

CU_TestInfo st_tests_group[] = {
    {"proactors: streams spread over the group, each in one thread",
     test_spread},
    {"proactors: least loaded first, each stream in one thread",
     test_spread_least_loaded},
    {"proactors: the dispatcher's name; options refused", test_refusals},
    CU_TEST_INFO_NULL,
};
