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
