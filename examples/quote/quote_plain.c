/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_plain.c - the four concurrency models of the thread-pool column
 * that predate the patterns, on plain blocking sockets and POSIX threads
 * (winpthreads under MinGW), as the column's C code does it:
 *
 *   iterative              one thread accepts a connection and answers its
 *                          requests, one at a time, until the client closes
 *                          it; then the next connection.
 *   thread-per-connection  the main thread accepts; each connection gets a
 *                          thread of its own for its lifetime.
 *   thread-per-request     the main thread polls the listener and every
 *                          idle connection; each request that arrives gets
 *                          a new thread, which answers it and hands the
 *                          connection back to the poller.
 *   handle-queue           the column's section 3 design: the same poller
 *                          puts each ready handle on a bounded Handle_Queue
 *                          (100 handles, blocking when full: the column's
 *                          flow control) served by a pool of --threads
 *                          threads.
 *
 * The column's C version lets pool threads FD_CLR the poller's handle set
 * and lets a handle be queued twice (its section 3.2 says so); here the
 * poller alone owns its set: a handle leaves it when queued and comes
 * back through a locked list and a wake-up byte once its request is
 * answered, so one connection is never read by two threads at once.
 *
 * Stopping: the poller and the accept loops wait at most 200 ms at a time
 * and then look at `stopping`; threads blocked reading a connection are
 * woken by shutting every open connection down (the registry below).
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../echo_common.h"
#include "quote_net.h"
#include "quote_server.h"

#define WAIT_MS 200
#define MAX_CONNS 16384 /* open connections at most; more are refused */
#define QUEUE_SIZE 100  /* the column's MAX_HANDLES */
#define STACK_SIZE (256 * 1024)

enum model { ITERATIVE, PER_CONNECTION, PER_REQUEST, HANDLE_QUEUE };

static const char *const model_names[] = {"iterative", "thread-per-connection",
                                          "thread-per-request", "handle-queue"};

int quote_plain_model(const char *name) {
  for (size_t i = 0; i < sizeof model_names / sizeof *model_names; i++)
    if (strcmp(name, model_names[i]) == 0) return 1;
  return 0;
}

/* ---- the registry of open connections -----------------------------------
 * Every open connection has a slot; the slot number names it between
 * threads (queue, hand-back list, thread argument), so nothing is
 * allocated per request.  At stop every one is shut down. */
