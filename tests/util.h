/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/util.h - helpers for taxi's tests (POSIX).
 *
 * Functions returning int return 0 (or a descriptor) on success and -1 with
 * errno set on failure, unless said otherwise.
 */
#ifndef TAXI_TESTS_UTIL_H
#define TAXI_TESTS_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "taxi/taxi.h"

/* taxi_reactor_create() / taxi_proactor_create() on the backend named
 * (NULL: automatic), the rest of the options at their defaults: what most
 * tests need.  Return what those return. */
int util_reactor_create(taxi_reactor_t **out, const char *backend);
int util_proactor_create(taxi_proactor_t **out, const char *backend);
/* TAXI_PROACTOR_* flags util_proactor_create adds (the proactor family's
 * "BACKEND@one" modes set them); 0 by default. */
extern unsigned util_proactor_flags;

/* A connected AF_UNIX stream socket pair, both ends non-blocking and
 * close-on-exec. */
int util_socketpair(int sv[2]);

/* A non-blocking TCP listener on 127.0.0.1, port chosen by the system; the
 * port is stored in *port (host order).  Returns the descriptor. */
int util_tcp_listener(int *port);

/* A non-blocking TCP socket connecting to 127.0.0.1:port; the connection
 * may still be in progress.  Returns the descriptor. */
int util_tcp_connect_nb(int port);

/* A connected pair of non-blocking TCP sockets over loopback:
 * fds[0] the accepted end, fds[1] the connecting end. */
int util_tcp_pair(int fds[2]);

int util_set_nonblock(int fd);

/* Write/read one byte; returns what write(2)/read(2) returned. */
long util_write_byte(int fd);
long util_read_byte(int fd);
/* Read and discard until EAGAIN or EOF; returns the bytes read, or -1 with
 * errno set when read failed with something other than EAGAIN. */
long util_drain(int fd);

/* ---- the counting allocator -------------------------------------------- */

typedef struct util_alloc_counts {
  uint64_t mallocs;  /* calls to the malloc hook */
  uint64_t reallocs; /* calls to the realloc hook */
  uint64_t frees;    /* calls to the free hook with a non-NULL pointer */
  int64_t live;      /* blocks allocated and not yet freed */
  int64_t live_here; /* of those, the ones allocated by a thread while
                        util_alloc_fail_after_here had armed it */
  uint64_t failed;   /* allocations refused (see util_alloc_fail_after) */
} util_alloc_counts_t;

/* taxi_set_allocator(), waiting (up to 10 s) while it says TAXI_EBUSY. */
int util_set_allocator(taxi_malloc_fn m, taxi_realloc_fn r, taxi_free_fn f);
/* Install the counting allocator with taxi_set_allocator(); returns what
 * that returned.  Only while no taxi object exists. */
int util_alloc_install(void);
/* Restore the C library's allocator (taxi_set_allocator(NULL, NULL, NULL)). */
int util_alloc_uninstall(void);
util_alloc_counts_t util_alloc_counts(void);
/* Zero every counter (the live count included). */
void util_alloc_reset(void);
/* Make the n-th allocation from now (0: the next one) and every later one
 * return NULL; n < 0 disables failing. */
void util_alloc_fail_after(long n);
/* The same, counting and failing only the calling thread's allocations:
 * for a call that starts threads whose own allocations would otherwise
 * race with the caller's for the failure (the pools' reactor threads
 * growing a backend's buffers).  util_alloc_fail_after(-1) or (-1) here
 * disables it.  The blocks the arming thread allocates meanwhile are
 * counted in live_here until freed, by whichever thread: a leak check of
 * the armed call that other threads' buffer growth cannot disturb. */
void util_alloc_fail_after_here(long n);

/* ---- resources ---------------------------------------------------------- */

/* Make RLIMIT_NOFILE at least n: raise the soft limit (to the hard limit if
 * need be), and as root the hard limit too.  Returns 1 if the soft limit is
 * now >= n, else 0. */
int util_raise_nofile(unsigned long n);

/* 1 when the environment variable TAXI_TEST_SMALL is set and not "0":
 * tests then use smaller sizes (slow runs: TSan, wine). */
int util_test_small(void);

/* 1 when this Windows program runs under wine (always 0 elsewhere): for
 * the few checks that wine's own gaps would fail, which then say so. */
