/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_api.c - backend-independent API: errors, backends and their
 * selection (by name and by TAXI_BACKEND), the allocator hook's argument
 * checks, the version, the clock, options.
 */
#define _GNU_SOURCE 1

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"
#include "taxi/taxi.h"
#include "util.h"

/* ---- errors ------------------------------------------------------------- */

/* Every code from TAXI_ERROR_MIN to 0 has a description and a name, none
 * NULL, all distinct; the names are the macro names. */
static void test_error_strings_distinct(void) {
  const int n = -TAXI_ERROR_MIN + 1;
  const char *desc[64], *name[64];
  CU_ASSERT_FATAL(n <= 64);
  for (int i = 0; i < n; i++) {
    int code = -i;
    desc[i] = taxi_strerror(code);
    name[i] = taxi_error_name(code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(desc[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(name[i]);
    CU_ASSERT(strlen(desc[i]) > 0);
    CU_ASSERT_EQUAL(strncmp(name[i], "TAXI_", 5), 0);
    CU_ASSERT(strcmp(desc[i], "unknown error") != 0);
    CU_ASSERT(strcmp(name[i], "TAXI_E?") != 0);
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      CU_ASSERT(strcmp(desc[i], desc[j]) != 0);
      CU_ASSERT(strcmp(name[i], name[j]) != 0);
    }
}

static void test_error_names_match_macros(void) {
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EINVAL), "TAXI_EINVAL");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ENOMEM), "TAXI_ENOMEM");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EBADF), "TAXI_EBADF");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EEXIST), "TAXI_EEXIST");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ENOENT), "TAXI_ENOENT");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ENOBACKEND), "TAXI_ENOBACKEND");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ENOTSUP), "TAXI_ENOTSUP");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ETOOMANY), "TAXI_ETOOMANY");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ETIMEDOUT), "TAXI_ETIMEDOUT");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ESTOPPED), "TAXI_ESTOPPED");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EBUSY), "TAXI_EBUSY");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ECANCELED), "TAXI_ECANCELED");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ENONAME), "TAXI_ENONAME");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ETRYAGAIN), "TAXI_ETRYAGAIN");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ENOADDR), "TAXI_ENOADDR");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ETLS), "TAXI_ETLS");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ETRUNCATED), "TAXI_ETRUNCATED");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EBADCERT), "TAXI_EBADCERT");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EAGAIN), "TAXI_EAGAIN");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EPERM), "TAXI_EPERM");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ESYS), "TAXI_ESYS");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ECONNRESET), "TAXI_ECONNRESET");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_ECONNREFUSED),
                         "TAXI_ECONNREFUSED");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EPIPE), "TAXI_EPIPE");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EADDRINUSE), "TAXI_EADDRINUSE");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EEOF), "TAXI_EEOF");
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EBADADDR), "TAXI_EBADADDR");
  CU_ASSERT_STRING_EQUAL(taxi_strerror(TAXI_EBADADDR),
                         "malformed address (or host name)");
}

/* Codes outside the table: "unknown error" and "TAXI_E?". */
static void test_unknown_error_codes(void) {
  const int unknown[] = {TAXI_ERROR_MIN - 1, 1, 42, -1000, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char *d = taxi_strerror(unknown[i]);
    const char *n = taxi_error_name(unknown[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_STRING_EQUAL(d, "unknown error");
    CU_ASSERT_STRING_EQUAL(n, "TAXI_E?");
  }
}

static atomic_int fresh_thread_os_error;
static void *read_os_error(void *arg) {
  (void)arg;
  atomic_store(&fresh_thread_os_error, taxi_last_os_error());
  return NULL;
}

/* A thread that made no taxi call has no recorded OS error. */
static void test_last_os_error_per_thread(void) {
  atomic_store(&fresh_thread_os_error, -1);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, read_os_error, NULL), 0);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&fresh_thread_os_error), 0);
}

/* ---- backends ----------------------------------------------------------- */

