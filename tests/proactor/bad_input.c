/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/bad_input.c - every misuse gets a clear TAXI_E* code:
 * nothing is started, no handler is ever called, the record is left as it
 * was; and a record already in flight is refused, not corrupted.  Also the
 * backend choice: by name, automatic, and TAXI_PROACTOR.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_int bi_calls;

/* The part of an in-flight record compared before and after a refused
 * call: all but the backend's room, which an OS helper thread (glibc's
 * aio) may update on its own. */
#define BI_SNAP offsetof(taxi_op_t, internal_.backend)

static void bi_on_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  (void)op;
  (void)status;
  (void)bytes;
  (void)act;
  atomic_fetch_add(&bi_calls, 1);
}

/* rc must be `want` (or `alt`, when alt != 1), and `op` must be exactly as
 * `before` and not in flight. */
static void bi_refused(int line, const char *what, int rc, int want, int alt,
                       const taxi_op_t *op, const taxi_op_t *before) {
  int ok = rc == want || (alt != 1 && rc == alt);
  if (!ok)
    printf("\n    line %d: %s = %d (%s), expected %s\n", line, what, rc,
           taxi_error_name(rc), taxi_error_name(want));
  CU_ASSERT(ok);
  if (op && before) {
    CU_ASSERT_EQUAL(memcmp(op, before, sizeof *op), 0);
    CU_ASSERT_EQUAL(taxi_op_in_flight(op), 0);
  }
}

