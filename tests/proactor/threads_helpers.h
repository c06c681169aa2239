/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/threads_helpers.h - what the tests of who dispatches
 * completions share.
 */
#ifndef TAXI_TESTS_PROACTOR_THREADS_HELPERS_H
#define TAXI_TESTS_PROACTOR_THREADS_HELPERS_H

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define EC_THREADS 8

/* Defined in one of the files, used in others. */
int ec_destroy_pool(void *arg);
void test_pool_echo_exactly_once(void);

#endif /* TAXI_TESTS_PROACTOR_THREADS_HELPERS_H */
