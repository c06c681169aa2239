/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proactor_echo.c - an echo server written against the Proactor alone:
 * one proactor per thread (taxi/proactor_group.h), connections spread over
 * them, bytes received into the proactor's buffer pool by one multishot
 * read per connection and echoed from those same buffers, with no copy.
 *
 *   proactor_echo --port P [--host ADDR] [--backend NAME] [--threads N]
 *                 [--buffer-size BYTES] [--no-registered-files]
 *
 * prints "proactor_echo: backend=B threads=N features=0xF listening on
 * HOST:PORT", echoes until SIGINT or SIGTERM, then prints the proactors'
 * counters and "proactor_echo: stopped after N connections".
 * --no-registered-files makes the proactors with
 * TAXI_PROACTOR_NO_REGISTERED_FILES (io_uring without its table of
 * registered files), to compare.
 *
 * The path of one message: the kernel (io_uring 6.0) picks a buffer of the
 * pool and receives into it; the read's handler queues that buffer on its
 * connection; the connection writes its queue (up to TAXI_OP_MAX_BUFS
 * buffers in one gathering write); the write's handler gives the buffers
 * back.  Elsewhere (aio, emulated, IOCP) taxi picks the buffer and the same
 * code runs.  Flow control: a connection whose queue fills up (a client
 * sending far ahead of reading) stops reading until it has drained.
 */
#include "echo_common.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buffers a connection may hold; it stops reading at half of it, so the
 * deliveries already under way still fit. */
#define QUEUE_MAX 256u
#define QUEUE_STOP (QUEUE_MAX / 2)
#define QUEUE_RESUME 16u

typedef struct app {
  taxi_proactor_group_t *g;
  taxi_proactor_t *p0;
  taxi_handle_t listener;
  taxi_op_t accept_op;
  atomic_ulong connections;
} app_t;

typedef struct conn {
  app_t *app;
  taxi_proactor_t *p;
  taxi_handle_t fd;
  taxi_op_t rop, wop;
  /* Buffers received and not yet written back, oldest first. */
  void *q[QUEUE_MAX];
  size_t qlen[QUEUE_MAX];
  unsigned qhead, qn;
  unsigned writing; /* buffers in the write in flight (0: none) */
  int reading;      /* the multishot read is in flight */
  int paused;       /* it was cancelled because the queue filled */
  int closing;
} conn_t;

static void on_read(taxi_op_t *op, int status, size_t bytes, void *act);

static void conn_free_if_done(conn_t *c) {
  if (!c->closing || c->reading || c->writing) return;
  /* What was received and never written goes back to the pool. */
  for (; c->qn; c->qn--, c->qhead = (c->qhead + 1) % QUEUE_MAX)
    (void)taxi_proactor_buffer_release(c->p, c->q[c->qhead]);
  free(c);
}

static void conn_close(conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  /* Ends the read and the write with TAXI_ECANCELED; the descriptor is
   * closed once no request names it. */
  (void)taxi_proactor_close(c->p, c->fd);
}

static void start_read(conn_t *c) {
  if (c->reading || c->closing) return;
  if (taxi_proactor_read_pooled(c->p, &c->rop, c->fd, TAXI_READ_MULTISHOT,
                                on_read, c) != 0) {
    conn_close(c);
    return;
  }
  c->reading = 1;
  c->paused = 0;
}

static void on_write(taxi_op_t *op, int status, size_t bytes, void *act);

static void start_write(conn_t *c) {
  if (c->writing || c->qn == 0 || c->closing) return;
  taxi_buf_t bufs[TAXI_OP_MAX_BUFS];
  unsigned k = 0;
  for (; k < c->qn && k < TAXI_OP_MAX_BUFS; k++) {
    unsigned i = (c->qhead + k) % QUEUE_MAX;
    bufs[k].base = c->q[i];
    bufs[k].len = c->qlen[i];
  }
  if (taxi_proactor_write(c->p, &c->wop, c->fd, bufs, k, on_write, c) != 0) {
    conn_close(c);
    return;
  }
  c->writing = k;
}