/* taxi_backend_info: every index below the count describes a backend with
 * a name; index == count gives TAXI_ENOENT; NULL gives TAXI_EINVAL. */
static void test_backend_info(void) {
  size_t n = taxi_backend_count();
  CU_ASSERT_FATAL(n >= 1);
  for (size_t i = 0; i < n; i++) {
    taxi_backend_info_t info;
    memset(&info, 0xa5, sizeof info);
    CU_ASSERT_EQUAL(taxi_backend_info(&info, i), 0);
    CU_ASSERT_PTR_NOT_NULL(info.name);
    if (info.name) CU_ASSERT(strlen(info.name) > 0);
    CU_ASSERT(info.available == 0 || info.available == 1);
    CU_ASSERT_EQUAL(info.caps & ~0x1fu, 0);
    for (size_t j = 0; j < i; j++) {
      taxi_backend_info_t other;
      CU_ASSERT_EQUAL(taxi_backend_info(&other, j), 0);
      if (info.name && other.name)
        CU_ASSERT(strcmp(info.name, other.name) != 0);
    }
  }
  taxi_backend_info_t info;
  CU_ASSERT_EQUAL(taxi_backend_info(&info, n), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_backend_info(&info, (size_t)-1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_backend_info(NULL, 0), TAXI_EINVAL);
}

/* taxi_backend_names lists exactly the available backends, in the order of
 * taxi_backend_info; cap 0 just counts; too small a cap still returns the
 * full count; NULL with cap > 0 is TAXI_EINVAL. */
static void test_backend_names(void) {
  const char *names[32];
  int n = taxi_backend_names(names, 32);
  CU_ASSERT_FATAL(n >= 1 && n <= 32);
  CU_ASSERT_EQUAL(taxi_backend_names(NULL, 0), n);
  CU_ASSERT_EQUAL(taxi_backend_names(names, 0), n);
  CU_ASSERT_EQUAL(taxi_backend_names(NULL, 1), TAXI_EINVAL);
  const char *one[1] = {NULL};
  CU_ASSERT_EQUAL(taxi_backend_names(one, 1), n);
  CU_ASSERT_PTR_NOT_NULL(one[0]);
  if (one[0]) CU_ASSERT_STRING_EQUAL(one[0], names[0]);

  int k = 0;
  size_t count = taxi_backend_count();
  for (size_t i = 0; i < count; i++) {
    taxi_backend_info_t info;
    CU_ASSERT_EQUAL_FATAL(taxi_backend_info(&info, i), 0);
    if (!info.available) continue;
    CU_ASSERT_FATAL(k < n);
    CU_ASSERT_STRING_EQUAL(names[k], info.name);
    k++;
  }
  CU_ASSERT_EQUAL(k, n);
}

/* Each available backend can be created by name and reports that name. */
static void test_create_each_backend_by_name(void) {
  const char *names[32];
  int n = taxi_backend_names(names, 32);
  CU_ASSERT_FATAL(n >= 1 && n <= 32);
  for (int i = 0; i < n; i++) {
    taxi_reactor_t *r = NULL;
    CU_ASSERT_EQUAL(util_reactor_create(&r, names[i]), 0);
    if (!r) continue;
    CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), names[i]);
    taxi_backend_info_t info;
    for (size_t j = 0; j < taxi_backend_count(); j++)
      if (taxi_backend_info(&info, j) == 0 &&
          strcmp(info.name, names[i]) == 0) {
        unsigned caps = 0;
        CU_ASSERT_EQUAL(taxi_reactor_caps(r, &caps), 0);
        CU_ASSERT_EQUAL(caps, info.caps);
      }
    CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  }
}

static void expect_create_fails(const char *backend, int expected) {
  taxi_reactor_t *r = NULL;
  int rc = util_reactor_create(&r, backend);
  if (rc == 0) {
    printf("\n    create(\"%s\") succeeded on %s\n", backend,
           taxi_reactor_backend(r));
    taxi_reactor_destroy(r);
  }
  CU_ASSERT_EQUAL(rc, expected);
}