#define REFUSED(call, want) \
  bi_refused(__LINE__, #call, (call), (want), 1, &op, &fresh)
#define REFUSED2(call, want, alt) \
  bi_refused(__LINE__, #call, (call), (want), (alt), &op, &fresh)

/* ---- creating ------------------------------------------------------------ */

static void test_create_errors(void) {
  taxi_proactor_t *p = NULL;
  CU_ASSERT_EQUAL(util_proactor_create(NULL, pt_backend), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_create(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(util_proactor_create(&p, "nonesuch"), TAXI_ENOBACKEND);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_EQUAL(util_proactor_create(&p, "emulated:nonesuch"),
                  TAXI_ENOBACKEND);
  CU_ASSERT_PTR_NULL(p);
  int rc = util_proactor_create(&p, "");
  CU_ASSERT(rc == TAXI_ENOBACKEND || rc == TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(p);
  rc = util_proactor_create(&p, ":");
  CU_ASSERT(rc == TAXI_ENOBACKEND || rc == TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(p);
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  CU_ASSERT_EQUAL(taxi_proactor_create(NULL, &o), TAXI_EINVAL);
  o.backend = "nonesuch";
  CU_ASSERT_EQUAL(taxi_proactor_create(&p, &o), TAXI_ENOBACKEND);
  CU_ASSERT_PTR_NULL(p);
  /* A queue depth that is not a power of two is rounded, not refused. */
  o.backend = pt_backend;
  o.queue_depth = 100;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &o), 0);
  pt_destroy(p);

  CU_ASSERT_EQUAL(taxi_proactor_destroy(NULL), TAXI_EINVAL);
  taxi_proactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_proactor_stats(NULL, &s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_run(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_restart(NULL), TAXI_EINVAL);
  taxi_lf_pool_t *pool = NULL;
  CU_ASSERT_EQUAL(taxi_lf_create_proactor(&pool, NULL, NULL), TAXI_EINVAL);
  p = pt_proactor();
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_create_proactor(NULL, p, NULL), TAXI_EINVAL);
  pt_destroy(p);

  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  CU_ASSERT_PTR_NULL(taxi_op_proactor(&op));
  CU_ASSERT_EQUAL(op.kind, TAXI_OP_NONE);
}

/* Automatic choice, TAXI_PROACTOR, and an explicit name overriding it. */
static int bi_listed(const char *name) {
  const char *names[16];
  int count = taxi_proactor_backend_names(names, 16);
  size_t n = strcspn(name, ":");
  for (int i = 0; i < count && i < 16; i++)
    if (strlen(names[i]) == n && strncmp(names[i], name, n) == 0) return 1;
  return 0;
}

static void test_backend_choice(void) {
  const char *names[16] = {NULL};
  int count = taxi_proactor_backend_names(names, 16);
  CU_ASSERT_FATAL(count >= 1 && count <= 16);
  CU_ASSERT_PTR_NOT_NULL(names[0]);
  /* The count without room, and room for fewer: only those are stored. */
  CU_ASSERT_EQUAL(taxi_proactor_backend_names(NULL, 0), count);
  CU_ASSERT_EQUAL(taxi_proactor_backend_names(NULL, 1), TAXI_EINVAL);
  const char *one[2] = {NULL, NULL};
  CU_ASSERT_EQUAL(taxi_proactor_backend_names(one, 1), count);
  CU_ASSERT_PTR_EQUAL(one[0], names[0]);
  CU_ASSERT_PTR_NULL(one[1]);
  CU_ASSERT(bi_listed(pt_backend));
  CU_ASSERT(bi_listed("emulated")); /* always compiled in */

  unsetenv("TAXI_PROACTOR");
  taxi_proactor_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, NULL), 0);
  const char *name = taxi_proactor_backend(p);
  CU_ASSERT_PTR_NOT_NULL(name);
  if (name) {
    CU_ASSERT(bi_listed(name));
    printf("\n    automatic choice: %s\n", name);
  }
  pt_destroy(p);
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &o), 0);
  pt_destroy(p);

  /* The environment picks the backend... */
  CU_ASSERT_EQUAL(setenv("TAXI_PROACTOR", pt_backend, 1), 0);
  p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, NULL), 0);
  name = taxi_proactor_backend(p);
  size_t n = strcspn(pt_backend, ":");
  CU_ASSERT(name && strncmp(name, pt_backend, n) == 0);
  pt_destroy(p);
  /* ... whichever of the compiled-in ones works. */
  for (size_t i = 0; names[i]; i++) {
    taxi_proactor_t *q = NULL;
    if (util_proactor_create(&q, names[i]) != 0) continue; /* refused here */
    taxi_proactor_destroy(q);
    CU_ASSERT_EQUAL(setenv("TAXI_PROACTOR", names[i], 1), 0);
    q = NULL;
    CU_ASSERT_EQUAL(taxi_proactor_create(&q, NULL), 0);
    if (q) {
      /* The full name: the backend's, then the reactor's it runs over. */
      const char *full = taxi_proactor_backend(q);
      size_t len = strlen(names[i]);
      CU_ASSERT(full && strncmp(full, names[i], len) == 0 &&
                (full[len] == '\0' || full[len] == ':'));
      taxi_proactor_destroy(q);
    }
  }
  /* A variant named is the one in use, and the name says so. */
  unsetenv("TAXI_PROACTOR");
  taxi_proactor_t *e = NULL;
  /* select: the readiness backend every system has (poll is not
   * Windows'). */
  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&e, "emulated:select"), 0);
  CU_ASSERT_STRING_EQUAL(taxi_proactor_backend(e), "emulated:select");
  pt_destroy(e);
  e = NULL;
  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&e, "emulated"), 0);
  const char *full = taxi_proactor_backend(e);
  CU_ASSERT(full && strncmp(full, "emulated:", 9) == 0 && full[9] != '\0');
  pt_destroy(e);
  CU_ASSERT_PTR_NULL(taxi_proactor_backend(NULL));
  /* An explicit name wins over the environment. */
  CU_ASSERT_EQUAL(setenv("TAXI_PROACTOR", "nonesuch", 1), 0);
  p = NULL;
  CU_ASSERT_EQUAL(util_proactor_create(&p, pt_backend), 0);
  if (p) pt_destroy(p);
  unsetenv("TAXI_PROACTOR");
}

/* ---- handles ------------------------------------------------------------- */

