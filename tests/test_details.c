/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_details.c - taxi_error_detail(): every refused option of
 * every create is refused with its code and a detail that begins with the
 * function's name and names the field ("options.FIELD"); refusals made
 * by a call inside another (the reactor a context makes, the pool of a
 * set) name the outer function and its field; the cases of TAXI_EBUSY
 * are told apart; and `threads` of the I/O context means one thing under
 * every dispatcher (taxi/io.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "details.h"
#include "runner.h"
#include "taxi/taxi.h"
#include "util.h"

/* ---- the checks ---------------------------------------------------------- */

/* Make the detail one that no case below expects, so that a call that
 * fails without recording its own cannot pass on the one before. */
void reset_detail(void) {
  CU_ASSERT_EQUAL(taxi_io_timer_start(NULL, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(strncmp(taxi_error_detail(), "taxi_io_timer_start: ", 21), 0);
}

/* rc is `code`, and the detail begins with "fn: " and contains `field`. */
void check(int rc, int code, const char *fn, const char *field,
           const char *call, int line) {
  const char *d = taxi_error_detail();
  size_t n = strlen(fn);
  bool ok = rc == code && strncmp(d, fn, n) == 0 && d[n] == ':' &&
            d[n + 1] == ' ' && strstr(d + n, field) != NULL;
  if (!ok)
    printf("\n    line %d: %s: %s, detail \"%s\"; expected %s naming %s\n",
           line, call, taxi_error_name(rc), d, taxi_error_name(code), field);
  CU_ASSERT(ok);
}

/* A readiness backend that lets one thread wait at a time (poll, select,
 * wsapoll), or NULL if none works here. */
const char *single_wait_backend(void) {
  for (size_t i = 0; i < taxi_backend_count(); i++) {
    taxi_backend_info_t info;
    if (taxi_backend_info(&info, i) == 0 && info.available &&
        !(info.caps & TAXI_CAP_MULTI_WAIT))
      return info.name;
  }
  return NULL;
}

/* ---- options.size, as every create reads it ------------------------------ */

/* A structure not set by an initialiser (size 0), and one from a newer
 * taxi with a field this one does not know set: both options.size, and
 * the detail tells which initialiser to call. */
static void test_size(void) {
  union {
    taxi_reactor_options_t o;
    unsigned char bytes[sizeof(taxi_reactor_options_t) + 16];
  } big;
  memset(&big, 0, sizeof big);
  taxi_reactor_options_init(&big.o);
  big.o.size = sizeof big;
  big.bytes[sizeof(taxi_reactor_options_t) + 3] = 1;
  taxi_reactor_t *r = NULL;
  REFUSED(taxi_reactor_create(&r, &big.o), TAXI_EINVAL, "taxi_reactor_create",
          "options.size");
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "beyond"));
  taxi_reactor_options_t ro;
  memset(&ro, 0, sizeof ro);
  REFUSED(taxi_reactor_create(&r, &ro), TAXI_EINVAL, "taxi_reactor_create",
          "options.size");
  CU_ASSERT_PTR_NOT_NULL(
      strstr(taxi_error_detail(), "call taxi_reactor_options_init()"));
  CU_ASSERT_PTR_NULL(r);

  taxi_proactor_t *p = NULL;
  taxi_proactor_options_t po;
  memset(&po, 0, sizeof po);
  REFUSED(taxi_proactor_create(&p, &po), TAXI_EINVAL, "taxi_proactor_create",
          "options.size");
  taxi_io_t *io = NULL;
  taxi_io_options_t io_o;
  memset(&io_o, 0, sizeof io_o);
  REFUSED(taxi_io_create(&io, &io_o), TAXI_EINVAL, "taxi_io_create",
          "options.size");
  CU_ASSERT_PTR_NOT_NULL(
      strstr(taxi_error_detail(), "call taxi_io_options_init()"));
  taxi_lf_sets_t *s = NULL;
  taxi_lf_sets_options_t so;
  memset(&so, 0, sizeof so);
  REFUSED(taxi_lf_sets_create(&s, &so), TAXI_EINVAL, "taxi_lf_sets_create",
          "options.size");
  taxi_proactor_group_t *g = NULL;
  taxi_proactor_group_options_t go;
  memset(&go, 0, sizeof go);
  REFUSED(taxi_proactor_group_create(&g, &go), TAXI_EINVAL,
          "taxi_proactor_group_create", "options.size");
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_PTR_NULL(io);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NULL(g);
}

/* ---- each create, each refused field ------------------------------------- */

static void test_reactor(void) {
  taxi_reactor_t *r = NULL;
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  o.max_events = 65537;
  REFUSED(taxi_reactor_create(&r, &o), TAXI_EINVAL, "taxi_reactor_create",
          "options.max_events");
  o.max_events = 0;
  o.notify_capacity = TAXI_NOTIFY_MAX_CAPACITY + 1;
  REFUSED(taxi_reactor_create(&r, &o), TAXI_EINVAL, "taxi_reactor_create",
          "options.notify_capacity");
  o.notify_capacity = 0;
  o.backend = "no-such-backend";
  REFUSED(taxi_reactor_create(&r, &o), TAXI_ENOBACKEND, "taxi_reactor_create",
          "options.backend");
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "no-such-backend"));
  REFUSED(taxi_reactor_create(NULL, NULL), TAXI_EINVAL, "taxi_reactor_create",
          "out");
  CU_ASSERT_PTR_NULL(r);
}

