/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_taxi.c - the four models the patterns give, on taxi's stream
 * layer: one handler, run by the dispatcher named on the command line.
 *
 *   reactor   one thread demultiplexes and answers everything (Reactor);
 *   lf        a Leader/Followers pool of --threads threads: the leader
 *             waits on the handle set, promotes a follower, then answers
 *             the request it was handed itself (no queue, no hand-off);
 *   hsha      half-sync/half-async (the "half-sync/half-reactive" variant
 *             of the L/F paper): a reactor thread reads the sockets and
 *             queues each event to a pool of --threads workers;
 *   proactor  asynchronous reads and writes completed by the OS (io_uring,
 *             IOCP, ...) or emulated, dispatched by --threads threads.
 *
 * Requests can arrive split or several at once; the stream keeps the
 * start of an incomplete request (a small block per connection, made when
 * it is accepted) and answers every complete one in the data it is given,
 * with one write.  Answering allocates nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "quote_server.h"

static const char *const model_names[] = {"reactor", "lf", "hsha", "proactor"};

int quote_taxi_model(const char *name) {
  for (size_t i = 0; i < sizeof model_names / sizeof *model_names; i++)
    if (strcmp(name, model_names[i]) == 0) return 1;
  return 0;
}

/* Replies written at once, at most: 256 requests' worth. */
#define BATCH 256

struct connection {
  size_t have; /* bytes of the next request already here */
  unsigned char partial[QUOTE_REQUEST_SIZE];
};

static struct quote_server *server;
static taxi_io_t *the_io;

static void wake(void) { taxi_io_stop(the_io); }

/* Queue replies; a client that reads none while sending on (so that 32 KiB
 * of replies pile up) is closed rather than buffered without end. */
static int send_replies(taxi_stream_t *s, const unsigned char *out,
                        size_t count) {
  if (count == 0) return 0;
  atomic_fetch_add_explicit(&server->requests, count, memory_order_relaxed);
  return taxi_stream_write(s, out, count * QUOTE_REPLY_SIZE, NULL, NULL);
}

static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct connection *c = taxi_stream_data(s);
  const unsigned char *in = data;
  unsigned char out[BATCH * QUOTE_REPLY_SIZE];

  if (status < 0) { /* the client is done: send what is queued, close */
    taxi_stream_end(s);
    return;
  }
  if (c->have) { /* finish the request begun in an earlier read */
    size_t take = QUOTE_REQUEST_SIZE - c->have;
    if (take > len) take = len;
    memcpy(c->partial + c->have, in, take);
    c->have += take;
    in += take;
    len -= take;
    if (c->have < QUOTE_REQUEST_SIZE) return;
    c->have = 0;
    quote_answer(&server->table, c->partial, out);
    if (send_replies(s, out, 1) < 0) goto fail;
  }
  while (len >= QUOTE_REQUEST_SIZE) {
    size_t chunk = len / QUOTE_REQUEST_SIZE;
    if (chunk > BATCH) chunk = BATCH;
    quote_answer_all(&server->table, in, chunk * QUOTE_REQUEST_SIZE, out);
    if (send_replies(s, out, chunk) < 0) goto fail;
    in += chunk * QUOTE_REQUEST_SIZE;
    len -= chunk * QUOTE_REQUEST_SIZE;
  }
  memcpy(c->partial, in, len);
  c->have = len;
  return;
fail:
  taxi_stream_close(s);
}

static void on_close(taxi_stream_t *s, int reason) {
  (void)reason;
  free(taxi_stream_data(s));
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct connection *c = calloc(1, sizeof *c);
  (void)l;
  (void)arg;
  if (c == NULL) {
    atomic_fetch_add(&server->refused, 1);
    taxi_stream_close(s);
    return;
  }
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, on_close);
  taxi_stream_read_start(s, on_read);
}

int quote_run_taxi(struct quote_server *srv) {
  taxi_io_options_t o;
  taxi_listener_options_t lo;
  taxi_stream_options_t so;
  taxi_listener_t *l;
  taxi_addr_t bound;
  char address[300], text[TAXI_ADDR_STRLEN];
  int rc;

  server = srv;
  taxi_io_options_init(&o);
  taxi_io_dispatcher_parse(srv->model, &o.dispatcher);
  o.backend = srv->backend;
  o.threads = o.dispatcher == TAXI_IO_REACTOR ? 1 : srv->threads;
  rc = taxi_io_create(&the_io, &o);
  if (rc < 0) {
    fprintf(stderr, "quote_server: cannot start the %s model%s%s: %s\n",
            srv->model, srv->backend ? " on backend " : "",
            srv->backend ? srv->backend : "", taxi_strerror(rc));
    return rc == TAXI_ENOBACKEND ? QUOTE_EXIT_USAGE : QUOTE_EXIT_ERROR;
  }
  taxi_stream_options_init(&so);
  so.flags |= TAXI_STREAM_NODELAY;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  if (strchr(srv->host, ':'))
    snprintf(address, sizeof address, "[%s]:%u", srv->host, srv->port);
  else
    snprintf(address, sizeof address, "%s:%u", srv->host, srv->port);
  rc = taxi_listener_create(&l, the_io, address, &lo, on_accept, NULL);
  if (rc < 0) {
    fprintf(stderr, "quote_server: cannot listen on %s: %s\n", address,
            taxi_strerror(rc));
    taxi_io_destroy(the_io);
    return QUOTE_EXIT_ERROR;
  }
  quote_wake_fn = wake;
  /* A stop that came before the context existed. */
  if (atomic_load(&srv->stopping)) taxi_io_stop(the_io);
  taxi_listener_address(l, &bound);
  taxi_addr_format(&bound, text, sizeof text);
  printf("quote_server: model=%s backend=%s threads=%u\n", srv->model,
         taxi_io_backend(the_io), taxi_io_threads(the_io));
  printf("quote_server: listening on %s\n", text);
  fflush(stdout); /* scripts wait for this line */
  rc = taxi_io_run(the_io);
  if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  quote_wake_fn = NULL;
  taxi_io_destroy(the_io);
  if (rc < 0) {
    fprintf(stderr, "quote_server: the %s model stopped: %s\n", srv->model,
            taxi_strerror(rc));
    return QUOTE_EXIT_ERROR;
  }
  return QUOTE_EXIT_OK;
}