static void test_attach_errors(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  CU_ASSERT_EQUAL(taxi_proactor_attach(NULL, sv[0]), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, TAXI_INVALID_HANDLE), TAXI_EINVAL);
  /* Not open. */
#if defined(_WIN32)
  int dead = socket(AF_INET, SOCK_STREAM, 0); /* no dup() for sockets */
#else
  int dead = dup(sv[0]);
#endif
  CU_ASSERT_FATAL(dead >= 0);
  close(dead);
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, dead), TAXI_EBADF);
  /* Twice. */
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, sv[0]), 0);
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, sv[0]), TAXI_EEXIST);
  /* Not attached. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[1]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, sv[1]), TAXI_ENOENT);
  int rc = taxi_proactor_close(p, TAXI_INVALID_HANDLE);
  CU_ASSERT(rc == TAXI_ENOENT || rc == TAXI_EINVAL);
  rc = taxi_proactor_detach(p, TAXI_INVALID_HANDLE);
  CU_ASSERT(rc == TAXI_ENOENT || rc == TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_close(NULL, sv[0]), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_detach(NULL, sv[0]), TAXI_EINVAL);
  /* sv[1] is still open: refusing to close it did not close it. */
  CU_ASSERT(write(sv[1], "x", 1) == 1);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), TAXI_ENOENT);
  close(sv[1]);
  pt_destroy(p);
}

/* ---- starting operations ------------------------------------------------- */

