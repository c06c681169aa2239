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
#include <stddef.h>
#include <stdint.h>
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

void refuse_steps(void *fields, const field_step_t *steps, size_t n,
                  details_create_fn create, const void *opts, void *ctx,
                  const char *fn) {
  unsigned char *base = fields;
  for (size_t i = 0; i < n; i++) {
    const field_step_t *st = &steps[i];
    /* Through an unsigned integer of the field's size: its bytes are
     * those of the value assigned to the field itself. */
    switch (st->width) {
      case 1: {
        uint8_t v = (uint8_t)st->value;
        memcpy(base + st->at, &v, sizeof v);
        break;
      }
      case 2: {
        uint16_t v = (uint16_t)st->value;
        memcpy(base + st->at, &v, sizeof v);
        break;
      }
      case 4: {
        uint32_t v = (uint32_t)st->value;
        memcpy(base + st->at, &v, sizeof v);
        break;
      }
      case 8: {
        uint64_t v = (uint64_t)st->value;
        memcpy(base + st->at, &v, sizeof v);
        break;
      }
      default:
        CU_FAIL_FATAL("refuse_steps: a field of an unexpected size");
    }
    if (st->code == 0) continue;
    bool made = false;
    char call[96];
    snprintf(call, sizeof call, "%s, step %zu", fn, i);
    reset_detail();
    check(create(opts, ctx, &made), st->code, fn, st->field, call, __LINE__);
    CU_ASSERT_FALSE(made);
  }
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

/* The creates, as the tables below call them. */
DETAILS_CREATE(reactor, taxi_reactor_t, taxi_reactor_create)
DETAILS_CREATE(proactor, taxi_proactor_t, taxi_proactor_create)
DETAILS_CREATE(io, taxi_io_t, taxi_io_create)
DETAILS_CREATE(lf_sets, taxi_lf_sets_t, taxi_lf_sets_create)
DETAILS_CREATE(group, taxi_proactor_group_t, taxi_proactor_group_create)
DETAILS_CREATE_ON(lf, taxi_lf_pool_t, taxi_lf_create)
DETAILS_CREATE_ON(hsha, taxi_hsha_pool_t, taxi_hsha_create)
DETAILS_CREATE_ON(mq, taxi_mq_t, taxi_mq_create)

/* One row a type of options: its size, its create, and (where checked)
 * the initialiser the detail must name. */
typedef struct zeroed_case {
  size_t size;
  details_create_fn create;
  const char *fn, *hint;
} zeroed_case_t;

static const zeroed_case_t zeroed_cases[] = {
    {sizeof(taxi_reactor_options_t), create_reactor, "taxi_reactor_create",
     "call taxi_reactor_options_init()"},
    {sizeof(taxi_proactor_options_t), create_proactor, "taxi_proactor_create",
     NULL},
    {sizeof(taxi_io_options_t), create_io, "taxi_io_create",
     "call taxi_io_options_init()"},
    {sizeof(taxi_lf_sets_options_t), create_lf_sets, "taxi_lf_sets_create",
     NULL},
    {sizeof(taxi_proactor_group_options_t), create_group,
     "taxi_proactor_group_create", NULL},
};

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
  CU_ASSERT_PTR_NULL(r);

  for (size_t i = 0; i < sizeof zeroed_cases / sizeof zeroed_cases[0]; i++) {
    const zeroed_case_t *c = &zeroed_cases[i];
    union {
      max_align_t align;
      unsigned char bytes[512];
    } zero;
    CU_ASSERT_FATAL(c->size <= sizeof zero);
    memset(&zero, 0, sizeof zero);
    bool made = false;
    reset_detail();
    check(c->create(&zero, NULL, &made), TAXI_EINVAL, c->fn, "options.size",
          c->fn, __LINE__);
    if (c->hint) CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), c->hint));
    CU_ASSERT_FALSE(made);
  }
}

/* ---- each create, each refused field ------------------------------------- */