static void test_proactor(void) {
  taxi_proactor_t *p = NULL;
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.flags = 0x80;
  REFUSED(taxi_proactor_create(&p, &o), TAXI_EINVAL, "taxi_proactor_create",
          "options.flags");
  o.flags = 0;
  o.buffer_size = 512; /* without buffer_count */
  REFUSED(taxi_proactor_create(&p, &o), TAXI_EINVAL, "taxi_proactor_create",
          "options.buffer_size");
  o.buffer_size = 0;
  o.buffer_count = 3;
  REFUSED(taxi_proactor_create(&p, &o), TAXI_EINVAL, "taxi_proactor_create",
          "options.buffer_count");
  o.buffer_count = 4;
  o.buffer_max = 2;
  REFUSED(taxi_proactor_create(&p, &o), TAXI_EINVAL, "taxi_proactor_create",
          "options.buffer_max");
  o.buffer_max = 0;
  o.buffer_size = 2u << 20;
  REFUSED(taxi_proactor_create(&p, &o), TAXI_EINVAL, "taxi_proactor_create",
          "options.buffer_size");
  taxi_proactor_options_init(&o);
  o.backend = "no-such-backend";
  REFUSED(taxi_proactor_create(&p, &o), TAXI_ENOBACKEND, "taxi_proactor_create",
          "options.backend");
  CU_ASSERT_PTR_NULL(p);
}

static void test_lf(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  taxi_lf_pool_t *pool = NULL;
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.size = 3;
  REFUSED(taxi_lf_create(&pool, r, &o), TAXI_EINVAL, "taxi_lf_create",
          "options.size");
  taxi_lf_options_init(&o);
  o.promotion = (taxi_promotion_t)9;
  REFUSED(taxi_lf_create(&pool, r, &o), TAXI_EINVAL, "taxi_lf_create",
          "options.promotion");
  o.promotion = TAXI_PROMOTE_LIFO;
  o.leaders = (taxi_leaders_t)9;
  REFUSED(taxi_lf_create(&pool, r, &o), TAXI_EINVAL, "taxi_lf_create",
          "options.leaders");
  REFUSED(taxi_lf_create(&pool, NULL, NULL), TAXI_EINVAL, "taxi_lf_create",
          "r: NULL");
  CU_ASSERT_PTR_NULL(pool);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);

  const char *one = single_wait_backend();
  if (one) {
    CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, one), 0);
    o.leaders = TAXI_LEADERS_MANY;
    REFUSED(taxi_lf_create(&pool, r, &o), TAXI_ENOTSUP, "taxi_lf_create",
            "options.leaders");
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  }

  taxi_proactor_t *p;
  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&p, NULL), 0);
  taxi_lf_options_init(&o);
  o.promotion = (taxi_promotion_t)9;
  REFUSED(taxi_lf_create_proactor(&pool, p, &o), TAXI_EINVAL,
          "taxi_lf_create_proactor", "options.promotion");
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