static struct {
  pthread_mutex_t lock;
  taxi_handle_t fd[MAX_CONNS];
  size_t free_slots[MAX_CONNS];
  size_t nfree;
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void reg_init(void) {
  for (size_t i = 0; i < MAX_CONNS; i++) {
    reg.fd[i] = TAXI_INVALID_HANDLE;
    reg.free_slots[i] = MAX_CONNS - 1 - i;
  }
  reg.nfree = MAX_CONNS;
}

/* A slot for fd, or -1 when full (the caller closes fd). */
static long reg_add(taxi_handle_t fd) {
  long slot = -1;
  pthread_mutex_lock(&reg.lock);
  if (reg.nfree) {
    slot = (long)reg.free_slots[--reg.nfree];
    reg.fd[slot] = fd;
  }
  pthread_mutex_unlock(&reg.lock);
  return slot;
}

/* Close the connection and free its slot; under the lock, so that a
 * shutdown of everything never meets a descriptor number reused. */
static void reg_close(long slot) {
  pthread_mutex_lock(&reg.lock);
  echo_close(reg.fd[slot]);
  reg.fd[slot] = TAXI_INVALID_HANDLE;
  reg.free_slots[reg.nfree++] = (size_t)slot;
  pthread_mutex_unlock(&reg.lock);
}

static void reg_shutdown_all(void) {
  pthread_mutex_lock(&reg.lock);
  for (size_t i = 0; i < MAX_CONNS; i++)
    if (reg.fd[i] != TAXI_INVALID_HANDLE) quote_shutdown(reg.fd[i]);
  pthread_mutex_unlock(&reg.lock);
}

/* ---- serving ------------------------------------------------------------- */

static struct quote_server *server;

/* Receive one whole request on a blocking socket, answer it.  Returns 1,
 * or 0 when the connection is over (closed by the client, an error, a
 * shutdown at stop). */
static int serve_one(taxi_handle_t fd) {
  unsigned char req[QUOTE_REQUEST_SIZE], reply[QUOTE_REPLY_SIZE];
  size_t have = 0, n;
  while (have < sizeof req) {
    if (echo_recv(fd, req + have, sizeof req - have, &n) != ECHO_IO_OK)
      return 0;
    have += n;
  }
  quote_answer(&server->table, req, reply);
  for (size_t sent = 0; sent < sizeof reply; sent += n)
    if (echo_send(fd, reply + sent, sizeof reply - sent, &n) != ECHO_IO_OK)
      return 0;
  atomic_fetch_add_explicit(&server->requests, 1, memory_order_relaxed);
  return 1;
}

static int stopping(void) {
  return atomic_load_explicit(&server->stopping, memory_order_relaxed);
}

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Accept one connection, blocking, registered: its slot, or -1 (nothing
 * this time; `stopping` may have been set). */
static long accept_one(taxi_handle_t listener) {
  taxi_handle_t fd;
  long slot;
  if (quote_wait_readable(listener, WAIT_MS) != 1) return -1;
  switch (echo_accept(listener, &fd)) {
    case ECHO_IO_OK:
      break;
    case ECHO_IO_AGAIN:
      return -1;
    default: /* out of descriptors, most likely: let some close */
      atomic_fetch_add(&server->refused, 1);
      pause_ms(10);
      return -1;
  }
  if (quote_set_blocking(fd) != 0 || (slot = reg_add(fd)) < 0) {
    atomic_fetch_add(&server->refused, 1);
    echo_close(fd);
    return -1;
  }
  return slot;
}

/* Threads that are not joined (per connection, per request) are counted,
 * so that the stop waits for them. */
static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t active_done = PTHREAD_COND_INITIALIZER;
static unsigned long active;

static void active_exit(void) {
  pthread_mutex_lock(&active_lock);
  if (--active == 0) pthread_cond_broadcast(&active_done);
  pthread_mutex_unlock(&active_lock);
}

static void active_wait(void) {
  pthread_mutex_lock(&active_lock);
  while (active) pthread_cond_wait(&active_done, &active_lock);
  pthread_mutex_unlock(&active_lock);
}

/* Start fn(slot) in a detached thread with a small stack (a thousand of
 * them must fit).  0, or -1 when the system refuses a thread. */
static int spawn(void *(*fn)(void *), long slot) {
  pthread_attr_t attr;
  pthread_t t;
  int rc;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, STACK_SIZE);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&active_lock);
  active++;
  pthread_mutex_unlock(&active_lock);
  rc = pthread_create(&t, &attr, fn, (void *)(intptr_t)slot);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    active_exit();
    return -1;
  }
  return 0;
}

/* ---- iterative and thread-per-connection ----------------------------------
 */

static void *iterative_thread(void *arg) {
  taxi_handle_t listener = *(taxi_handle_t *)arg;
  while (!stopping()) {
    long slot = accept_one(listener);
    if (slot < 0) continue;
    while (!stopping() && serve_one(reg.fd[slot])) {
    }
    reg_close(slot);
  }
  return NULL;
}

/* One thread accepts and serves; this one only waits for the stop, to
 * shut down the connection that thread may be blocked reading. */
static int run_iterative(taxi_handle_t listener) {
  pthread_t t;
  if (pthread_create(&t, NULL, iterative_thread, &listener) != 0) {
    fprintf(stderr, "quote_server: cannot start the serving thread\n");
    return -1;
  }
  while (!stopping()) pause_ms(50);
  reg_shutdown_all();
  pthread_join(t, NULL);
  return 0;
}