static void test_reactor(void) {
  taxi_reactor_t *r = NULL;
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  static const field_step_t steps[] = {
      REFUSE(taxi_reactor_options_t, max_events, 65537, TAXI_EINVAL,
             "options.max_events"),
      SET(taxi_reactor_options_t, max_events, 0),
      REFUSE(taxi_reactor_options_t, notify_capacity,
             TAXI_NOTIFY_MAX_CAPACITY + 1, TAXI_EINVAL,
             "options.notify_capacity"),
      SET(taxi_reactor_options_t, notify_capacity, 0),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_reactor, &o,
               NULL, "taxi_reactor_create");
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
  static const field_step_t steps[] = {
      REFUSE(taxi_proactor_options_t, flags, 0x80, TAXI_EINVAL,
             "options.flags"),
      SET(taxi_proactor_options_t, flags, 0),
      /* without buffer_count */
      REFUSE(taxi_proactor_options_t, buffer_size, 512, TAXI_EINVAL,
             "options.buffer_size"),
      SET(taxi_proactor_options_t, buffer_size, 0),
      REFUSE(taxi_proactor_options_t, buffer_count, 3, TAXI_EINVAL,
             "options.buffer_count"),
      SET(taxi_proactor_options_t, buffer_count, 4),
      REFUSE(taxi_proactor_options_t, buffer_max, 2, TAXI_EINVAL,
             "options.buffer_max"),
      SET(taxi_proactor_options_t, buffer_max, 0),
      REFUSE(taxi_proactor_options_t, buffer_size, 2u << 20, TAXI_EINVAL,
             "options.buffer_size"),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_proactor, &o,
               NULL, "taxi_proactor_create");
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
  static const field_step_t steps[] = {
      REFUSE(taxi_lf_options_t, size, 3, TAXI_EINVAL, "options.size"),
      /* taxi_lf_options_init(): nothing else was changed */
      SET(taxi_lf_options_t, size, sizeof(taxi_lf_options_t)),
      REFUSE(taxi_lf_options_t, promotion, 9, TAXI_EINVAL, "options.promotion"),
      SET(taxi_lf_options_t, promotion, TAXI_PROMOTE_LIFO),
      REFUSE(taxi_lf_options_t, leaders, 9, TAXI_EINVAL, "options.leaders"),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_lf, &o, r,
               "taxi_lf_create");
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
  static const field_step_t steps[] = {
      REFUSE(taxi_hsha_options_t, workers, TAXI_HSHA_MAX_WORKERS + 1,
             TAXI_EINVAL, "options.workers"),
      SET(taxi_hsha_options_t, workers, 1),
      REFUSE(taxi_hsha_options_t, queue_capacity, TAXI_HSHA_MAX_QUEUE + 1,
             TAXI_EINVAL, "options.queue_capacity"),
      SET(taxi_hsha_options_t, queue_capacity, 8),
      REFUSE(taxi_hsha_options_t, high_water, 9, TAXI_EINVAL,
             "options.high_water"),
      SET(taxi_hsha_options_t, high_water, 0),
      REFUSE(taxi_hsha_options_t, full, 7, TAXI_EINVAL, "options.full"),
      /* without busy */
      REFUSE(taxi_hsha_options_t, full, TAXI_HSHA_FULL_REJECT, TAXI_EINVAL,
             "options.busy"),
      SET(taxi_hsha_options_t, full, TAXI_HSHA_FULL_WAIT),
      REFUSE(taxi_hsha_options_t, size, 0, TAXI_EINVAL, "options.size"),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_hsha, &o, r,
               "taxi_hsha_create");
  CU_ASSERT_PTR_NULL(pool);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void test_lf_sets(void) {
  taxi_lf_sets_t *s = NULL;
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  static const field_step_t steps[] = {
      REFUSE(taxi_lf_sets_options_t, sets, TAXI_LF_SETS_MAX + 1, TAXI_EINVAL,
             "options.sets"),
      SET(taxi_lf_sets_options_t, sets, 1),
      REFUSE(taxi_lf_sets_options_t, threads_per_set, TAXI_LF_MAX_THREADS + 1,
             TAXI_EINVAL, "options.threads_per_set"),
      SET(taxi_lf_sets_options_t, threads_per_set, 1),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_lf_sets, &o,
               NULL, "taxi_lf_sets_create");
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
  static const field_step_t steps[] = {
      REFUSE(taxi_mq_options_t, capacity, TAXI_MQ_MAX_CAPACITY + 1, TAXI_EINVAL,
             "options.capacity"),
      SET(taxi_mq_options_t, capacity, 0),
      REFUSE(taxi_mq_options_t, batch, TAXI_MQ_MAX_BATCH + 1, TAXI_EINVAL,
             "options.batch"),
      SET(taxi_mq_options_t, batch, 0),
      REFUSE(taxi_mq_options_t, size, 0, TAXI_EINVAL, "options.size"),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_mq, &o, r,
               "taxi_mq_create");
  CU_ASSERT_PTR_NULL(q);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void test_proactor_group(void) {
  taxi_proactor_group_t *g = NULL;
  taxi_proactor_group_options_t o = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  static const field_step_t steps[] = {
      REFUSE(taxi_proactor_group_options_t, count, 1025, TAXI_EINVAL,
             "options.count"),
      SET(taxi_proactor_group_options_t, count, 1),
      REFUSE(taxi_proactor_group_options_t, spread, 7, TAXI_EINVAL,
             "options.spread"),
      SET(taxi_proactor_group_options_t, spread, TAXI_SPREAD_ROUND_ROBIN),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_group, &o,
               NULL, "taxi_proactor_group_create");
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
  static const field_step_t steps[] = {
      REFUSE(taxi_io_options_t, dispatcher, 9, TAXI_EINVAL,
             "options.dispatcher"),
      SET(taxi_io_options_t, dispatcher, TAXI_IO_LF),
      REFUSE(taxi_io_options_t, threads, TAXI_LF_MAX_THREADS + 1, TAXI_EINVAL,
             "options.threads"),
      SET(taxi_io_options_t, dispatcher, TAXI_IO_PROACTORS),
      REFUSE(taxi_io_options_t, threads, 1025, TAXI_EINVAL, "options.threads"),
      SET(taxi_io_options_t, threads, 1),
      REFUSE(taxi_io_options_t, spread, 7, TAXI_EINVAL, "options.spread"),
      SET(taxi_io_options_t, spread, TAXI_SPREAD_ROUND_ROBIN),
  };
  refuse_steps(&o, steps, sizeof steps / sizeof steps[0], create_io, &o, NULL,
               "taxi_io_create");
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
