/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/main.c - the reactor conformance program, and the
 * fixtures the suites share.
 *
 *   test_reactor [BACKEND|all [FILTER]]
 *
 * runs every conformance suite over one readiness backend ("epoll",
 * "apr:poll", ...; by default TAXI_BACKEND, else the best that works
 * here) or over each that works here ("all"); see taxi_test_family_main.
 */
#define _GNU_SOURCE 1

#include "config.h"

#include "suites.h"

#include "../fault/fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *taxi_test_backend;

#if !defined(_WIN32)
/* libkqueue implements EVFILT_SIGNAL with a signalfd read by a thread of
 * its own, and a signalfd shows only signals pending for the process or
 * for the thread that reads it: a signal directed at another thread
 * (raise, pthread_kill) stays pending there, never reported.  FreeBSD
 * records every signal the process is sent, whichever thread takes it
 * (kqueue(2)).  So on libkqueue only, a test that raises a signal sends it
 * to the process instead, and says so once. */
int conf_raise(int signo) {
#if defined(TAXI_KQUEUE_IS_LIBKQUEUE) && defined(TAXI_HAVE_KQUEUE_SIGNAL)
  static int said;
  const char *source = getenv("TAXI_SIGNAL_SOURCE");
  if (strcmp(taxi_test_backend, "kqueue") == 0 &&
      !(source && strcmp(source, "port") == 0)) {
    if (!said++)
      printf(
          "\n    libkqueue: signals sent with kill(getpid()), not raise(): "
          "its EVFILT_SIGNAL cannot see a signal directed at a thread other "
          "than its own\n");
    return kill(getpid(), signo);
  }
#endif
  return raise(signo);
}
#endif

taxi_reactor_t *conf_reactor(void) {
  taxi_reactor_t *r = NULL;
  int rc = util_reactor_create(&r, taxi_test_backend);
  if (rc != 0 || !r) {
    printf("\n    taxi_reactor_create(\"%s\") = %d (%s)\n", taxi_test_backend,
           rc, taxi_error_name(rc));
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), taxi_test_backend);
  return r;
}

int conf_backend_info(taxi_backend_info_t *out) {
  size_t n = taxi_backend_count();
  for (size_t i = 0; i < n; i++) {
    if (taxi_backend_info(out, i) == 0 && out->name &&
        strcmp(out->name, taxi_test_backend) == 0)
      return 0;
  }
  memset(out, 0, sizeof *out);
  return TAXI_ENOENT;
}

/* ---- the probe handler -------------------------------------------------- */

#define PROBE(h) TAXI_CONTAINER_OF(h, conf_probe_t, h)

int conf_probe_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  conf_probe_t *p = PROBE(h);
  atomic_fetch_add(&p->inputs, 1);
  atomic_fetch_or(&p->in_events, ev);
  atomic_store(&p->last_in_events, ev);
  if (p->drain) {
    char buf[4096];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        atomic_fetch_add(&p->bytes, (long)n);
        continue;
      }
      if (n == 0) {
        atomic_store(&p->eof, 1);
        break;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        atomic_store(&p->read_errno, errno);
      break;
    }
  }
  return p->input_ret;
}

int conf_probe_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  conf_probe_t *p = PROBE(h);
  (void)fd;
  atomic_fetch_add(&p->outputs, 1);
  atomic_fetch_or(&p->out_events, ev);
  atomic_store(&p->last_out_events, ev);
  return p->output_ret;
}

int conf_probe_exception(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  conf_probe_t *p = PROBE(h);
  (void)fd;
  (void)ev;
  atomic_fetch_add(&p->excepts, 1);
  return 0;
}

int conf_probe_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  conf_probe_t *p = PROBE(h);
  p->last_act = act;
  p->last_timer = t;
  atomic_fetch_add(&p->timeouts, 1);
  return p->timeout_ret;
}

int conf_probe_signal(taxi_handler_t *h, int signo) {
  conf_probe_t *p = PROBE(h);
  atomic_store(&p->last_signo, signo);
  atomic_fetch_add(&p->signals, 1);
  return p->signal_ret;
}

void conf_probe_close(taxi_handler_t *h, taxi_handle_t fd) {
  conf_probe_t *p = PROBE(h);
  (void)fd;
  atomic_fetch_add(&p->closes, 1);
  if (p->close_fd && p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
}

const taxi_handler_ops_t conf_probe_ops = {
    .input = conf_probe_input,
    .output = conf_probe_output,
    .exception = conf_probe_exception,
    .timeout = conf_probe_timeout,
    .signal = conf_probe_signal,
    .close = conf_probe_close,
};

void conf_probe_init(conf_probe_t *p, int fd, const taxi_handler_ops_t *ops) {
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->drain = 1;
  atomic_init(&p->inputs, 0);
  atomic_init(&p->outputs, 0);
  atomic_init(&p->excepts, 0);
  atomic_init(&p->timeouts, 0);
  atomic_init(&p->signals, 0);
  atomic_init(&p->closes, 0);
  atomic_init(&p->in_events, 0);
  atomic_init(&p->out_events, 0);
  atomic_init(&p->last_in_events, 0);
  atomic_init(&p->last_out_events, 0);
  atomic_init(&p->last_signo, 0);
  atomic_init(&p->bytes, 0);
  atomic_init(&p->eof, 0);
  atomic_init(&p->read_errno, 0);
  int rc = taxi_handler_init(&p->h, ops ? ops : &conf_probe_ops);
  CU_ASSERT_EQUAL(rc, 0);
}

int conf_pred_nonzero(void *counter) {
  return atomic_load((atomic_int *)counter) != 0;
}

int conf_pred_reached(void *goal) {
  conf_count_goal_t *g = goal;
  return atomic_load(g->counter) >= g->goal;
}

void conf_settle(taxi_reactor_t *r, int rounds) {
  for (int i = 0; i < rounds; i++)
    if (taxi_reactor_handle_events(r, 0) <= 0) break;
}

/* ---- main --------------------------------------------------------------- */

static const taxi_test_suite_t *const base_suites[] = {
    &conf_suite_io,        &conf_suite_lifetime, &conf_suite_timers,
    &conf_suite_notify,    &conf_suite_mqueue,   &conf_suite_signals,
    &conf_suite_fork,      &conf_suite_scale,    &conf_suite_alloc,
    &conf_suite_bad_input, &conf_suite_failures,
};
#define N_SUITES (sizeof base_suites / sizeof base_suites[0])

static int run_backend(const char *backend, int argc, char **argv) {
  int skip = taxi_test_backend_unavailable("reactor", backend);
  if (skip) return skip;
  taxi_test_backend = backend;

  static taxi_test_suite_t suites[N_SUITES];
  static char suite_names[N_SUITES][96];
  const taxi_test_suite_t *list[N_SUITES];
  for (size_t i = 0; i < N_SUITES; i++) {
    suites[i] = *base_suites[i];
    snprintf(suite_names[i], sizeof suite_names[i], "reactor[%s]: %s", backend,
             base_suites[i]->name);
    suites[i].name = suite_names[i];
    list[i] = &suites[i];
  }
  char title[128];
  snprintf(title, sizeof title, "taxi reactor conformance: backend %s",
           backend);
  return taxi_test_run(title, list, N_SUITES, argc, argv);
}

int main(int argc, char **argv) {
  /* Before the arguments are read: it runs the program again, as given. */
  fault_reexec_preloaded(argc, argv);
  return taxi_test_family_main(
      "reactor", "TAXI_BACKEND", taxi_test_known_readiness,
      taxi_test_readiness_backends, run_backend, argc, argv);
}
