/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/helpers.h - fixtures shared by the proactor suites.
 *
 * The suites share the objects of tests/libtaxitest.la with the reactor
 * and pool suites, so every global symbol here starts with pt_.
 *
 * Waits.  Tests never assert on time.  Every wait is bounded (PT_WAIT_MS
 * for one hand-over, scaled by TAXI_TEST_TIMEOUT_SCALE like the runner's
 * limits) so that a lost completion fails the test instead of hanging it,
 * and a helper thread that does not finish ends the suite's process with a
 * message naming what hung (pt_thread_join).
 */
#ifndef TAXI_TESTS_PROACTOR_HELPERS_H
#define TAXI_TESTS_PROACTOR_HELPERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "taxi/taxi.h"
#include "../runner.h"
#include "../util.h"

/* The bound for one hand-over (ms), before scaling. */
#define PT_WAIT_MS 10000

/* The backend under test, as given to taxi_proactor_create ("uring",
 * "emulated:poll", ...). */
extern const char *pt_backend;

/* PT_WAIT_MS times TAXI_TEST_TIMEOUT_SCALE. */
int pt_wait_ms(void);

/* 1 when TAXI_TEST_SMALL is set (and not "0"). */
int pt_small(void);
/* With the "@one" modes (TAXI_PROACTOR_ONE_THREAD): print why and return
 * 1, for a test that dispatches one proactor from several threads (a
 * pool, or a thread after another); else 0. */
int pt_skip_one_thread(void);

/* 1 when pt_backend is `name` or a variant of it ("emulated:poll" is a
 * variant of "emulated"). */
int pt_backend_is(const char *name);

/* The readiness backend under the emulated proactor ("poll" for
 * "emulated:poll"), or NULL when pt_backend is not emulated over a named
 * one. */
const char *pt_reactor_variant(void);

/* The most handles the backend can watch, numbered from 0 (FD_SETSIZE for
 * emulated:select), or 0 for no limit. */
unsigned pt_max_handles(void);

/* A proactor on pt_backend; CU_FAIL_FATAL when it cannot be made. */
taxi_proactor_t *pt_proactor(void);
/* taxi_proactor_destroy, asserting it returned 0. */
void pt_destroy(taxi_proactor_t *p);

/* ---- recording completions ---------------------------------------------- */

/*
 * What a completion handler saw, for pt_on_done (act = the pt_done_t).
 * `calls` is incremented last (seq_cst), so a thread that read it may read
 * the other fields of the calls it counted.
 */
typedef struct pt_done {
  atomic_int calls;
  atomic_int more_calls; /* of which with op->more set */
  int status;            /* of the last call */
  size_t bytes;
  unsigned seq; /* pt_next_seq() at the last call */
  taxi_op_kind_t kind;
  taxi_handle_t handle;
  taxi_handle_t accepted;
  int more;
  int in_flight; /* taxi_op_in_flight(op) inside the handler */
  pthread_t thread;
} pt_done_t;

void pt_done_init(pt_done_t *d);
void pt_on_done(taxi_op_t *op, int status, size_t bytes, void *act);

/* A global sequence number: the order in which handlers ran. */
unsigned pt_next_seq(void);

/* The sequence number pt_on_done gave the most recent call, 0 if none. */
unsigned pt_seq_now(void);

/* ---- dispatching -------------------------------------------------------- */

/* Dispatch p (handle_events in slices of at most 50 ms) until pred(arg)
 * holds or max_ms passed.  1 when it holds, 0 on timeout, or the negative
 * code handle_events returned. */
int pt_run_until(taxi_proactor_t *p, int (*pred)(void *), void *arg,
                 int max_ms);

/* Dispatch until *counter >= goal (bounded by pt_wait_ms()); 1 when
 * reached. */
int pt_run_count(taxi_proactor_t *p, atomic_int *counter, int goal);

/* Dispatch until d->calls >= n; 1 when reached. */
int pt_run_done(taxi_proactor_t *p, pt_done_t *d, int n);

/* Dispatch for about ms milliseconds whatever happens (to let a wrong
 * extra completion show up).  Returns the handlers run, or a negative
 * code. */
int pt_settle(taxi_proactor_t *p, int ms);

/* ---- descriptors -------------------------------------------------------- */

/* A non-blocking AF_UNIX stream socketpair; sv[0] attached to p (unless p
 * is NULL), sv[1] the peer for plain system calls.  CU_FAIL_FATAL on
 * failure. */
void pt_pair(taxi_proactor_t *p, int sv[2]);
/* A connected TCP pair over loopback, as pt_pair. */
void pt_tcp_pair(taxi_proactor_t *p, int sv[2]);

/* Close fd if >= 0 and set it to -1. */
void pt_close(int *fd);

/* Blocking-style helpers on a non-blocking descriptor, bounded by
 * pt_wait_ms(): write all / read exactly len.  0, or -1 (error, EOF or
 * time-out; *got says how many were read). */
int pt_peer_write(int fd, const void *buf, size_t len);
int pt_peer_read(int fd, void *buf, size_t len, size_t *got);
/* Wait for EOF on fd, discarding bytes: the count discarded, or -1 on
 * error or time-out. */
long pt_peer_read_to_eof(int fd);

/* Close fd so that the peer gets a reset (SO_LINGER 0). */
void pt_close_reset(int fd);

/* A regular file of `size` bytes of pseudo-random content from `seed`,
 * already unlinked, opened read-write.  The content is returned in
 * *content (malloc'd, the caller frees) when content is not NULL.
 * CU_FAIL_FATAL on failure. */
int pt_temp_file(size_t size, uint64_t seed, unsigned char **content);

/* Fill buf with the pseudo-random bytes of `seed`. */
void pt_fill(void *buf, size_t len, uint64_t seed);

/* splitmix64. */
uint64_t pt_rand(uint64_t *state);

/* The index of the first byte where a and b differ, or -1. */
long pt_diff(const void *a, const void *b, size_t len);

/* ---- threads ------------------------------------------------------------ */

typedef util_thread_t pt_thread_t;

/* Start t running fn(arg); CU_FAIL_FATAL when it cannot. */
void pt_thread_start(pt_thread_t *t, void (*fn)(void *), void *arg);
/* Wait (bounded by pt_wait_ms() * factor) for t to finish and join it;
 * if it does not finish, print "HANG: <what>" and end the process. */
void pt_thread_join(pt_thread_t *t, int factor, const char *what);

/* Run fn(arg) in a thread of its own, bounded as pt_thread_join; returns
 * what fn returned.  For calls that block until other threads act. */
int pt_bounded(int (*fn)(void *), void *arg, const char *what);

/* Sleep ms milliseconds. */
void pt_sleep_ms(long ms);

#endif /* TAXI_TESTS_PROACTOR_HELPERS_H */