static void test_hsha(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  taxi_hsha_pool_t *pool = NULL;
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = TAXI_HSHA_MAX_WORKERS + 1;
  REFUSED(taxi_hsha_create(&pool, r, &o), TAXI_EINVAL, "taxi_hsha_create",
          "options.workers");
  o.workers = 1;
  o.queue_capacity = TAXI_HSHA_MAX_QUEUE + 1;
  REFUSED(taxi_hsha_create(&pool, r, &o), TAXI_EINVAL, "taxi_hsha_create",
          "options.queue_capacity");
  o.queue_capacity = 8;
  o.high_water = 9;
  REFUSED(taxi_hsha_create(&pool, r, &o), TAXI_EINVAL, "taxi_hsha_create",
          "options.high_water");
  o.high_water = 0;
  o.full = (taxi_hsha_full_t)7;
  REFUSED(taxi_hsha_create(&pool, r, &o), TAXI_EINVAL, "taxi_hsha_create",
          "options.full");
  o.full = TAXI_HSHA_FULL_REJECT; /* without busy */
  REFUSED(taxi_hsha_create(&pool, r, &o), TAXI_EINVAL, "taxi_hsha_create",
          "options.busy");
  o.full = TAXI_HSHA_FULL_WAIT;
  o.size = 0;
  REFUSED(taxi_hsha_create(&pool, r, &o), TAXI_EINVAL, "taxi_hsha_create",
          "options.size");
  CU_ASSERT_PTR_NULL(pool);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void test_lf_sets(void) {
  taxi_lf_sets_t *s = NULL;
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  o.sets = TAXI_LF_SETS_MAX + 1;
  REFUSED(taxi_lf_sets_create(&s, &o), TAXI_EINVAL, "taxi_lf_sets_create",
          "options.sets");
  o.sets = 1;
  o.threads_per_set = TAXI_LF_MAX_THREADS + 1;
  REFUSED(taxi_lf_sets_create(&s, &o), TAXI_EINVAL, "taxi_lf_sets_create",
          "options.threads_per_set");
  o.threads_per_set = 1;
  /* The reactors' and pools' refusals are the sets' own fields. */
  o.backend = "no-such-backend";
  REFUSED(taxi_lf_sets_create(&s, &o), TAXI_ENOBACKEND, "taxi_lf_sets_create",
          "options.backend");
  o.backend = NULL;
  taxi_lf_options_t lo = TAXI_LF_OPTIONS_INIT;
  lo.leaders = (taxi_leaders_t)9;
  o.pool = &lo;
  REFUSED(taxi_lf_sets_create(&s, &o), TAXI_EINVAL, "taxi_lf_sets_create",
          "options.pool.leaders");
  lo.size = 0;
  REFUSED(taxi_lf_sets_create(&s, &o), TAXI_EINVAL, "taxi_lf_sets_create",
          "options.pool.size");
  CU_ASSERT_PTR_NULL(s);
}

static int parse_none(void *arg, const void *data, size_t len,
                      taxi_lf_frame_t *frame) {
  (void)arg, (void)data, (void)len, (void)frame;
  return 0;
}

static void unknown_none(void *arg, uint64_t id, const void *body, size_t len) {
  (void)arg, (void)id, (void)body, (void)len;
}

static void test_lf_bound(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  taxi_lf_pool_t *pool;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&pool, r, NULL), 0);
  taxi_lf_bound_t *b = NULL;
  taxi_lf_bound_options_t bo = TAXI_LF_BOUND_OPTIONS_INIT;
  bo.buckets = (1u << 24) + 1;
  REFUSED(taxi_lf_bound_create(&b, pool, &bo), TAXI_EINVAL,
          "taxi_lf_bound_create", "options.buckets");
  bo.size = 1;
  REFUSED(taxi_lf_bound_create(&b, pool, &bo), TAXI_EINVAL,
          "taxi_lf_bound_create", "options.size");
  CU_ASSERT_PTR_NULL(b);

  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  taxi_lf_mux_t *m = NULL;
  taxi_lf_mux_options_t mo = TAXI_LF_MUX_OPTIONS_INIT;
  mo.unknown = unknown_none;
  REFUSED(taxi_lf_mux_create(&m, pool, r, sv[0], &mo), TAXI_EINVAL,
          "taxi_lf_mux_create", "options.parse");
  mo.parse = parse_none;
  mo.unknown = NULL;
  REFUSED(taxi_lf_mux_create(&m, pool, r, sv[0], &mo), TAXI_EINVAL,
          "taxi_lf_mux_create", "options.unknown");
  mo.unknown = unknown_none;
  mo.buckets = (1u << 24) + 1;
  REFUSED(taxi_lf_mux_create(&m, pool, r, sv[0], &mo), TAXI_EINVAL,
          "taxi_lf_mux_create", "options.buckets");
  CU_ASSERT_PTR_NULL(m);
  close(sv[0]);
  close(sv[1]);
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