static void *connection_thread(void *arg) {
  long slot = (long)(intptr_t)arg;
  while (!stopping() && serve_one(reg.fd[slot])) {
  }
  reg_close(slot);
  active_exit();
  return NULL;
}

static void run_per_connection(taxi_handle_t listener) {
  while (!stopping()) {
    long slot = accept_one(listener);
    if (slot < 0) continue;
    if (spawn(connection_thread, slot) != 0) {
      atomic_fetch_add(&server->refused, 1);
      reg_close(slot);
    }
  }
  reg_shutdown_all();
  active_wait();
}

/* ---- the poller of thread-per-request and handle-queue ------------------- */

/* Connections whose request was answered, on their way back to the poller. */
static struct {
  pthread_mutex_t lock;
  long slot[MAX_CONNS];
  size_t count;
  taxi_handle_t wake[2]; /* a byte on wake[1] wakes the poller */
} back = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* After a request: the connection goes back to the poller, or is closed. */
static void hand_back(long slot, int alive) {
  size_t n;
  if (!alive) {
    reg_close(slot);
    return;
  }
  pthread_mutex_lock(&back.lock);
  back.slot[back.count++] = slot;
  pthread_mutex_unlock(&back.lock);
  /* If the pipe is full, the poller has bytes to read and will come. */
  (void)echo_send(back.wake[1], "", 1, &n);
}

/* The column's Handle_Queue: a bounded ring with two conditions. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t notempty, notfull;
  long ring[QUEUE_SIZE];
  size_t head, count;
  int closed;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .notempty = PTHREAD_COND_INITIALIZER,
           .notfull = PTHREAD_COND_INITIALIZER};

static void queue_insert(long slot) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QUEUE_SIZE)
    pthread_cond_wait(&queue.notfull, &queue.lock);
  queue.ring[(queue.head + queue.count++) % QUEUE_SIZE] = slot;
  pthread_cond_signal(&queue.notempty);
  pthread_mutex_unlock(&queue.lock);
}

/* The next handle, or -1 once the queue is closed and empty. */
static long queue_remove(void) {
  long slot = -1;
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0 && !queue.closed)
    pthread_cond_wait(&queue.notempty, &queue.lock);
  if (queue.count) {
    slot = queue.ring[queue.head];
    queue.head = (queue.head + 1) % QUEUE_SIZE;
    queue.count--;
    pthread_cond_signal(&queue.notfull);
  }
  pthread_mutex_unlock(&queue.lock);
  return slot;
}

static void queue_close(void) {
  pthread_mutex_lock(&queue.lock);
  queue.closed = 1;
  pthread_cond_broadcast(&queue.notempty);
  pthread_mutex_unlock(&queue.lock);
}

static void *pool_thread(void *arg) {
  long slot;
  (void)arg;
  while ((slot = queue_remove()) >= 0) hand_back(slot, serve_one(reg.fd[slot]));
  return NULL;
}

static void *request_thread(void *arg) {
  long slot = (long)(intptr_t)arg;
  hand_back(slot, serve_one(reg.fd[slot]));
  active_exit();
  return NULL;
}

/* The poller's set: [0] the wake-up socket, [1] the listener, then the
 * idle connections (slots in idle[], sockets in fds[]). */
static taxi_handle_t fds[MAX_CONNS + 2];
static unsigned char ready[MAX_CONNS + 2];
static long idle[MAX_CONNS + 2];

