/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/bound_fixture.h - what the bound-association test files
 * share: a pool with one multiplexed connection (taxi/lf_bound.h) over a
 * socketpair, the frame format both ends speak, and a back end thread on
 * the other end that answers requests in a random order.
 */
#ifndef TAXI_TESTS_POOLS_BOUND_FIXTURE_H
#define TAXI_TESTS_POOLS_BOUND_FIXTURE_H

#include "suites.h"

#include <stdint.h>

/* A frame: this header, then the body.  Requests and replies alike. */
typedef struct bd_header {
  uint32_t size;  /* header and body, bytes */
  uint32_t flags; /* BD_* */
  uint64_t id;
} bd_header_t;

#define BD_HEADER ((size_t)sizeof(bd_header_t))
#define BD_NOREPLY 1u   /* a request the back end does not answer */
#define BD_BAD 0x0badu  /* a reply the parse hook refuses (TAXI_EPERM) */
#define BD_MAX_BODY 64u /* the bodies the back end echoes */

/* The parse hook's tricks, for the tests of what hooks may not do. */
typedef struct bd_hook_calls {
  atomic_int armed;
  atomic_int await_rc, send_rc, destroy_rc; /* 1: not called */
} bd_hook_calls_t;

typedef struct bd_test {
  taxi_reactor_t *r;
  taxi_lf_pool_t *p;
  taxi_lf_mux_t *m;
  int sv[2]; /* sv[0]: the mux's (it closes it); sv[1]: the back end's */
  /* The unknown-id hook's counters. */
  atomic_int unknown;
  atomic_ullong unknown_id;   /* the last one's id */
  atomic_int unknown_len;     /* ... and its body's length */
  bd_hook_calls_t in_parse;   /* calls from the parse hook */
  bd_hook_calls_t in_unknown; /* calls from the unknown-id hook */
  /* The back end thread. */
  util_thread_t backend;
  int backend_running;
  atomic_int stop;
  int batch;  /* answer when this many requests wait */
  int strict; /* 1: only then; 0: also when no more come for a while */
  uint64_t seed;
  atomic_long requests, replies;
  atomic_int backend_failed;
} bd_test_t;

/* A pool of `threads` spawned threads over a fresh reactor, and a mux over
 * a socketpair.  With backend, a back end thread serves sv[1] (batch and
 * strict as above); without, the test writes sv[1] itself. */
bd_test_t *bd_new(unsigned threads, int backend, int batch, int strict);
/* The same, the pool made with options o (NULL: the defaults). */
bd_test_t *bd_new_with(unsigned threads, int backend, int batch, int strict,
                       const taxi_lf_options_t *o);
/* Stop the back end and join it: its counters are final afterwards (a
 * reply may be read before the back end has counted it). */
void bd_stop_backend(bd_test_t *t);
/* Stop the back end, destroy the mux, the pool and the reactor. */
void bd_free(bd_test_t *t);

/* Write one frame to fd (blocking until all is written): 0 or -1. */
int bd_write_frame(int fd, uint64_t id, uint32_t flags, const void *body,
                   size_t len);
/* Send a request over the mux. */
int bd_send(taxi_lf_mux_t *m, uint64_t id, uint32_t flags, const void *body,
            size_t len);
/* The body a request with this id carries (len bytes, from the id). */
void bd_fill(uint64_t id, unsigned char *body, size_t len);
/* The length of that body: 1..BD_MAX_BODY from the id. */
size_t bd_len(uint64_t id);
/* Wait until the unknown-id hook has run `n` times in all; 1, or 0. */
int bd_wait_unknown(bd_test_t *t, int n);

/* The mux's options with this file's hooks. */
taxi_lf_mux_options_t bd_options(bd_test_t *t);

#endif /* TAXI_TESTS_POOLS_BOUND_FIXTURE_H */
