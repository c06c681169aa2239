/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/sets_helpers.h - what the test files of the handle sets
 * (taxi/lf_sets.h) and of moving handlers share: the backend, clients,
 * a TCP echo server over the sets, movable handlers on socketpairs.
 */
#ifndef TAXI_TESTS_POOLS_SETS_HELPERS_H
#define TAXI_TESTS_POOLS_SETS_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "taxi/taxi.h"
#include "../runner.h"
#include "../util.h"

const taxi_test_suite_t *pools_sets_suite(const char *backend);

#define SETS_WAIT_MS 10000 /* bound of every wait for the library */
#define SETS_QUIET_MS 300  /* how long "nothing happens" is watched */
#define SETS_CLIENT_TIMEOUT_S 5
#define SETS_MAX_SETS 8      /* sets the tests use at most */
#define SETS_MAX_CONNS 128   /* connections one server accepts at most */
#define SETS_MAX_ACCEPTORS 8 /* listeners one server makes at most */

typedef struct sets_server sets_server_t;

typedef struct sets_conn {
  taxi_handler_t h;
  int fd;
  int set; /* the set it was registered with, -1 when not known up front */
  sets_server_t *srv;
  atomic_int inputs;
  atomic_int closes;
} sets_conn_t;

typedef struct sets_acceptor {
  taxi_handler_t h;
  int fd;
  unsigned set;
  sets_server_t *srv;
  atomic_int closes;
} sets_acceptor_t;

struct sets_server {
  taxi_lf_sets_t *s;
  atomic_int balance; /* TAXI_BALANCE_KERNEL or _ACCEPTOR */
  sets_acceptor_t acc[SETS_MAX_ACCEPTORS];
  atomic_int made;             /* acceptors made */
  atomic_int listener_closes;  /* acceptors' close hooks */
  atomic_int listener_bad_set; /* acceptor made for a set out of range */
  sets_conn_t conns[SETS_MAX_CONNS];
  atomic_int nconns;                  /* connections accepted */
  atomic_int accepted[SETS_MAX_SETS]; /* registered, per set */
  atomic_int registered;              /* the sum of accepted */
  atomic_int register_errors, accept_errors, overflow, bad_index;
  atomic_int wrong_set;   /* a hook ran in another set's pool */
  atomic_int echo_errors; /* writing an echo failed */
  atomic_int closes;      /* connections' close hooks */
};

typedef struct sets_mtest sets_mtest_t;

enum { MOVE_NONE = 0, MOVE_ON_FIRST = 1 };

typedef struct sets_mconn {
  taxi_handler_t h;
  int sv[2];
  sets_mtest_t *t;
  uint32_t index;
  int mode;     /* MOVE_NONE, MOVE_ON_FIRST */
  int target;   /* MOVE_ON_FIRST: the set to move to */
  int gate;     /* the input hook blocks on t->gate_open first */
  int hook_ret; /* what the input hook returns (0 or -1) */
  /* Hook-only state (the hooks of one handler never overlap). */
  unsigned char buf[64];
  size_t have;
  uint32_t next_seq;
  int first_set;
  int move_rc, move2_rc;
  /* Shared with the test thread. */
  atomic_int inputs, timeouts, closes;
  atomic_int errors;    /* a frame out of order or of another connection */
  atomic_int wrong_set; /* MOVE_ON_FIRST: a later frame not on target */
  atomic_int last_set;  /* the set whose pool ran the last hook */
  atomic_int timeout_set;
  atomic_int frames;
  atomic_int on_set[SETS_MAX_SETS]; /* input hooks run per set */
  atomic_int outside;               /* hooks run outside every pool */
  /* The mover thread's protocol: it moves the handler to set w and sets
   * this to 2 * w; a hook that runs on set w makes it 2 * w + 1 (arrived),
   * and only then may the mover move it again. -1: not taking part. */
  atomic_int where;
} sets_mconn_t;

struct sets_mtest {
  taxi_lf_sets_t *s;
  atomic_int gate_entered, gate_open, gate_timeouts;
};

/* Defined in one of the files, used in others. */
extern const char *sets_backend;
taxi_lf_sets_t *sets_make(unsigned n, unsigned threads);
size_t sets_handles(taxi_reactor_t *r);
int sets_wait_handles(taxi_reactor_t *r, size_t want);
void sets_destroy(taxi_lf_sets_t *s);
int client_connect(unsigned port);
void sets_pair(int sv[2]);
int msg_send(int fd, uint32_t conn, uint32_t seq);
int msg_expect(int fd, uint32_t conn, uint32_t seq);
extern const taxi_handler_ops_t conn_ops;
taxi_handler_t *make_acceptor(unsigned set, taxi_handle_t listener, void *arg);
sets_server_t *server_new(taxi_lf_sets_t *s);
int wait_count(atomic_int *counter, int goal);
int clients_echo(unsigned port, int *fds, int n);
void clients_close(int *fds, int n);
void mtest_init(sets_mtest_t *t, taxi_lf_sets_t *s);
void mconn_init(sets_mconn_t *c, sets_mtest_t *t, uint32_t index);
void mconn_close_client(sets_mconn_t *c);
void test_move_from_hook(void);
void test_move_during_traffic(void);
void test_move_suspended(void);
void test_move_deferred_pending(void);
void test_move_deferred_removed(void);
void test_move_bad_input(void);
void test_move_except_unsupported(void);
void test_sets_bad_input(void);
void test_listen_make_fails(void);
void test_sets_shutdown(void);
void test_destroy_from_hook(void);
void test_destroy_closes(void);

#endif /* TAXI_TESTS_POOLS_SETS_HELPERS_H */