void details_mq_run(taxi_mq_t *q, taxi_mq_item_t *item, void *arg) {
  (void)q, (void)item, (void)arg;
}

static void test_mqueue(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  taxi_mq_t *q = NULL;
  taxi_mq_options_t o = TAXI_MQ_OPTIONS_INIT;
  REFUSED(taxi_mq_create(&q, r, &o), TAXI_EINVAL, "taxi_mq_create",
          "options.run");
  o.run = details_mq_run;
  o.capacity = TAXI_MQ_MAX_CAPACITY + 1;
  REFUSED(taxi_mq_create(&q, r, &o), TAXI_EINVAL, "taxi_mq_create",
          "options.capacity");
  o.capacity = 0;
  o.batch = TAXI_MQ_MAX_BATCH + 1;
  REFUSED(taxi_mq_create(&q, r, &o), TAXI_EINVAL, "taxi_mq_create",
          "options.batch");
  o.batch = 0;
  o.size = 0;
  REFUSED(taxi_mq_create(&q, r, &o), TAXI_EINVAL, "taxi_mq_create",
          "options.size");
  CU_ASSERT_PTR_NULL(q);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void test_proactor_group(void) {
  taxi_proactor_group_t *g = NULL;
  taxi_proactor_group_options_t o = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  o.count = 1025;
  REFUSED(taxi_proactor_group_create(&g, &o), TAXI_EINVAL,
          "taxi_proactor_group_create", "options.count");
  o.count = 1;
  o.spread = (taxi_group_spread_t)7;
  REFUSED(taxi_proactor_group_create(&g, &o), TAXI_EINVAL,
          "taxi_proactor_group_create", "options.spread");
  o.spread = TAXI_SPREAD_ROUND_ROBIN;
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.size = 2;
  o.proactor = &po;
  REFUSED(taxi_proactor_group_create(&g, &o), TAXI_EINVAL,
          "taxi_proactor_group_create", "options.proactor.size");
  /* What the proactors' create refuses is the group's field too. */
  taxi_proactor_options_init(&po);
  po.backend = "no-such-backend";
  REFUSED(taxi_proactor_group_create(&g, &o), TAXI_ENOBACKEND,
          "taxi_proactor_group_create", "options.proactor.backend");
  po.backend = NULL;
  po.flags = 0x80;
  REFUSED(taxi_proactor_group_create(&g, &o), TAXI_EINVAL,
          "taxi_proactor_group_create", "options.proactor.flags");
  CU_ASSERT_PTR_NULL(g);
}

/* ---- the I/O context, its streams and listeners -------------------------- */

static void test_io(void) {
  taxi_io_t *io = NULL;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  o.dispatcher = (taxi_io_dispatcher_t)9;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.dispatcher");
  o.dispatcher = TAXI_IO_LF;
  o.threads = TAXI_LF_MAX_THREADS + 1;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.threads");
  o.dispatcher = TAXI_IO_PROACTORS;
  o.threads = 1025;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.threads");
  o.threads = 1;
  o.spread = (taxi_group_spread_t)7;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.spread");
  o.spread = TAXI_SPREAD_ROUND_ROBIN;
  /* The objects the context makes refuse the context's own fields. */
  o.backend = "no-such-backend";
  const taxi_io_dispatcher_t each[] = {TAXI_IO_REACTOR, TAXI_IO_LF,
                                       TAXI_IO_HSHA, TAXI_IO_PROACTOR,
                                       TAXI_IO_PROACTORS};
  for (size_t i = 0; i < sizeof each / sizeof each[0]; i++) {
    o.dispatcher = each[i];
    REFUSED(taxi_io_create(&io, &o), TAXI_ENOBACKEND, "taxi_io_create",
            "options.backend");
  }
  o.backend = NULL;
  taxi_lf_options_t lo = TAXI_LF_OPTIONS_INIT;
  lo.promotion = (taxi_promotion_t)9;
  o.dispatcher = TAXI_IO_LF;
  o.lf = &lo;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.lf.promotion");
  lo.size = 0;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.lf.size");
  o.lf = NULL;
  const char *one = single_wait_backend();
  if (one) {
    taxi_lf_options_init(&lo);
    lo.leaders = TAXI_LEADERS_MANY;
    o.lf = &lo;
    o.backend = one;
    REFUSED(taxi_io_create(&io, &o), TAXI_ENOTSUP, "taxi_io_create",
            "options.lf.leaders");
    o.lf = NULL;
    o.backend = NULL;
  }
  taxi_hsha_options_t ho = TAXI_HSHA_OPTIONS_INIT;
  ho.size = 0;
  o.dispatcher = TAXI_IO_HSHA;
  o.hsha = &ho;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.hsha.size");
  o.hsha = NULL;
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  o.dispatcher = TAXI_IO_PROACTOR;
  o.reactor = r;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.reactor");
  o.reactor = NULL;
  taxi_lf_pool_t *pool;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&pool, r, NULL), 0);
  o.dispatcher = TAXI_IO_LF;
  o.threads = 0;
  o.lf_pool = pool; /* without its reactor */
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.lf_pool");
  o.lf_pool = NULL;
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  taxi_proactor_t *p;
  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&p, NULL), 0);
  o.dispatcher = TAXI_IO_REACTOR;
  o.proactor = p;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.proactor");
  o.proactor = NULL;
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_PTR_NULL(io);
}