static void test_null_arguments(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  int fd = pt_temp_file(100, 90, NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, fd), 0);
  atomic_store(&bi_calls, 0);
  taxi_proactor_stats_t before;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &before), 0);
  taxi_op_t op, fresh;
  taxi_op_init(&op);
  taxi_op_init(&fresh);
  char buf[16] = "0123456789abcdef";
  taxi_buf_t b = {buf, sizeof buf};
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  REFUSED(taxi_proactor_accept(NULL, &op, sv[0], 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_accept(p, NULL, sv[0], 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_accept(p, &op, sv[0], 0, NULL, NULL), TAXI_EINVAL);
  REFUSED(
      taxi_proactor_connect(NULL, &op, sv[0], &a, sizeof a, bi_on_done, NULL),
      TAXI_EINVAL);
  REFUSED(taxi_proactor_connect(p, NULL, sv[0], &a, sizeof a, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_connect(p, &op, sv[0], &a, sizeof a, NULL, NULL),
          TAXI_EINVAL);
  REFUSED(
      taxi_proactor_connect(p, &op, sv[0], NULL, sizeof a, bi_on_done, NULL),
      TAXI_EINVAL);
  REFUSED(taxi_proactor_connect(p, &op, sv[0], &a, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  static unsigned char huge[256];
  REFUSED(taxi_proactor_connect(p, &op, sv[0], huge, 129, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read(NULL, &op, sv[0], buf, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read(p, NULL, sv[0], buf, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read(p, &op, sv[0], buf, 4, 0, NULL, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read(p, &op, sv[0], NULL, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read(p, &op, sv[0], buf, 0, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read(p, &op, sv[0], buf, 0, TAXI_READ_EXACT, bi_on_done,
                             NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write(NULL, &op, sv[0], &b, 1, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write(p, NULL, sv[0], &b, 1, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write(p, &op, sv[0], &b, 1, NULL, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_write(p, &op, sv[0], NULL, 1, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write(p, &op, sv[0], &b, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  taxi_buf_t many[TAXI_OP_MAX_BUFS + 1];
  for (int i = 0; i < TAXI_OP_MAX_BUFS + 1; i++) many[i] = b;
  REFUSED(taxi_proactor_write(p, &op, sv[0], many, TAXI_OP_MAX_BUFS + 1,
                              bi_on_done, NULL),
          TAXI_EINVAL);
  taxi_buf_t empties[3] = {{buf, 0}, {buf, 0}, {buf, 0}};
  REFUSED(taxi_proactor_write(p, &op, sv[0], empties, 3, bi_on_done, NULL),
          TAXI_EINVAL);
  taxi_buf_t nullbase[2] = {{buf, 4}, {NULL, 4}};
  REFUSED(taxi_proactor_write(p, &op, sv[0], nullbase, 2, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read_file(NULL, &op, fd, buf, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read_file(p, NULL, fd, buf, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read_file(p, &op, fd, buf, 4, 0, NULL, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read_file(p, &op, fd, NULL, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read_file(p, &op, fd, buf, 0, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_read_file(p, &op, fd, buf, 4, -1, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(
      taxi_proactor_read_file(p, &op, fd, buf, 4, INT64_MIN, bi_on_done, NULL),
      TAXI_EINVAL);
  REFUSED(taxi_proactor_write_file(NULL, &op, fd, buf, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write_file(p, NULL, fd, buf, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write_file(p, &op, fd, buf, 4, 0, NULL, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write_file(p, &op, fd, NULL, 4, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write_file(p, &op, fd, buf, 0, 0, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_write_file(p, &op, fd, buf, 4, -4096, bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_transmit_file(NULL, &op, sv[0], fd, 0, 0, NULL, NULL,
                                      bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_transmit_file(p, NULL, sv[0], fd, 0, 0, NULL, NULL,
                                      bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_transmit_file(p, &op, sv[0], fd, 0, 0, NULL, NULL, NULL,
                                      NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_transmit_file(p, &op, sv[0], fd, -1, 0, NULL, NULL,
                                      bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_transmit_file(p, &op, sv[0], fd, 0, 101, NULL, NULL,
                                      bi_on_done, NULL),
          TAXI_EINVAL);
  taxi_buf_t nullhdr = {NULL, 10};
  REFUSED(taxi_proactor_transmit_file(p, &op, sv[0], fd, 0, 0, &nullhdr, NULL,
                                      bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED(taxi_proactor_transmit_file(p, &op, sv[0], fd, 0, 0, NULL, &nullhdr,
                                      bi_on_done, NULL),
          TAXI_EINVAL);
  REFUSED2(taxi_proactor_transmit_file(p, &op, sv[0], TAXI_INVALID_HANDLE, 0, 0,
                                       NULL, NULL, bi_on_done, NULL),
           TAXI_EINVAL, TAXI_EBADF);
  REFUSED(taxi_proactor_timer(NULL, &op, 0, bi_on_done, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_timer(p, NULL, 0, bi_on_done, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_timer(p, &op, 0, NULL, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_timer(p, &op, -1, bi_on_done, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_post(NULL, &op, bi_on_done, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_post(p, NULL, bi_on_done, NULL), TAXI_EINVAL);
  REFUSED(taxi_proactor_post(p, &op, NULL, NULL), TAXI_EINVAL);

  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&bi_calls), 0);
  taxi_proactor_stats_t after;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &after), 0);
  CU_ASSERT_EQUAL(after.started, before.started);
  CU_ASSERT_EQUAL(after.completed, before.completed);
  /* Nothing was sent. */
  char c;
  CU_ASSERT(read(sv[1], &c, 1) < 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* Operations on handles that are not attached: invalid, never attached,
 * closed through the proactor, detached. */
static void test_unattached_handles(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  int fd = pt_temp_file(100, 91, NULL);
  int tfile = pt_temp_file(100, 94, NULL);
  atomic_store(&bi_calls, 0);
  taxi_op_t op, fresh;
  taxi_op_init(&op);
  taxi_op_init(&fresh);
  char buf[16] = "x";
  taxi_buf_t b = {buf, 1};
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  taxi_handle_t bad = TAXI_INVALID_HANDLE;

  REFUSED2(taxi_proactor_read(p, &op, bad, buf, 4, 0, bi_on_done, NULL),
           TAXI_ENOENT, TAXI_EINVAL);
  REFUSED2(taxi_proactor_write(p, &op, bad, &b, 1, bi_on_done, NULL),
           TAXI_ENOENT, TAXI_EINVAL);
  REFUSED2(taxi_proactor_accept(p, &op, bad, 0, bi_on_done, NULL), TAXI_ENOENT,
           TAXI_EINVAL);
  REFUSED2(taxi_proactor_read_file(p, &op, bad, buf, 4, 0, bi_on_done, NULL),
           TAXI_ENOENT, TAXI_EINVAL);
  /* round 0: never attached; 1: attached, then detached; 2: attached,
   * then closed through the proactor (the numbers now name nothing). */
  for (int round = 0; round < 3; round++) {
    if (round > 0) {
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, fd), 0);
    }
    if (round == 1) {
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_detach(p, sv[0]), 0);
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_detach(p, fd), 0);
    }
    if (round == 2) {
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_close(p, sv[0]), 0);
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_close(p, fd), 0);
    }
    REFUSED(taxi_proactor_read(p, &op, sv[0], buf, 4, 0, bi_on_done, NULL),
            TAXI_ENOENT);
    REFUSED(taxi_proactor_write(p, &op, sv[0], &b, 1, bi_on_done, NULL),
            TAXI_ENOENT);
    REFUSED(taxi_proactor_accept(p, &op, sv[0], 0, bi_on_done, NULL),
            TAXI_ENOENT);
    REFUSED(
        taxi_proactor_connect(p, &op, sv[0], &a, sizeof a, bi_on_done, NULL),
        TAXI_ENOENT);
    REFUSED(taxi_proactor_read_file(p, &op, fd, buf, 4, 0, bi_on_done, NULL),
            TAXI_ENOENT);
    REFUSED(taxi_proactor_write_file(p, &op, fd, buf, 4, 0, bi_on_done, NULL),
            TAXI_ENOENT);
    /* A file that is open (it need not be attached): the socket is what
     * is not attached. */
    REFUSED(taxi_proactor_transmit_file(p, &op, sv[0], tfile, 0, 0, NULL, NULL,
                                        bi_on_done, NULL),
            TAXI_ENOENT);
  }
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&bi_calls), 0);
  close(sv[1]); /* sv[0] and fd were closed by the proactor */
  close(tfile);
  pt_destroy(p);
}

/* A record in flight is refused with TAXI_EBUSY by every operation (and by
 * another proactor), and the operation in flight still completes
 * correctly into its own buffer. */
static void test_record_in_flight(void) {
  taxi_proactor_t *p = pt_proactor();
  taxi_proactor_t *p2 = pt_proactor();
  int sv[2], sv2[2];
  pt_pair(p, sv);
  pt_pair(p2, sv2);
  atomic_store(&bi_calls, 0);
  char buf[8], other[8];
  memset(buf, 0, sizeof buf);
  memset(other, 'O', sizeof other);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, sizeof buf,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 1);
  CU_ASSERT_PTR_EQUAL(taxi_op_proactor(&op), p);
  taxi_op_t snap = op;
  taxi_buf_t b = {other, sizeof other};
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  int fd = pt_temp_file(100, 93, NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, fd), 0);

#define BUSY(call)                                                      \
  do {                                                                  \
    int rc_ = (call);                                                   \
    if (rc_ != TAXI_EBUSY)                                              \
      printf("\n    %s = %d (%s)\n", #call, rc_, taxi_error_name(rc_)); \
    CU_ASSERT_EQUAL(rc_, TAXI_EBUSY);                                   \
    CU_ASSERT_EQUAL(memcmp(&op, &snap, BI_SNAP), 0);                    \
  } while (0)
  BUSY(taxi_proactor_read(p, &op, sv[0], other, sizeof other, 0, bi_on_done,
                          NULL));
  BUSY(taxi_proactor_read(p, &op, sv[0], other, 1, TAXI_READ_EXACT, bi_on_done,
                          NULL));
  BUSY(taxi_proactor_write(p, &op, sv[0], &b, 1, bi_on_done, NULL));
  BUSY(taxi_proactor_accept(p, &op, sv[0], 0, bi_on_done, NULL));
  BUSY(taxi_proactor_connect(p, &op, sv[0], &a, sizeof a, bi_on_done, NULL));
  BUSY(taxi_proactor_read_file(p, &op, fd, other, 4, 0, bi_on_done, NULL));
  BUSY(taxi_proactor_write_file(p, &op, fd, other, 4, 0, bi_on_done, NULL));
  BUSY(taxi_proactor_transmit_file(p, &op, sv[0], fd, 0, 0, NULL, NULL,
                                   bi_on_done, NULL));
  BUSY(taxi_proactor_timer(p, &op, 0, bi_on_done, NULL));
  BUSY(taxi_proactor_post(p, &op, bi_on_done, NULL));
#undef BUSY
  /* With another proactor: refused too (in flight elsewhere). */
  int rc = taxi_proactor_read(p2, &op, sv2[0], other, 1, 0, bi_on_done, NULL);
  CU_ASSERT(rc == TAXI_EINVAL || rc == TAXI_EBUSY);
  rc = taxi_proactor_post(p2, &op, bi_on_done, NULL);
  CU_ASSERT(rc == TAXI_EINVAL || rc == TAXI_EBUSY);
  CU_ASSERT_EQUAL(memcmp(&op, &snap, BI_SNAP), 0);

  /* The operation in flight is intact. */
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], "ABCDEFGH", 8), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, 8);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_READ);
  CU_ASSERT_EQUAL(memcmp(buf, "ABCDEFGH", 8), 0);
  for (size_t i = 0; i < sizeof other; i++) CU_ASSERT_EQUAL(other[i], 'O');
  pt_settle(p, 20);
  pt_settle(p2, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&bi_calls), 0);
  char c;
  CU_ASSERT(read(sv[1], &c, 1) < 0); /* the refused write sent nothing */

  /* Idle again: the record may be used with the other proactor now. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_post(p2, &op, pt_on_done, &d), 0);
  CU_ASSERT(pt_run_done(p2, &d, 1));
  CU_ASSERT_PTR_EQUAL(taxi_op_proactor(&op), p2);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, fd), 0);
  pt_close(&sv[1]);
  pt_close(&sv2[1]);
  pt_destroy(p);
  pt_destroy(p2);
}

/* A multishot accept's record stays in flight between connections: it is
 * refused for anything else until the accept ends. */
static void test_multishot_record_busy(void) {
  taxi_proactor_t *p = pt_proactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(p, &op, lfd, TAXI_ACCEPT_MULTISHOT, pt_on_done, &d),
      0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CU_ASSERT_FATAL(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.more, 1);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 1);
  CU_ASSERT_EQUAL(taxi_proactor_accept(p, &op, lfd, 0, bi_on_done, NULL),
                  TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &op, bi_on_done, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, d.accepted), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0); /* ends the accept */
  CU_ASSERT(pt_run_done(p, &d, 2));
  CU_ASSERT_EQUAL(d.more, 0);
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  close(c);
  pt_destroy(p);
}

static CU_TestInfo bad_input_tests[] = {
    {"create/destroy/stats/dispatch: NULL, unknown and empty names",
     test_create_errors},
    {"automatic choice, TAXI_PROACTOR, explicit name wins",
     test_backend_choice},
    {"io_uring refused (ENOSYS, EPERM): clear error, automatic falls back",
     pt_test_uring_refused},
    {"attach/close/detach: invalid, closed, twice, unattached",
     test_attach_errors},
    {"operations: NULL, zero lengths, buffers, offsets, delays",
     test_null_arguments},
    {"operations on invalid, unattached, closed, detached handles",
     test_unattached_handles},
    {"record in flight: TAXI_EBUSY, the operation intact",
     test_record_in_flight},
    {"multishot accept record busy until it ends", test_multishot_record_busy},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_bad_input = {"bad input", bad_input_tests, 60,
                                              NULL};
