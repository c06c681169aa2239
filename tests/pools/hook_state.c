/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hook_state.c - what taxi_reactor_suspend(), _resume() and
 * _modify() do while a hook of the handler runs, on every dispatcher: the
 * reactor's own (one thread in taxi_reactor_run), the Leader/Followers
 * pool (one leader, and several where the backend can) and the
 * half-sync/half-async pool.
 *
 *   - A suspend made inside the handle's hook, or by another thread while
 *     it runs, survives the re-arm after the hook: the handle, readable
 *     still, is not reported again until resumed.
 *   - A modify made inside the hook, or by another thread while it runs,
 *     is what the re-arm after the hook watches: readable data no longer
 *     reported, the writable handle reported to the output hook.
 *   - Once taxi_reactor_remove() has been called, suspend, resume and
 *     modify answer TAXI_ENOENT, from another thread and from the hook
 *     still running; the close hook runs once, after that hook.
 *
 * "Not reported again" is checked after rounds of a second handler's
 * input (each waited for), long after the re-arm; every wait is bounded.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { DISP_REACTOR, DISP_LF_ONE, DISP_LF_MANY, DISP_HSHA, DISP_COUNT };
static const char *const disp_names[] = {"reactor", "lf, one leader",
                                         "lf, many leaders", "hsha"};

/* What the handler's input hook does the first time it runs. */
enum {
  DO_NOTHING,     /* another thread acts while the hook waits on the gate */
  DO_SUSPEND,     /* suspends its handler */
  DO_MODIFY,      /* watches for writing only */
  DO_SUSPEND_RES, /* suspends, then resumes */
};

typedef struct hk {
  taxi_handler_t h;
  taxi_reactor_t *r;
  int sv[2];
  int action;
  pools_gate_t *gate;  /* the first input hook waits here, if set */
  atomic_int inputs;   /* input hooks run */
  atomic_int outputs;  /* output hooks run */
  atomic_int first_rc; /* what the first input hook's call returned */
  atomic_int after_rc; /* the modify it made after the gate */
  atomic_int inside;   /* 1 while a hook runs */
  atomic_int closes;   /* close hooks run */
  atomic_int early;    /* close hooks that found a hook running */
  atomic_int out_rc;   /* the output hook's suspend */
  /* Hooks that have stored all they store (bumped last): a test waits on
   * these, not on inputs and outputs, before reading the results. */
  atomic_int inputs_done, outputs_done;
} hk_t;

/* What the results hold until a hook stores them: no call returns it, so
 * that a missing store cannot pass for a 0 returned. */
#define HK_UNSET 12345

static void hk_unset(hk_t *k) {
  atomic_store(&k->first_rc, HK_UNSET);
  atomic_store(&k->after_rc, HK_UNSET);
  atomic_store(&k->out_rc, HK_UNSET);
}

#define HK(hp) TAXI_CONTAINER_OF(hp, hk_t, h)

static int hk_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hk_t *k = HK(h);
  (void)fd;
  (void)ev;
  atomic_store(&k->inside, 1);
  if (atomic_fetch_add(&k->inputs, 1) == 0) {
    int rc = 0;
    switch (k->action) {
      case DO_SUSPEND:
        rc = taxi_reactor_suspend(k->r, h);
        break;
      case DO_MODIFY:
        rc = taxi_reactor_modify(k->r, h, TAXI_EV_WRITE);
        break;
      case DO_SUSPEND_RES:
        rc = taxi_reactor_suspend(k->r, h);
        if (rc == 0) rc = taxi_reactor_resume(k->r, h);
        break;
    }
    atomic_store(&k->first_rc, rc);
    if (k->gate) {
      pools_gate_pass(k->gate);
      atomic_store(&k->after_rc, taxi_reactor_modify(k->r, h, TAXI_EV_READ));
    }
  } else {
    pools_drain(k->sv[0]); /* later calls: take what is there */
  }
  atomic_store(&k->inside, 0);
  atomic_fetch_add(&k->inputs_done, 1);
  return 0;
}