static void on_write(taxi_op_t *op, int status, size_t bytes, void *act) {
  conn_t *c = act;
  (void)op;
  (void)bytes; /* a write completes with every byte or fails */
  for (; c->writing; c->writing--) {
    (void)taxi_proactor_buffer_release(c->p, c->q[c->qhead]);
    c->qhead = (c->qhead + 1) % QUEUE_MAX;
    c->qn--;
  }
  if (status != 0) conn_close(c);
  start_write(c);
  if (c->paused && !c->reading && c->qn <= QUEUE_RESUME) start_read(c);
  conn_free_if_done(c);
}

static void on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  conn_t *c = act;
  if (status == 0) {
    if (c->qn == QUEUE_MAX) { /* cannot happen: reading stopped at half */
      (void)taxi_proactor_buffer_release(c->p, op->data);
      conn_close(c);
      return;
    }
    unsigned i = (c->qhead + c->qn) % QUEUE_MAX;
    c->q[i] = op->data;
    c->qlen[i] = bytes;
    c->qn++;
    if (c->qn >= QUEUE_STOP && !c->paused) {
      c->paused = 1;
      (void)taxi_proactor_cancel(c->p, op);
    }
    start_write(c);
    return;
  }
  /* The read ended: the peer closed, an error, or our own pause. */
  c->reading = 0;
  if (status == TAXI_ECANCELED && c->paused && !c->closing) {
    if (c->qn <= QUEUE_RESUME) start_read(c);
    return;
  }
  conn_close(c);
  conn_free_if_done(c);
}

static void on_accept(taxi_op_t *op, int status, size_t bytes, void *act) {
  app_t *a = act;
  (void)bytes;
  if (status != 0) {
    if (status != TAXI_ECANCELED)
      fprintf(stderr, "proactor_echo: accept: %s\n", taxi_strerror(status));
    return;
  }
  taxi_handle_t fd = op->accepted;
  echo_nodelay(fd);
  /* The new connection belongs to the proactor the spread picks; where
   * handles cannot move (IOCP), it stays with the accepting one. */
  taxi_proactor_t *q = taxi_proactor_group_next(a->g);
  if (q != a->p0 && taxi_proactor_move(a->p0, fd, q) != 0) q = a->p0;
  conn_t *c = calloc(1, sizeof *c);
  if (!c) {
    (void)taxi_proactor_close(q, fd);
    return;
  }
  c->app = a;
  c->p = q;
  c->fd = fd;
  taxi_op_init(&c->rop);
  taxi_op_init(&c->wop);
  atomic_fetch_add(&a->connections, 1);
  /* From here on the connection is q's thread's: once the read is
   * started, its handlers may run there at once, so this thread touches
   * nothing of it after the call. */
  c->reading = 1;
  if (taxi_proactor_read_pooled(q, &c->rop, fd, TAXI_READ_MULTISHOT, on_read,
                                c) != 0) {
    (void)taxi_proactor_close(q, fd);
    free(c);
  }
}

static void on_signal(taxi_proactor_t *p, int signo, void *arg) {
  (void)p;
  (void)signo;
  taxi_proactor_group_stop(((app_t *)arg)->g);
}

static void print_counters(const app_t *a) {
  taxi_proactor_stats_t sum, st;
  memset(&sum, 0, sizeof sum);
  for (unsigned i = 0; i < taxi_proactor_group_count(a->g); i++) {
    if (taxi_proactor_stats(taxi_proactor_group_at(a->g, i), &st) != 0)
      continue;
    sum.completed += st.completed;
    sum.syscalls += st.syscalls;
    sum.ring_enters += st.ring_enters;
    sum.sqes += st.sqes;
    sum.cqes += st.cqes;
    sum.buffers += st.buffers;
    sum.buffer_waits += st.buffer_waits;
    sum.registered_handles += st.registered_handles;
    sum.register_failures += st.register_failures;
  }
  printf(
      "proactor_echo: %llu completions, %llu system calls (%llu "
      "io_uring_enter, %llu SQEs, %llu CQEs), %llu buffers, %llu waits "
      "for one, %llu handles in registered-file slots, %llu left on their "
      "fds\n",
      (unsigned long long)sum.completed, (unsigned long long)sum.syscalls,
      (unsigned long long)sum.ring_enters, (unsigned long long)sum.sqes,
      (unsigned long long)sum.cqes, (unsigned long long)sum.buffers,
      (unsigned long long)sum.buffer_waits,
      (unsigned long long)sum.registered_handles,
      (unsigned long long)sum.register_failures);
}

