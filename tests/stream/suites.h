/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/suites.h - the stream layer's suite: one program that runs
 * every test over one dispatcher x backend pair ("lf:epoll"), or over
 * every compiled-in pair; see main.c.
 */
#ifndef TAXI_TESTS_STREAM_SUITES_H
#define TAXI_TESTS_STREAM_SUITES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "runner.h"
#include "util.h"
#include "net_helpers.h"

/* The pair under test, read from the running suite's name by st_io_create
 * and st_pair_load: a test that looks at them before it makes a context
 * calls st_pair_load first (it may be the suite's first test). */
extern taxi_io_dispatcher_t st_dispatcher;
extern const char *st_backend;
void st_pair_load(void);

/* A context for the pair, run by a thread of the test. */
typedef struct st_io {
  taxi_io_t *io;
  util_thread_t thread;
  int run_rc;
} st_io_t;

/* Create the context for the pair (threads: 1 for reactor, 3 for lf,
 * 2 for hsha and proactor).  CU assertions; returns 0 or -1. */
int st_io_create(st_io_t *c);
/* The same, streams spread over a proactors group as `spread` says. */
int st_io_create_spread(st_io_t *c, taxi_group_spread_t spread);
/* The same with the options of base besides (its dispatcher, backend
 * and threads are the pair's). */
int st_io_create_with(st_io_t *c, const taxi_io_options_t *base);
/* Start taxi_io_run in a thread. */
void st_io_run(st_io_t *c);
/* taxi_io_stop, wait (bounded), join; returns what taxi_io_run returned
 * (TAXI_ESTOPPED; also when it was not running). */
int st_io_stop(st_io_t *c);
/* Stop if running, then taxi_io_destroy. */
void st_io_destroy(st_io_t *c);

/* A listener on 127.0.0.1:0 of c with options (NULL: defaults); returns
 * its port, or -1. */
int st_listen(st_io_t *c, const taxi_listener_options_t *o, taxi_accept_fn fn,
              void *arg, taxi_listener_t **out);

/* A blocking TCP client socket connected to 127.0.0.1:port, or -1: 10 s
 * time-outs, TCP_NODELAY (net_connect_loopback). */
int st_connect(int port);
/* The same with SO_RCVBUF set to rcvbuf bytes first (0: the default). */
int st_connect_rcvbuf(int port, int rcvbuf);
/* Send all / receive exactly n bytes on the clients above (blocking,
 * bounded by their time-outs): net_send_all and net_recv_all of
 * net_helpers.h. */
/* Read until EOF (bounded); returns bytes read, or -1. */
long st_recv_to_eof(int fd, void *buf, size_t cap);

/* The byte at position i of the test stream numbered `seed`. */
unsigned char st_byte(unsigned seed, uint64_t i);
/*
 * An echo conversation over one connection to port: `total` bytes in
 * random segments of 1..max_seg bytes, sent while the echo is read back
 * (poll), every byte checked.  Returns 0, or -1 after printing why.
 */
int st_echo_client(int port, size_t total, size_t max_seg, unsigned seed);

/* Wait (polling) until pred(arg) or max_ms; 1 if it held. */
int st_wait(int (*pred)(void *), void *arg, int max_ms);

/* An echo server: read_start, write back what arrives (PAUSE_READING),
 * close at EOF.  Counts in the stats below. */
typedef struct st_echo {
  atomic_int accepted, closed, eofs, write_errors;
  atomic_long max_queued;
  long high;
} st_echo_t;
void st_echo_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg);

/* Plain UDP sockets for the datagram tests (dgram_helpers.c).  The port
 * an endpoint is bound to; a socket bound to 127.0.0.1:0 (blocking, 10 s
 * receive time-out; its port in *port unless NULL); recv, again after
 * EINTR; sendto 127.0.0.1:port, the whole datagram asserted sent. */
unsigned st_dgram_port(taxi_dgram_t *d);
int st_udp_socket(unsigned *port);
ssize_t st_udp_recv(int fd, void *buf, size_t len);
void st_udp_send(int fd, unsigned port, const void *buf, size_t len);

extern CU_TestInfo st_tests_echo[];
extern CU_TestInfo st_tests_flow[];
extern CU_TestInfo st_tests_records[];
extern CU_TestInfo st_tests_connect[];
extern CU_TestInfo st_tests_threads[];
extern CU_TestInfo st_tests_misc[];
extern CU_TestInfo st_tests_bad_input[];
extern CU_TestInfo st_tests_detach[];
extern CU_TestInfo st_tests_group[];
extern CU_TestInfo st_tests_closing[];
extern CU_TestInfo st_tests_adopt[];
extern CU_TestInfo st_tests_cross[];
extern CU_TestInfo st_tests_peer[];
extern CU_TestInfo st_tests_post[];
extern CU_TestInfo st_tests_counters[];
extern CU_TestInfo st_tests_timeouts[];
extern CU_TestInfo st_tests_pipe[];
extern CU_TestInfo st_tests_resolve[];
extern CU_TestInfo st_tests_accept[];
extern CU_TestInfo st_tests_dgram[];
extern CU_TestInfo st_tests_dgram_gso[];
extern CU_TestInfo st_tests_dgram_order[];
extern CU_TestInfo st_tests_dgram_held[];
extern CU_TestInfo st_tests_dgram_sizes[];
extern CU_TestInfo st_tests_dgram_senders[];
extern CU_TestInfo st_tests_pooled[];
extern CU_TestInfo st_tests_edge[];
extern CU_TestInfo st_tests_batch[];
extern CU_TestInfo st_tests_handoff[];
extern CU_TestInfo st_tests_one_thread[];

#endif /* TAXI_TESTS_STREAM_SUITES_H */