/* Returns 0 after the stop, or -1 if the poll failed. */
static int run_poller(taxi_handle_t listener, enum model m) {
  struct quote_poll *p = quote_poll_new(MAX_CONNS + 2);
  size_t n = 2;
  const char *what = "out of memory";
  int status = 0;

  if (p == NULL) {
    fprintf(stderr, "quote_server: %s\n", what);
    return -1;
  }
  fds[0] = back.wake[0];
  fds[1] = listener;
  while (!stopping()) {
    size_t keep = 2, count;
    char drain[256];
    if (quote_poll_wait(p, fds, n, WAIT_MS, ready, &what) < 0) {
      fprintf(stderr, "quote_server: %s\n", what);
      status = -1;
      break;
    }
    /* Each ready connection leaves the set for a thread. */
    for (size_t i = 2; i < n; i++) {
      if (!ready[i]) {
        fds[keep] = fds[i];
        idle[keep++] = idle[i];
      } else if (m == HANDLE_QUEUE) {
        queue_insert(idle[i]);
      } else if (spawn(request_thread, idle[i]) != 0) {
        atomic_fetch_add(&server->refused, 1);
        reg_close(idle[i]);
      }
    }
    n = keep;
    if (ready[0])
      while (echo_recv(back.wake[0], drain, sizeof drain, &count) ==
             ECHO_IO_OK) {
      }
    pthread_mutex_lock(&back.lock);
    for (size_t i = 0; i < back.count; i++) {
      fds[n] = reg.fd[back.slot[i]];
      idle[n++] = back.slot[i];
    }
    back.count = 0;
    pthread_mutex_unlock(&back.lock);
    if (ready[1]) {
      long slot = accept_one(listener);
      if (slot >= 0) {
        fds[n] = reg.fd[slot];
        idle[n++] = slot;
      }
    }
  }
  quote_poll_free(p);
  return status;
}

int quote_run_plain(struct quote_server *srv) {
  taxi_handle_t listener;
  char bound[64];
  unsigned port;
  enum model m = ITERATIVE;
  pthread_t *pool = NULL;
  unsigned started = 0;
  int status = QUOTE_EXIT_OK;

  server = srv;
  for (size_t i = 0; i < sizeof model_names / sizeof *model_names; i++)
    if (strcmp(srv->model, model_names[i]) == 0) m = (enum model)i;
  reg_init();
  if (echo_listen(srv->host, srv->port, &listener, bound, sizeof bound,
                  &port) != 0) {
    fprintf(stderr, "quote_server: %s\n", echo_last_error());
    return QUOTE_EXIT_ERROR;
  }
  if (m == PER_REQUEST || m == HANDLE_QUEUE) {
    if (quote_pair(back.wake) != 0) {
      fprintf(stderr, "quote_server: cannot make the wake-up pair\n");
      echo_close(listener);
      return QUOTE_EXIT_ERROR;
    }
  }
  if (m == HANDLE_QUEUE) {
    pool = calloc(srv->threads, sizeof *pool);
    for (; pool && started < srv->threads; started++)
      if (pthread_create(&pool[started], NULL, pool_thread, NULL) != 0) break;
    if (started < srv->threads) {
      fprintf(stderr, "quote_server: cannot start %u pool threads\n",
              srv->threads);
      srv->stopping = 1;
      status = QUOTE_EXIT_ERROR;
    }
  }
  if (m == HANDLE_QUEUE)
    printf("quote_server: model=%s threads=%u\n", srv->model, srv->threads);
  else /* one thread, or one per connection or request */
    printf("quote_server: model=%s\n", srv->model);
  printf("quote_server: listening on %s\n", bound);
  fflush(stdout); /* scripts wait for this line */

  switch (m) {
    case ITERATIVE:
      if (run_iterative(listener) != 0) status = QUOTE_EXIT_ERROR;
      break;
    case PER_CONNECTION:
      run_per_connection(listener);
      break;
    case PER_REQUEST:
    case HANDLE_QUEUE:
      if (status == QUOTE_EXIT_OK && run_poller(listener, m) != 0)
        status = QUOTE_EXIT_ERROR;
      reg_shutdown_all(); /* wakes the threads reading a connection */
      queue_close();
      for (unsigned i = 0; i < started; i++) pthread_join(pool[i], NULL);
      active_wait();
      echo_close(back.wake[0]);
      echo_close(back.wake[1]);
      break;
  }
  free(pool);
  echo_close(listener);
  for (long i = 0; i < MAX_CONNS; i++)
    if (reg.fd[i] != TAXI_INVALID_HANDLE) reg_close(i);
  return status;
}