static void on_connect(taxi_stream_t *s, int status, void *arg) {
  (void)s, (void)status, (void)arg;
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l, (void)s, (void)arg;
}

/* The stream options, as taxi_stream_connect, taxi_stream_open and the
 * listeners (options.stream) read them. */
static void test_stream_options(void) {
  taxi_io_t *io;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, NULL), 0);
  taxi_stream_t *s = NULL;
  const char *to = "127.0.0.1:9";
  taxi_stream_options_t o = TAXI_STREAM_OPTIONS_INIT;
  o.read_buffer = 0;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.read_buffer");
  taxi_stream_options_init(&o);
  o.high_watermark = 0;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.high_watermark");
  taxi_stream_options_init(&o);
  o.low_watermark = o.high_watermark;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.low_watermark");
  taxi_stream_options_init(&o);
  o.flags = TAXI_STREAM_PAUSE_READING;
  o.low_watermark = o.high_watermark - (long)o.read_buffer + 1;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.low_watermark");
  taxi_stream_options_init(&o);
  o.max_writes = 0;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.max_writes");
  taxi_stream_options_init(&o);
  o.flags = 0x100;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.flags");
  taxi_stream_options_init(&o);
  o.write_timeout = -1;
  REFUSED(taxi_stream_connect(&s, io, to, &o, on_connect, NULL), TAXI_EINVAL,
          "taxi_stream_connect", "options.write_timeout");
  taxi_stream_options_init(&o);
  o.size = 0;
  REFUSED(taxi_stream_open(&s, io, TAXI_INVALID_HANDLE, &o), TAXI_EINVAL,
          "taxi_stream_open", "options.size");
  CU_ASSERT_PTR_NULL(s);

  taxi_listener_t *l = NULL;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  lo.flags = 0x80;
  REFUSED(taxi_listener_create(&l, io, "127.0.0.1:0", &lo, on_accept, NULL),
          TAXI_EINVAL, "taxi_listener_create", "options.flags");
  lo.flags = 0;
  taxi_stream_options_init(&o);
  o.read_buffer = 0;
  lo.stream = &o;
  REFUSED(taxi_listener_create(&l, io, "127.0.0.1:0", &lo, on_accept, NULL),
          TAXI_EINVAL, "taxi_listener_create", "options.stream.read_buffer");
  lo.stream = NULL;
  lo.size = 0;
  REFUSED(taxi_listener_create(&l, io, "127.0.0.1:0", &lo, on_accept, NULL),
          TAXI_EINVAL, "taxi_listener_create", "options.size");
  taxi_listener_options_init(&lo);
  lo.flags = TAXI_LISTEN_REUSEPORT; /* about binding: not for adopt */
  REFUSED(
      taxi_listener_adopt(&l, io, TAXI_INVALID_HANDLE, &lo, on_accept, NULL),
      TAXI_EINVAL, "taxi_listener_adopt", "options.flags");
  taxi_listener_options_init(&lo);
  lo.stream = &o;
  int port;
  int fd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(fd >= 0);
  REFUSED(taxi_listener_adopt(&l, io, fd, &lo, on_accept, NULL), TAXI_EINVAL,
          "taxi_listener_adopt", "options.stream.read_buffer");
  close(fd); /* still the caller's after a refusal */
  CU_ASSERT_PTR_NULL(l);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
}

