/*
 * echo_proactor.c - the echo protocol as completion handlers.
 *
 * A connection is one buffer and one operation record: read some bytes,
 * write them all back, read again.  Its record is idle whenever its
 * completion handler runs, so the handler starts the next operation with
 * it; only one operation per connection is ever in flight, so no two
 * threads ever touch a connection at once and it needs no lock.  The
 * listener has one record with a multishot accept that keeps delivering
 * connections.
 *
 * Nothing here knows which backend performs the operations or how many
 * threads dispatch the completions: that is the Proactor's business.
 */
#include "echo_proactor.h"
#include "echo_common.h"

#include <stdio.h>
#include <stdlib.h>

#define BUFFER_SIZE 16384

/* How long to stop accepting after an accept failed (out of descriptors,
 * most likely), so the failure does not repeat in a tight loop. */
#define ACCEPT_BACKOFF (100 * TAXI_NSEC_PER_MSEC)

struct listener {
  taxi_proactor_t *proactor;
  taxi_op_t op;
  taxi_handle_t fd;
  atomic_ullong *connections, *bytes;
};

struct connection {
  taxi_op_t op;
  taxi_proactor_t *proactor;
  taxi_handle_t fd;
  atomic_ullong *bytes;
  unsigned char buf[BUFFER_SIZE];
};

static void on_read(taxi_op_t *op, int status, size_t bytes, void *act);

/* The end of a conversation: the only place a connection is freed. */
static void connection_end(struct connection *c, int status) {
  if (status != TAXI_EEOF && status != TAXI_ECANCELED &&
      status != TAXI_ECONNRESET)
    fprintf(stderr, "echo_server: connection: %s\n", taxi_strerror(status));
  taxi_proactor_close(c->proactor, c->fd);
  free(c);
}

static void read_next(struct connection *c) {
  int rc = taxi_proactor_read(c->proactor, &c->op, c->fd, c->buf, sizeof c->buf,
                              0, on_read, c);
  if (rc < 0) connection_end(c, rc);
}

static void on_written(taxi_op_t *op, int status, size_t bytes, void *act) {
  struct connection *c = act;
  (void)op;
  if (status < 0) {
    connection_end(c, status);
    return;
  }
  atomic_fetch_add_explicit(c->bytes, bytes, memory_order_relaxed);
  read_next(c);
}

static void on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  struct connection *c = act;
  taxi_buf_t out;
  int rc;
  (void)op;
  if (status < 0) {
    connection_end(c, status);
    return;
  }
  /* Not reading again until all of it is written back is what pushes back
   * on a client that sends faster than it reads. */
  out.base = c->buf;
  out.len = bytes;
  rc = taxi_proactor_write(c->proactor, &c->op, c->fd, &out, 1, on_written, c);
  if (rc < 0) connection_end(c, rc);
}

static void on_accept(taxi_op_t *op, int status, size_t bytes, void *act);

static void accept_next(struct listener *l) {
  int rc = taxi_proactor_accept(l->proactor, &l->op, l->fd,
                                TAXI_ACCEPT_MULTISHOT, on_accept, l);
  if (rc < 0 && rc != TAXI_ESTOPPED)
    fprintf(stderr, "echo_server: cannot accept: %s\n", taxi_strerror(rc));
}

static void on_backoff_over(taxi_op_t *op, int status, size_t bytes,
                            void *act) {
  (void)op;
  (void)bytes;
  if (status == 0) accept_next(act);
}

static void on_accept(taxi_op_t *op, int status, size_t bytes, void *act) {
  struct listener *l = act;
  struct connection *c;
  (void)bytes;
  if (status < 0) {
    if (status == TAXI_ECANCELED) return; /* the server is stopping */
    /* The multishot accept has ended (op->more is clear): pause, then
     * accept again with the same record. */
    fprintf(stderr, "echo_server: accept: %s; pausing accepts\n",
            taxi_strerror(status));
    if (taxi_proactor_timer(l->proactor, &l->op, ACCEPT_BACKOFF,
                            on_backoff_over, l) < 0)
      fprintf(stderr, "echo_server: no longer accepting\n");
    return;
  }
  c = malloc(sizeof *c);
  if (c == NULL) {
    fprintf(stderr, "echo_server: out of memory: dropping a connection\n");
    taxi_proactor_close(l->proactor, op->accepted);
  } else {
    taxi_op_init(&c->op);
    c->proactor = l->proactor;
    c->fd = op->accepted;
    c->bytes = l->bytes;
    atomic_fetch_add_explicit(l->connections, 1, memory_order_relaxed);
    read_next(c);
  }
  /* A multishot accept may end after a connection; keep accepting. */
  if (!op->more) accept_next(l);
}

/* Threads of the pool: spawned ones, all but the caller's. */
static int run_pool(const struct echo_proactor_config *cfg,
                    taxi_proactor_t *p) {
  taxi_lf_pool_t *pool;
  int rc = taxi_lf_create_proactor(&pool, p, NULL), status = 0;
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot create a pool over the proactor: %s\n",
            taxi_strerror(rc));
    return rc == TAXI_ENOTSUP ? 3 : 1;
  }
  rc = taxi_lf_spawn(pool, cfg->threads);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot start %u threads: %s\n", cfg->threads,
            taxi_strerror(rc));
    status = 1;
  } else {
    cfg->announce(taxi_proactor_backend(p), cfg->announce_arg);
    if (cfg->wait_for_stop(cfg->stop_arg) != 0) status = 1;
  }
  /* Completions not yet dispatched stay queued; destroy finishes them. */
  rc = taxi_lf_destroy(pool);
  if (rc < 0) {
    fprintf(stderr, "echo_server: taxi_lf_destroy: %s\n", taxi_strerror(rc));
    status = 1;
  }
  return status;
}

int echo_proactor_serve(const struct echo_proactor_config *cfg,
                        taxi_handle_t listener) {
  struct listener l;
  taxi_proactor_t *p;
  int rc, status;

  rc = taxi_proactor_create(&p, cfg->backend);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot create the proactor (%s): %s\n",
            cfg->backend ? cfg->backend : "automatic", taxi_strerror(rc));
    echo_close(listener);
    return rc == TAXI_ENOBACKEND || rc == TAXI_ENOTSUP || rc == TAXI_EPERM ? 3
                                                                           : 1;
  }
  l.proactor = p;
  l.fd = listener;
  l.connections = cfg->connections;
  l.bytes = cfg->bytes;
  taxi_op_init(&l.op);
  rc = taxi_proactor_attach(p, listener);
  if (rc < 0) {
    echo_close(listener); /* not attached: destroy would not close it */
  } else {
    rc = taxi_proactor_accept(p, &l.op, listener, TAXI_ACCEPT_MULTISHOT,
                              on_accept, &l);
  }
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot accept: %s\n", taxi_strerror(rc));
    status = 1;
  } else {
    status = run_pool(cfg, p);
  }
  /* Cancels the accept and every connection's operation; their handlers
   * run here and free the connections; the sockets still attached (the
   * listener, the connections) are closed. */
  rc = taxi_proactor_destroy(p);
  if (rc < 0) {
    fprintf(stderr, "echo_server: taxi_proactor_destroy: %s\n",
            taxi_strerror(rc));
    status = 1;
  }
  return status;
}