/* A name that no backend has (the empty string included: only NULL asks
 * for the automatic choice): TAXI_ENOBACKEND. */
static void test_create_unknown_backend(void) {
  expect_create_fails("no-such-backend", TAXI_ENOBACKEND);
  expect_create_fails("", TAXI_ENOBACKEND);
  CU_ASSERT_EQUAL(taxi_reactor_create(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_create(NULL, NULL), TAXI_EINVAL);
}

/* With no name and no TAXI_BACKEND, the first available backend. */
static void test_create_default_is_first_available(void) {
  unsetenv("TAXI_BACKEND");
  const char *names[32];
  int n = taxi_backend_names(names, 32);
  CU_ASSERT_FATAL(n >= 1);
  taxi_reactor_t *r = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, NULL), 0);
  CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), names[0]);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  r = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, NULL), 0);
  CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), names[0]);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* TAXI_BACKEND picks the backend when none is named (each available one in
 * turn); an explicit name wins over it. */
static void test_taxi_backend_environment(void) {
  const char *names[32];
  int n = taxi_backend_names(names, 32);
  CU_ASSERT_FATAL(n >= 1 && n <= 32);
  for (int i = 0; i < n; i++) {
    CU_ASSERT_EQUAL_FATAL(setenv("TAXI_BACKEND", names[i], 1), 0);
    taxi_reactor_t *r = NULL;
    CU_ASSERT_EQUAL(taxi_reactor_create(&r, NULL), 0);
    if (r) {
      CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), names[i]);
      CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    }
    taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
    r = NULL;
    CU_ASSERT_EQUAL(taxi_reactor_create(&r, &o), 0);
    if (r) {
      CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), names[i]);
      CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    }
    /* An explicit name is not overridden. */
    const char *other = names[(i + 1) % n];
    r = NULL;
    CU_ASSERT_EQUAL(util_reactor_create(&r, other), 0);
    if (r) {
      CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), other);
      CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    }
  }
  unsetenv("TAXI_BACKEND");
}

/* TAXI_BACKEND naming no backend: creation without a name fails with
 * TAXI_ENOBACKEND (the header does not say; this is the documented code
 * for "no backend of that name"). */
static void test_taxi_backend_environment_unknown(void) {
  CU_ASSERT_EQUAL_FATAL(setenv("TAXI_BACKEND", "no-such-backend", 1), 0);
  taxi_reactor_t *r = NULL;
  int rc = taxi_reactor_create(&r, NULL);
  if (rc == 0) {
    printf("(created on \"%s\") ", taxi_reactor_backend(r));
    taxi_reactor_destroy(r);
  }
  CU_ASSERT_EQUAL(rc, TAXI_ENOBACKEND);
  unsetenv("TAXI_BACKEND");
}

/* ---- options ------------------------------------------------------------ */

static void test_create_max_events(void) {
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  taxi_reactor_t *r = NULL;
  const unsigned good[] = {0, 1, 2, 256, 65536};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    o.max_events = good[i];
    r = NULL;
    CU_ASSERT_EQUAL(taxi_reactor_create(&r, &o), 0);
    if (r) {
      CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
      CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    }
  }
  const unsigned bad[] = {65537, 1u << 20, UINT_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.max_events = bad[i];
    r = NULL;
    int rc = taxi_reactor_create(&r, &o);
    if (rc == 0) taxi_reactor_destroy(r);
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
  }
}

/* Every options structure must have been filled by its initialiser: a
 * zeroed one (size 0) or one cut short is refused, as is one from a newer
 * version that asks for something this one does not know (non-zero bytes
 * beyond this version's structure); zeros beyond it are accepted. */