int util_under_wine(void);

/* Sleep for ms milliseconds (restarting after signals). */
void util_sleep_ms(long ms);

/* Wait (polling every millisecond) until *flag >= value or max_ms passed;
 * returns 1 if the value was reached.  A bounded wait for tests that hand
 * over between threads. */
int util_wait_flag(atomic_int *flag, int value, int max_ms);

/* Milliseconds elapsed on taxi_now() since `start`. */
int64_t util_elapsed_ms(taxi_time_t start);

/*
 * Dispatch r (handle_events in slices of at most 50 ms) until pred(arg)
 * returns non-zero or max_ms milliseconds of taxi_now() have passed.
 * pred is checked first.  Returns 1 when pred holds, 0 on timeout, or the
 * negative TAXI_E* code taxi_reactor_handle_events() returned.
 */
int run_until(taxi_reactor_t *r, int (*pred)(void *), void *arg, int max_ms);

/* Dispatch r for about ms milliseconds, whatever happens; returns the sum
 * of what handle_events returned, or the first negative code. */
int run_for(taxi_reactor_t *r, int ms);

/* Wait for child pid at most max_ms; kill it (SIGKILL) when time runs out.
 * Returns its wait status, or -1 if it had to be killed or waitpid
 * failed. */
int util_wait_child(int pid, int max_ms);

/* ---- test threads ------------------------------------------------------- */

/* A test thread that runs fn(arg) once. */
typedef struct util_thread {
  pthread_t tid;
  void (*fn)(void *arg);
  void *arg;
  atomic_int done;
  int started;
} util_thread_t;

/* Start t; 0, or -1 when pthread_create failed. */
int util_thread_start(util_thread_t *t, void (*fn)(void *), void *arg);
/* 1 when t has finished (without joining it). */
int util_thread_done(util_thread_t *t);
/* Wait at most max_ms for t to finish, then join it.  If it does not
 * finish, util_hang(what): a thread still running would use memory the
 * test is about to give back, so the suite's process ends (the runner then
 * reports the test as failed). */
void util_thread_join(util_thread_t *t, int max_ms, const char *what);
/* End the suite's process after printing "HANG: <what>" and, on POSIX,
 * every thread's stack (util_print_stacks). */
void util_hang(const char *what);
/* Run fn(arg) in a thread of its own and return what it returned; if it
 * has not returned after max_ms, util_hang(what).  For calls that block
 * until other threads act (shutdown, destroy, join), so that a bug fails
 * instead of hanging the suite until the runner's time limit.  If no
 * thread can be started, fn runs in the caller's. */
int util_bounded(int (*fn)(void *arg), void *arg, int max_ms, const char *what);

#if !defined(_WIN32)
/* Print every thread's stack of process pid (this one or a child) to
 * stdout, from gdb attached for the purpose, so that a hang a test's bound
 * catches once in hundreds of runs can be read in the log rather than
 * reproduced.  Waits for gdb at most 60 s.  Prints a line saying why
 * instead when gdb cannot be started (not installed) or fails (no right
 * to trace); does nothing when TAXI_TEST_STACKS is 0. */
void util_print_stacks(long pid);
/* Let any process of the same user trace this one (Linux's Yama
 * otherwise lets only ancestors): the runner's suites call it, so that the
 * runner's gdb may print the stacks of a suite that timed out. */
void util_allow_stack_printing(void);

/* Run fn in the thread that takes signo (installed with sigaction), and
 * unblock signo in the calling thread; util_signal_default puts the default
 * disposition back. */
void util_signal_handle(int signo, void (*fn)(int));
void util_signal_default(int signo);

/* A thread that sends `signo` to `target` every 20 ms until `done` is set
 * (the first may come before the target waits), at most max_ms; past that
 * it calls give_up(arg) once, so the target returns all the same, and
 * records that it gave up.  util_signaller_finish sets done and joins it. */
typedef struct util_signaller {
  pthread_t target, thread;
  int signo, max_ms;
  void (*give_up)(void *arg);
  void *arg;
  atomic_int done, sent, gave_up;
} util_signaller_t;
int util_signaller_start(util_signaller_t *s, int signo, int max_ms,
                         void (*give_up)(void *arg), void *arg);
void util_signaller_finish(util_signaller_t *s);
#endif

#endif /* TAXI_TESTS_UTIL_H */