/* Writable: counted, then suspended so that the always-writable socket
 * does not keep the pool busy. */
static int hk_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hk_t *k = HK(h);
  (void)fd;
  (void)ev;
  atomic_fetch_add(&k->outputs, 1);
  atomic_store(&k->out_rc, taxi_reactor_suspend(k->r, h));
  atomic_fetch_add(&k->outputs_done, 1);
  return 0;
}

static void hk_close(taxi_handler_t *h, taxi_handle_t fd) {
  hk_t *k = HK(h);
  (void)fd;
  if (atomic_load(&k->inside)) atomic_fetch_add(&k->early, 1);
  atomic_fetch_add(&k->closes, 1);
}

static const taxi_handler_ops_t hk_ops = {
    .input = hk_input, .output = hk_output, .close = hk_close};

/* The second handler: its input hook drains and counts. */
typedef struct marker {
  taxi_handler_t h;
  int sv[2];
  atomic_int inputs;
} marker_t;

static int marker_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)ev;
  pools_drain(fd);
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, marker_t, h)->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t marker_ops = {.input = marker_input};

/* ---- the dispatchers -------------------------------------------------- */

typedef struct disp {
  int kind;
  taxi_reactor_t *r;
  taxi_lf_pool_t *lf;
  taxi_hsha_pool_t *hsha;
  util_thread_t runner; /* DISP_REACTOR */
} disp_t;

static void run_reactor(void *arg) { (void)taxi_reactor_run(arg); }

/* False when the backend cannot have that dispatcher (nothing made). */
static bool disp_start(disp_t *d, int kind) {
  printf("\n    %s", disp_names[kind]);
  memset(d, 0, sizeof *d);
  d->kind = kind;
  d->r = pools_reactor();
  if (kind == DISP_LF_MANY && !pools_can_many_leaders(d->r)) {
    CU_ASSERT_EQUAL(taxi_reactor_destroy(d->r), 0);
    return false;
  }
  return true;
}

/* Start dispatching, once the handlers are registered. */
static void disp_go(disp_t *d) {
  switch (d->kind) {
    case DISP_REACTOR:
      CU_ASSERT_EQUAL_FATAL(util_thread_start(&d->runner, run_reactor, d->r),
                            0);
      break;
    case DISP_LF_ONE:
    case DISP_LF_MANY: {
      taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
      o.leaders =
          d->kind == DISP_LF_MANY ? TAXI_LEADERS_MANY : TAXI_LEADERS_ONE;
      CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&d->lf, d->r, &o), 0);
      CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(d->lf, 4), 0);
      break;
    }
    case DISP_HSHA: {
      taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
      o.workers = 4;
      CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&d->hsha, d->r, &o), 0);
      break;
    }
  }
}

static void disp_end(disp_t *d) {
  if (d->kind == DISP_REACTOR) {
    CU_ASSERT_EQUAL(taxi_reactor_stop(d->r), 0);
    util_thread_join(&d->runner, POOLS_WAIT_MS, "hook_state: taxi_reactor_run");
  }
  if (d->lf) CU_ASSERT_EQUAL(taxi_lf_destroy(d->lf), 0);
  if (d->hsha) CU_ASSERT_EQUAL(taxi_hsha_destroy(d->hsha), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(d->r), 0);
}

/* ---- fixture ---------------------------------------------------------- */

typedef struct fixture {
  disp_t d;
  hk_t k;
  marker_t m;
  pools_gate_t gate;
} fixture_t;

