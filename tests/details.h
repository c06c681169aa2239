/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/details.h - what the files of the test_details program share:
 * the check that a call was refused with its code and a detail naming
 * the function and the field, and the program's suites.
 *
 *   test_details.c  every refused option of every create; main()
 *   details_busy.c  `threads` of the I/O context; the cases of TAXI_EBUSY
 */
#ifndef TAXI_TESTS_DETAILS_H
#define TAXI_TESTS_DETAILS_H

#include <stdbool.h>
#include <stddef.h>

#include "runner.h"
#include "taxi/taxi.h"

/* Make the detail one that no case expects, so that a call that fails
 * without recording its own cannot pass on the one before. */
void reset_detail(void);

/* rc is `code`, and the detail begins with "fn: " and contains `field`;
 * `call` and `line` name the call in the message when it is not. */
void check(int rc, int code, const char *fn, const char *field,
           const char *call, int line);

#define REFUSED(call, code, fn, field)                     \
  do {                                                     \
    reset_detail();                                        \
    check((call), (code), (fn), (field), #call, __LINE__); \
  } while (0)

/* A create given options o (and ctx: the reactor, for the creates on
 * one; else unused); *made: it gave an object anyway (it must not). */
typedef int (*details_create_fn)(const void *o, void *ctx, bool *made);

/* The create `fn` as a details_create_fn named create_NAME, making an
 * object of type `type`: fn(&obj, o), or fn(&obj, ctx, o) with _ON. */
#define DETAILS_CREATE(name, type, fn)                             \
  static int create_##name(const void *o, void *ctx, bool *made) { \
    type *obj = NULL;                                              \
    (void)ctx;                                                     \
    int rc = fn(&obj, o);                                          \
    *made = obj != NULL;                                           \
    return rc;                                                     \
  }
#define DETAILS_CREATE_ON(name, type, fn)                          \
  static int create_##name(const void *o, void *ctx, bool *made) { \
    type *obj = NULL;                                              \
    int rc = fn(&obj, ctx, o);                                     \
    *made = obj != NULL;                                           \
    return rc;                                                     \
  }

/* One step of a create's refusals: set one integer field (of 1, 2, 4 or
 * 8 bytes) of a structure of options; then, if code is not 0, the create
 * must be refused with code and a detail naming `field`.  The steps of a
 * table run in order over one structure, so that a step may build on the
 * ones before (a field set back to its default, or one another needs). */
typedef struct field_step {
  size_t at, width; /* the field's offset and size */
  long long value;
  int code;          /* 0: only set the field */
  const char *field; /* what the detail must name */
} field_step_t;

#define FIELD_OF(type, member) \
  offsetof(type, member), sizeof(((type *)0)->member)
#define SET(type, member, value) \
  { FIELD_OF(type, member), (long long)(value), 0, NULL }
#define REFUSE(type, member, value, code, field) \
  { FIELD_OF(type, member), (long long)(value), (code), (field) }

/* Run the n steps over `fields` (the options, or options nested in
 * them), calling create(opts, ctx) where a step expects a refusal; `fn`
 * is the name the details must begin with. */
void refuse_steps(void *fields, const field_step_t *steps, size_t n,
                  details_create_fn create, const void *opts, void *ctx,
                  const char *fn);

/* A readiness backend that lets one thread wait at a time (poll, select,
 * wsapoll), or NULL if none works here. */
const char *single_wait_backend(void);

/* Callbacks that do nothing, for the calls that need one. */
void details_mq_run(taxi_mq_t *q, taxi_mq_item_t *item, void *arg);
int details_on_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act);
void details_completion_none(taxi_op_t *op, int status, size_t bytes,
                             void *act);

extern const taxi_test_suite_t details_threads_suite;
extern const taxi_test_suite_t details_busy_suite;

#endif /* TAXI_TESTS_DETAILS_H */