#define SIZED_CHECK(T, init, create)              \
  do {                                            \
    struct {                                      \
      T o;                                        \
      unsigned char more[16];                     \
    } big;                                        \
    memset(&big, 0, sizeof big);                  \
    init(&big.o);                                 \
    CU_ASSERT_EQUAL(big.o.size, sizeof(T));       \
    big.o.size = 0;                               \
    CU_ASSERT_EQUAL(create(&big.o), TAXI_EINVAL); \
    big.o.size = sizeof(T) - 1;                   \
    CU_ASSERT_EQUAL(create(&big.o), TAXI_EINVAL); \
    big.o.size = sizeof big;                      \
    big.more[3] = 1;                              \
    CU_ASSERT_EQUAL(create(&big.o), TAXI_EINVAL); \
    big.more[3] = 0;                              \
    CU_ASSERT_EQUAL(create(&big.o), 0);           \
  } while (0)

static taxi_reactor_t *sized_r;
static int sized_reactor(const taxi_reactor_options_t *o) {
  taxi_reactor_t *r = NULL;
  int rc = taxi_reactor_create(&r, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  return rc;
}
static int sized_proactor(const taxi_proactor_options_t *o) {
  taxi_proactor_t *p = NULL;
  int rc = taxi_proactor_create(&p, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
  return rc;
}
static int sized_lf(const taxi_lf_options_t *o) {
  taxi_lf_pool_t *p = NULL;
  int rc = taxi_lf_create(&p, sized_r, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  return rc;
}
static int sized_hsha(const taxi_hsha_options_t *o) {
  taxi_hsha_pool_t *p = NULL;
  int rc = taxi_hsha_create(&p, sized_r, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
  return rc;
}
static int sized_sets(const taxi_lf_sets_options_t *o) {
  taxi_lf_sets_options_t one = *o; /* one set of one thread: enough */
  taxi_lf_sets_t *s = NULL;
  if (one.size >= sizeof one) {
    one.sets = 1;
    one.threads_per_set = 1;
  }
  int rc = taxi_lf_sets_create(&s, o->size == sizeof one ? &one : o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
  return rc;
}
static int sized_group(const taxi_proactor_group_options_t *o) {
  taxi_proactor_group_t *g = NULL;
  int rc = taxi_proactor_group_create(&g, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
  return rc;
}
static taxi_lf_pool_t *sized_pool;
static int sized_bound(const taxi_lf_bound_options_t *o) {
  taxi_lf_bound_t *b = NULL;
  int rc = taxi_lf_bound_create(&b, sized_pool, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_lf_bound_destroy(b), 0);
  return rc;
}
static int sized_io(const taxi_io_options_t *o) {
  taxi_io_t *io = NULL;
  int rc = taxi_io_create(&io, o);
  if (rc == 0) CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
  return rc;
}

static void test_options_sized(void) {
  SIZED_CHECK(taxi_reactor_options_t, taxi_reactor_options_init, sized_reactor);
  SIZED_CHECK(taxi_proactor_options_t, taxi_proactor_options_init,
              sized_proactor);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&sized_r, NULL), 0);
  SIZED_CHECK(taxi_lf_options_t, taxi_lf_options_init, sized_lf);
  SIZED_CHECK(taxi_hsha_options_t, taxi_hsha_options_init, sized_hsha);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&sized_pool, sized_r, NULL), 0);
  SIZED_CHECK(taxi_lf_bound_options_t, taxi_lf_bound_options_init, sized_bound);
  CU_ASSERT_EQUAL(taxi_lf_destroy(sized_pool), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(sized_r), 0);
  SIZED_CHECK(taxi_lf_sets_options_t, taxi_lf_sets_options_init, sized_sets);
  SIZED_CHECK(taxi_io_options_t, taxi_io_options_init, sized_io);
  SIZED_CHECK(taxi_proactor_group_options_t, taxi_proactor_group_options_init,
              sized_group);
  /* The pool options an I/O context points to are read the same way. */
  taxi_io_options_t io = TAXI_IO_OPTIONS_INIT;
  taxi_lf_options_t lf = TAXI_LF_OPTIONS_INIT;
  io.dispatcher = TAXI_IO_LF;
  io.lf = &lf;
  lf.size = 0;
  CU_ASSERT_EQUAL(sized_io(&io), TAXI_EINVAL);
  lf.size = sizeof lf;
  CU_ASSERT_EQUAL(sized_io(&io), 0);
  /* The initialisers and the *_init functions agree. */
  taxi_reactor_options_t a = TAXI_REACTOR_OPTIONS_INIT, b;
  taxi_reactor_options_init(&b);
  CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
  taxi_lf_options_t c = TAXI_LF_OPTIONS_INIT, d;
  taxi_lf_options_init(&d);
  CU_ASSERT_EQUAL(c.promotion, d.promotion);
  CU_ASSERT_EQUAL(c.leaders, d.leaders);
  CU_ASSERT_EQUAL(c.size, d.size);
}

/* max_events 1: several ready handles still all get dispatched, one wait
 * at a time. */
static int max1_calls;
static int max1_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)h;
  (void)ev;
  util_drain(fd);
  max1_calls++;
  return 0;
}
static int max1_done(void *arg) { return max1_calls >= *(int *)arg; }