static bool fixture_start(fixture_t *f, int kind, int action, bool gated) {
  memset(f, 0, sizeof *f);
  if (!disp_start(&f->d, kind)) return false;
  pools_gate_init(&f->gate);
  f->k.r = f->d.r;
  hk_unset(&f->k);
  f->k.action = action;
  f->k.gate = gated ? &f->gate : NULL;
  CU_ASSERT_EQUAL(taxi_handler_init(&f->k.h, &hk_ops), 0);
  CU_ASSERT_EQUAL(taxi_handler_init(&f->m.h, &marker_ops), 0);
  pools_pair(f->k.sv);
  pools_pair(f->m.sv);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(f->d.r, f->k.sv[0], &f->k.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(f->d.r, f->m.sv[0], &f->m.h, TAXI_EV_READ), 0);
  disp_go(&f->d);
  /* The byte stays unread by the first input hook: the handle stays
   * readable throughout. */
  CU_ASSERT_EQUAL(util_write_byte(f->k.sv[1]), 1);
  return true;
}

/* Rounds of the marker, each waited for: whatever the re-arm after the
 * first hook let the handle report has been reported by then. */
static void marker_rounds(fixture_t *f) {
  for (int i = 0; i < 3; i++) {
    int seen = atomic_load(&f->m.inputs);
    CU_ASSERT_EQUAL(util_write_byte(f->m.sv[1]), 1);
    CU_ASSERT(pools_wait_count(&f->m.inputs, seen + 1, POOLS_WAIT_MS));
  }
}

static void fixture_end(fixture_t *f) {
  disp_end(&f->d);
  CU_ASSERT_EQUAL(atomic_load(&f->k.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&f->k.early), 0);
  CU_ASSERT_EQUAL(atomic_load(&f->gate.timeouts), 0);
  pools_close_pair(f->k.sv);
  pools_close_pair(f->m.sv);
}

/* ---- suspend ---------------------------------------------------------- */

static void suspended(int kind, bool from_hook) {
  fixture_t f;
  if (!fixture_start(&f, kind, from_hook ? DO_SUSPEND : DO_NOTHING, !from_hook))
    return;
  if (!from_hook) {
    CU_ASSERT_FATAL(pools_wait_count(&f.gate.entered, 1, POOLS_WAIT_MS));
    CU_ASSERT_EQUAL(taxi_reactor_suspend(f.d.r, &f.k.h), 0);
    pools_gate_open(&f.gate);
    /* The hook's own modify after the gate keeps the suspension. */
    CU_ASSERT(pools_wait_count(&f.gate.left, 1, POOLS_WAIT_MS));
  }
  CU_ASSERT(pools_wait_count(&f.k.inputs_done, 1, POOLS_WAIT_MS));
  marker_rounds(&f);
  /* Readable all along, and not reported: the re-arm kept it off. */
  CU_ASSERT_EQUAL(atomic_load(&f.k.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&f.k.first_rc), 0);
  /* Resumed, it is reported again. */
  CU_ASSERT_EQUAL(taxi_reactor_resume(f.d.r, &f.k.h), 0);
  CU_ASSERT(pools_wait_count(&f.k.inputs, 2, POOLS_WAIT_MS));
  fixture_end(&f);
}

static void test_suspend_in_hook(void) {
  for (int d = 0; d < DISP_COUNT; d++) suspended(d, true);
}

static void test_suspend_during_hook(void) {
  for (int d = 0; d < DISP_COUNT; d++) suspended(d, false);
}

/* Suspended and resumed inside the hook: the re-arm watches it again. */
static void test_suspend_resume_in_hook(void) {
  for (int d = 0; d < DISP_COUNT; d++) {
    fixture_t f;
    if (!fixture_start(&f, d, DO_SUSPEND_RES, false)) continue;
    CU_ASSERT(pools_wait_count(&f.k.inputs, 2, POOLS_WAIT_MS));
    CU_ASSERT_EQUAL(atomic_load(&f.k.first_rc), 0);
    fixture_end(&f);
  }
}

/* ---- modify ----------------------------------------------------------- */

static void modified(int kind) {
  fixture_t f;
  if (!fixture_start(&f, kind, DO_MODIFY, false)) return;
  CU_ASSERT(pools_wait_count(&f.k.outputs_done, 1, POOLS_WAIT_MS));
  marker_rounds(&f);
  /* Readable all along, but the re-arm watched for writing only. */
  CU_ASSERT_EQUAL(atomic_load(&f.k.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&f.k.outputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&f.k.first_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&f.k.out_rc), 0);
  fixture_end(&f);
}