static void timer_fn(taxi_io_timer_t *t, void *arg) { (void)t, (void)arg; }

int details_on_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  (void)h, (void)t, (void)act;
  return 0;
}

void details_completion_none(taxi_op_t *op, int status, size_t bytes,
                             void *act) {
  (void)op, (void)status, (void)bytes, (void)act;
}

/* The timers' spans, in each layer. */
static void test_timers(void) {
  taxi_io_t *io;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, NULL), 0);
  taxi_io_timer_t *t;
  CU_ASSERT_EQUAL_FATAL(taxi_io_timer_create(&t, io, timer_fn, NULL), 0);
  REFUSED(taxi_io_timer_start(t, -1, 0), TAXI_EINVAL, "taxi_io_timer_start",
          "delay");
  REFUSED(taxi_io_timer_start(t, 0, TAXI_TIME_SPAN_MAX + 1), TAXI_EINVAL,
          "taxi_io_timer_start", "period");
  REFUSED(taxi_io_timer_create(&t, io, NULL, NULL), TAXI_EINVAL,
          "taxi_io_timer_create", "fn");
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);

  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  static const taxi_handler_ops_t ops = {.timeout = details_on_timeout};
  taxi_handler_t h;
  taxi_handler_init(&h, &ops);
  taxi_timer_t rt;
  taxi_timer_init(&rt);
  REFUSED(taxi_reactor_schedule(r, &rt, &h, -5, 0, NULL), TAXI_EINVAL,
          "taxi_reactor_schedule", "delay");
  REFUSED(taxi_reactor_schedule(r, &rt, &h, 0, -5, NULL), TAXI_EINVAL,
          "taxi_reactor_schedule", "period");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);

  taxi_proactor_t *p;
  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&p, NULL), 0);
  taxi_op_t op = TAXI_OP_INIT;
  REFUSED(taxi_proactor_timer(p, &op, -1, details_completion_none, NULL),
          TAXI_EINVAL, "taxi_proactor_timer", "delay");
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

static CU_TestInfo options_tests[] = {
    {"options.size: not initialised, or from a newer taxi", test_size},
    {"taxi_reactor_create", test_reactor},
    {"taxi_proactor_create", test_proactor},
    {"taxi_lf_create, taxi_lf_create_proactor", test_lf},
    {"taxi_hsha_create", test_hsha},
    {"taxi_lf_sets_create, nested refusals", test_lf_sets},
    {"taxi_lf_bound_create, taxi_lf_mux_create", test_lf_bound},
    {"taxi_mq_create", test_mqueue},
    {"taxi_proactor_group_create, nested refusals", test_proactor_group},
    {"taxi_io_create, nested refusals", test_io},
    {"stream and listener options", test_stream_options},
    {"timers: delay and period", test_timers},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t options_suite = {"details: options",
                                                options_tests, 60, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {
      &options_suite, &details_threads_suite, &details_busy_suite};
  return taxi_test_run("taxi_error_detail", suites,
                       sizeof suites / sizeof suites[0], argc, argv);
}