static void test_max_events_one_dispatches_all(void) {
  enum { N = 4 };
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  o.max_events = 1;
  taxi_reactor_t *r = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, &o), 0);
  static const taxi_handler_ops_t ops = {.input = max1_input};
  taxi_handler_t h[N];
  int sv[N][2];
  max1_calls = 0;
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv[i]), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&h[i], &ops), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(r, sv[i][0], &h[i], TAXI_EV_READ), 0);
    CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);
  }
  int goal = N;
  CU_ASSERT_EQUAL(run_until(r, max1_done, &goal, 5000), 1);
  CU_ASSERT_EQUAL(max1_calls, N);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  for (int i = 0; i < N; i++) {
    close(sv[i][0]);
    close(sv[i][1]);
  }
}

/* ---- allocator, version, clock ------------------------------------------ */

static void *my_malloc(size_t n) { return malloc(n); }
static void *my_realloc(void *p, size_t n) { return realloc(p, n); }
static void my_free(void *p) { free(p); }

/* Some but not all of the three functions: TAXI_EINVAL; all or none: 0. */
static void test_set_allocator_partial(void) {
  CU_ASSERT_EQUAL(taxi_set_allocator(my_malloc, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_set_allocator(NULL, my_realloc, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_set_allocator(NULL, NULL, my_free), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_set_allocator(my_malloc, my_realloc, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_set_allocator(my_malloc, NULL, my_free), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_set_allocator(NULL, my_realloc, my_free), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_set_allocator(my_malloc, my_realloc, my_free), 0);
  CU_ASSERT_EQUAL(taxi_set_allocator(NULL, NULL, NULL), 0);
}

/* The allocator hook sees the reactor's allocations, and destroy frees all
 * of them. */
static void test_allocator_hook_used(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  taxi_reactor_t *r = NULL;
  CU_ASSERT_EQUAL(taxi_reactor_create(&r, NULL), 0);
  util_alloc_counts_t c = util_alloc_counts();
  CU_ASSERT(c.mallocs + c.reallocs > 0);
  if (r) CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

static void test_version(void) {
  unsigned expect = ((unsigned)TAXI_VERSION_MAJOR << 16) |
                    ((unsigned)TAXI_VERSION_MINOR << 8) |
                    (unsigned)TAXI_VERSION_PATCH;
  CU_ASSERT_EQUAL(taxi_version(), expect);
  CU_ASSERT_PTR_NOT_NULL_FATAL(taxi_version_string());
  CU_ASSERT_STRING_EQUAL(taxi_version_string(), TAXI_VERSION_STRING);
  char buf[64];
  snprintf(buf, sizeof buf, "%d.%d.%d", TAXI_VERSION_MAJOR, TAXI_VERSION_MINOR,
           TAXI_VERSION_PATCH);
  CU_ASSERT_STRING_EQUAL(TAXI_VERSION_STRING, buf);
}

/* taxi_now never goes backwards, and advances across a sleep by at least
 * the time slept. */
static void test_now_monotonic(void) {
  taxi_time_t prev = taxi_now();
  int backwards = 0;
  for (int i = 0; i < 200000; i++) {
    taxi_time_t t = taxi_now();
    if (t < prev) backwards++;
    prev = t;
  }
  CU_ASSERT_EQUAL(backwards, 0);
  taxi_time_t a = taxi_now();
  util_sleep_ms(20);
  taxi_time_t b = taxi_now();
  CU_ASSERT(b - a >= 20 * TAXI_NSEC_PER_MSEC);
}

static atomic_int now_backwards;
static void *now_hammer(void *arg) {
  (void)arg;
  taxi_time_t prev = taxi_now();
  for (int i = 0; i < 100000; i++) {
    taxi_time_t t = taxi_now();
    if (t < prev) atomic_fetch_add(&now_backwards, 1);
    prev = t;
  }
  return NULL;
}

static void test_now_monotonic_threads(void) {
  atomic_store(&now_backwards, 0);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, now_hammer, NULL), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CU_ASSERT_EQUAL(atomic_load(&now_backwards), 0);
}

/* ---- handlers and timers outside a reactor ------------------------------ */

static void test_init_functions(void) {
  static const taxi_handler_ops_t ops = {.input = max1_input};
  taxi_handler_t h;
  CU_ASSERT_EQUAL(taxi_handler_init(&h, &ops), 0);
  CU_ASSERT_PTR_EQUAL(h.ops, &ops);
  CU_ASSERT_EQUAL(taxi_handler_init(NULL, &ops), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_handler_init(&h, NULL), TAXI_EINVAL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(taxi_timer_init(NULL), TAXI_EINVAL);
  /* ref/unref on a handler attached nowhere. */
  CU_ASSERT_EQUAL(taxi_handler_unref(&h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_handler_ref(&h), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&h), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&h), TAXI_EINVAL);
}

static CU_TestInfo error_tests[] = {
    {"every code: strings non-NULL, distinct", test_error_strings_distinct},
    {"names match the macros", test_error_names_match_macros},
    {"unknown codes", test_unknown_error_codes},
    {"last OS error is per thread", test_last_os_error_per_thread},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo backend_tests[] = {
    {"taxi_backend_info", test_backend_info},
    {"taxi_backend_names", test_backend_names},
    {"create each backend by name", test_create_each_backend_by_name},
    {"unknown backend: ENOBACKEND", test_create_unknown_backend},
    {"default: first available", test_create_default_is_first_available},
    {"TAXI_BACKEND selects the backend", test_taxi_backend_environment},
    {"TAXI_BACKEND unknown: ENOBACKEND", test_taxi_backend_environment_unknown},
    {"create max_events", test_create_max_events},
    {"options carry their size", test_options_sized},
    {"max_events 1 dispatches all", test_max_events_one_dispatches_all},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo misc_tests[] = {
    {"set_allocator: partial NULLs", test_set_allocator_partial},
    {"allocator hook used and balanced", test_allocator_hook_used},
    {"version", test_version},
    {"taxi_now monotonic", test_now_monotonic},
    {"taxi_now monotonic across threads", test_now_monotonic_threads},
    {"handler and timer init, ref", test_init_functions},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t errors_suite = {"api: errors", error_tests, 30,
                                               NULL};
static const taxi_test_suite_t backends_suite = {"api: backends", backend_tests,
                                                 30, NULL};
static const taxi_test_suite_t misc_suite = {"api: misc", misc_tests, 30, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {&errors_suite, &backends_suite,
                                             &misc_suite};
  return taxi_test_run("taxi API", suites, sizeof suites / sizeof suites[0],
                       argc, argv);
}