static int usage(void) {
  fprintf(stderr,
          "usage: proactor_echo --port P [--host ADDR] [--backend NAME]\n"
          "                     [--threads N] [--buffer-size BYTES]\n"
          "                     [--no-registered-files]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1", *backend = NULL, *v;
  unsigned port = 0;
  unsigned long threads = 1, size = 4096;
  int have_port = 0, plain = 0;
  for (int i = 1; i < argc;) {
    int r;
    if (strcmp(argv[i], "--no-registered-files") == 0) {
      plain = 1;
      i++;
    } else if ((r = echo_option(argc, argv, &i, "--port", &v)) != 0) {
      if (r < 0 || echo_parse_port(v, &port) < 0) return usage();
      have_port = 1;
    } else if ((r = echo_option(argc, argv, &i, "--host", &v)) != 0) {
      if (r < 0) return usage();
      host = v;
    } else if ((r = echo_option(argc, argv, &i, "--backend", &v)) != 0) {
      if (r < 0) return usage();
      backend = v;
    } else if ((r = echo_option(argc, argv, &i, "--threads", &v)) != 0) {
      if (r < 0 || echo_parse_count(v, 1, 1024, &threads) < 0) return usage();
    } else if ((r = echo_option(argc, argv, &i, "--buffer-size", &v)) != 0) {
      if (r < 0 || echo_parse_count(v, 64, 1u << 20, &size) < 0) return usage();
    } else {
      return usage();
    }
  }
  if (!have_port) return usage();
  if (echo_net_init() < 0) {
    fprintf(stderr, "proactor_echo: %s\n", echo_last_error());
    return 1;
  }

  static app_t a;
  atomic_init(&a.connections, 0);
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.backend = backend;
  po.buffer_size = size;
  po.buffer_count = 1024;
  po.buffer_max = 16384;
  if (plain) po.flags |= TAXI_PROACTOR_NO_REGISTERED_FILES;
  taxi_proactor_group_options_t go = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  go.count = (unsigned)threads;
  go.proactor = &po;
  int rc = taxi_proactor_group_create(&a.g, &go);
  if (rc != 0) {
    fprintf(stderr, "proactor_echo: cannot make the proactors: %s\n",
            taxi_strerror(rc));
    return 1;
  }
  a.p0 = taxi_proactor_group_at(a.g, 0);
  char bound[64];
  unsigned bound_port;
  if (echo_listen(host, port, &a.listener, bound, sizeof bound, &bound_port) <
      0) {
    fprintf(stderr, "proactor_echo: %s\n", echo_last_error());
    taxi_proactor_group_destroy(a.g);
    return 1;
  }
  taxi_op_init(&a.accept_op);
  if ((rc = taxi_proactor_attach(a.p0, a.listener)) != 0 ||
      (rc = taxi_proactor_accept(a.p0, &a.accept_op, a.listener,
                                 TAXI_ACCEPT_MULTISHOT, on_accept, &a)) != 0 ||
      (rc = taxi_proactor_add_signal(a.p0, SIGINT, on_signal, &a)) != 0 ||
      (rc = taxi_proactor_add_signal(a.p0, SIGTERM, on_signal, &a)) != 0) {
    fprintf(stderr, "proactor_echo: %s\n", taxi_strerror(rc));
    taxi_proactor_group_destroy(a.g);
    return 1;
  }
  unsigned features = 0;
  (void)taxi_proactor_features(a.p0, &features);
  printf(
      "proactor_echo: backend=%s threads=%lu features=0x%x listening on "
      "%s\n",
      taxi_proactor_backend(a.p0), threads, features, bound);
  fflush(stdout);

  rc = taxi_proactor_group_run(a.g); /* TAXI_ESTOPPED once stopped */
  if (rc == TAXI_ESTOPPED)
    rc = 0;
  else
    fprintf(stderr, "proactor_echo: stopped by an error: %s\n",
            taxi_strerror(rc));
  print_counters(&a);
  /* Closes every connection and the listener, completing what is in
   * flight (the handlers free the connections). */
  (void)taxi_proactor_group_destroy(a.g);
  printf("proactor_echo: stopped after %lu connections\n",
         atomic_load(&a.connections));
  echo_net_cleanup();
  return rc == 0 ? 0 : 1;
}