static void test_modify_in_hook(void) {
  for (int d = 0; d < DISP_COUNT; d++) modified(d);
}

/* Another thread modifies while the hook waits on a gate (the hook does
 * not modify after it: a gate-less variant of the fixture's hook). */
static int gated_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hk_t *k = HK(h);
  (void)fd;
  (void)ev;
  atomic_store(&k->inside, 1);
  if (atomic_fetch_add(&k->inputs, 1) == 0) pools_gate_pass(k->gate);
  atomic_store(&k->inside, 0);
  return 0;
}

static const taxi_handler_ops_t gated_ops = {
    .input = gated_input, .output = hk_output, .close = hk_close};

static void modified_by_other(int kind) {
  fixture_t f;
  memset(&f, 0, sizeof f);
  if (!disp_start(&f.d, kind)) return;
  pools_gate_init(&f.gate);
  f.k.r = f.d.r;
  hk_unset(&f.k);
  f.k.gate = &f.gate;
  CU_ASSERT_EQUAL(taxi_handler_init(&f.k.h, &gated_ops), 0);
  CU_ASSERT_EQUAL(taxi_handler_init(&f.m.h, &marker_ops), 0);
  pools_pair(f.k.sv);
  pools_pair(f.m.sv);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(f.d.r, f.k.sv[0], &f.k.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(f.d.r, f.m.sv[0], &f.m.h, TAXI_EV_READ), 0);
  disp_go(&f.d);
  CU_ASSERT_EQUAL(util_write_byte(f.k.sv[1]), 1);
  CU_ASSERT_FATAL(pools_wait_count(&f.gate.entered, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_modify(f.d.r, &f.k.h, TAXI_EV_WRITE), 0);
  pools_gate_open(&f.gate);
  CU_ASSERT(pools_wait_count(&f.k.outputs, 1, POOLS_WAIT_MS));
  marker_rounds(&f);
  CU_ASSERT_EQUAL(atomic_load(&f.k.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&f.k.outputs), 1);
  fixture_end(&f);
}

static void test_modify_during_hook(void) {
  for (int d = 0; d < DISP_COUNT; d++) modified_by_other(d);
}

/* ---- after remove ----------------------------------------------------- */

/* The hook waits on the gate; another thread removes the handler, then
 * suspend, resume and modify say TAXI_ENOENT, there and in the hook. */
static void removed(int kind) {
  fixture_t f;
  if (!fixture_start(&f, kind, DO_NOTHING, true)) return;
  CU_ASSERT_FATAL(pools_wait_count(&f.gate.entered, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_remove(f.d.r, &f.k.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_modify(f.d.r, &f.k.h, TAXI_EV_WRITE),
                  TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(f.d.r, &f.k.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_resume(f.d.r, &f.k.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(f.d.r, &f.k.h), TAXI_ENOENT);
  /* Not closed while its hook runs. */
  CU_ASSERT_EQUAL(atomic_load(&f.k.closes), 0);
  pools_gate_open(&f.gate);
  CU_ASSERT(pools_wait_count(&f.k.closes, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&f.k.after_rc), TAXI_ENOENT);
  fixture_end(&f);
}

static void test_after_remove(void) {
  for (int d = 0; d < DISP_COUNT; d++) removed(d);
}

static CU_TestInfo hook_state_tests[] = {
    {"suspend inside the hook survives the re-arm", test_suspend_in_hook},
    {"suspend by another thread during the hook survives the re-arm",
     test_suspend_during_hook},
    {"suspend then resume inside the hook: watched again",
     test_suspend_resume_in_hook},
    {"modify inside the hook: the re-arm watches the new events",
     test_modify_in_hook},
    {"modify by another thread during the hook: the re-arm watches them",
     test_modify_during_hook},
    {"after remove, during the hook: suspend, resume, modify say ENOENT",
     test_after_remove},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_hook_state = {
    "suspend and modify around a hook", hook_state_tests, 120, NULL};
