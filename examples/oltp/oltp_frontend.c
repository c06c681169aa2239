/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oltp_frontend.c - the front-end communication server of the OLTP
 * example: clients' transactions come in on many connections and go to the
 * back end over a few multiplexed ones, and each reply goes back to the
 * client that asked.
 *
 *     oltp_frontend --backend-port P [--backend-host H] [--links K]
 *                   [--port P] [--host H] [--threads N] [--reactor B]
 *                   [--timeout MS]
 *
 * One Leader/Followers pool serves both kinds of handle at once (the
 * paper's hybrid association): client connections are unbound, any pool
 * thread runs their read callback; the K back-end connections (taxi's
 * multiplexed connections, taxi/lf_bound.h) are bound: the thread that
 * forwards a request registers the id it expects, sends, and awaits the
 * reply, taking part in the pool meanwhile, and whichever thread reads the
 * reply hands it to exactly that thread.  So every pool thread may be
 * waiting for the back end while client requests and back-end replies
 * still flow (the hybrid client/server of the paper's section 10.4).
 *
 * It prints "oltp_frontend: threads=N links=K listening on H:P", serves
 * until SIGINT or SIGTERM, then prints how many transactions it relayed.
 * A reply that does not come within --timeout (default 5000 ms), or a
 * back-end connection that fails, is answered to the client with status
 * OLTP_UNAVAILABLE; a reply that comes after its time-out is counted and
 * dropped (the client has its answer already).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "../echo_common.h"
#include "oltp.h"

#define MAX_LINKS 64ul

static taxi_lf_mux_t *links[MAX_LINKS];
static unsigned long nlinks = 2;
static int timeout_ms = 5000;
static atomic_ullong next_id, next_link, relayed, unavailable, late;

/* The back end's replies are fixed frames whose first 8 bytes are the id
 * the front end gave the request. */
static int parse_reply(void *arg, const void *data, size_t len,
                       taxi_lf_frame_t *frame) {
  (void)arg;
  if (len < OLTP_FRAME) return 0;
  struct oltp_reply rep;
  oltp_reply_decode(data, &rep);
  frame->size = OLTP_FRAME;
  frame->id = rep.id;
  frame->body = 0;
  frame->body_len = OLTP_FRAME;
  return 1;
}

static void late_reply(void *arg, uint64_t id, const void *body, size_t len) {
  (void)arg;
  (void)id;
  (void)body;
  (void)len;
  atomic_fetch_add(&late, 1);
}

/* Forward one client request to the back end and wait for its reply
 * (bound: this thread expects it); the reply, or OLTP_UNAVAILABLE, is
 * written into `out` with the client's own id. */
static void forward(const unsigned char *frame, unsigned char *out) {
  struct oltp_request req;
  struct oltp_reply rep;
  unsigned char wire[OLTP_FRAME];
  oltp_request_decode(frame, &req);
  uint64_t client_id = req.id;
  req.id = atomic_fetch_add(&next_id, 1);
  taxi_lf_mux_t *m = links[atomic_fetch_add(&next_link, 1) % nlinks];
  oltp_request_encode(&req, wire);

  taxi_lf_expect_t e;
  int rc = taxi_lf_expect_init(&e, req.id, out, OLTP_FRAME);
  if (rc == 0) rc = taxi_lf_mux_expect(m, &e); /* before the request */
  if (rc == 0) {
    rc = taxi_lf_mux_send(m, wire, sizeof wire, timeout_ms);
    if (rc < 0)
      taxi_lf_mux_forget(m, &e);
    else
      rc = taxi_lf_mux_await(m, &e, timeout_ms);
  }
  if (rc == OLTP_FRAME) {
    oltp_reply_decode(out, &rep);
    atomic_fetch_add(&relayed, 1);
  } else {
    memset(&rep, 0, sizeof rep);
    rep.op = req.op;
    rep.status = OLTP_UNAVAILABLE;
    atomic_fetch_add(&unavailable, 1);
  }
  rep.id = client_id;
  oltp_reply_encode(&rep, out);
}

static int relay(taxi_stream_t *s, const unsigned char *frame) {
  unsigned char out[OLTP_FRAME];
  forward(frame, out);
  return taxi_stream_write(s, out, sizeof out, NULL, NULL);
}

static int usage(FILE *out, int status) {
  fprintf(out,
          "usage: oltp_frontend --backend-port P [--backend-host H] "
          "[--links K]\n"
          "                     [--port P] [--host H] [--threads N] "
          "[--reactor BACKEND]\n"
          "                     [--timeout MS]\n");
  return status;
}

struct frontend {
  taxi_reactor_t *r;
  taxi_lf_pool_t *pool;
  taxi_io_t *io;
};

/* Tear down in the order the objects depend on each other: the links
 * before their pool; the pool before the context, whose destroy then
 * dispatches the reactor itself to close the clients' streams. */
static int finish(struct frontend *fe, int status) {
  for (unsigned long i = 0; i < nlinks; i++)
    if (links[i]) taxi_lf_mux_destroy(links[i]);
  if (fe->pool) taxi_lf_destroy(fe->pool);
  if (fe->io) taxi_io_destroy(fe->io);
  if (fe->r) taxi_reactor_destroy(fe->r);
  echo_net_cleanup();
  return status;
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1", *backend_host = "127.0.0.1", *v;
  const char *reactor_backend = NULL;
  unsigned port = 0, backend_port = 0;
  unsigned long threads = 4, ms = 5000;
  struct frontend fe = {NULL, NULL, NULL};
  if (echo_net_init() < 0) {
    fprintf(stderr, "oltp_frontend: %s\n", echo_last_error());
    return OLTP_EXIT_ERROR;
  }
  for (int i = 1; i < argc;) {
    int m;
    if ((m = echo_option(argc, argv, &i, "--port", &v)) != 0) {
      if (m < 0 || echo_parse_port(v, &port) < 0) return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--host", &v)) != 0) {
      if (m < 0) return usage(stderr, 2);
      host = v;
    } else if ((m = echo_option(argc, argv, &i, "--backend-port", &v)) != 0) {
      if (m < 0 || echo_parse_port(v, &backend_port) < 0 || !backend_port)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--backend-host", &v)) != 0) {
      if (m < 0) return usage(stderr, 2);
      backend_host = v;
    } else if ((m = echo_option(argc, argv, &i, "--links", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, MAX_LINKS, &nlinks) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--threads", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, 1024, &threads) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--reactor", &v)) != 0) {
      if (m < 0) return usage(stderr, 2);
      reactor_backend = v;
    } else if ((m = echo_option(argc, argv, &i, "--timeout", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, 3600000, &ms) < 0)
        return usage(stderr, 2);
    } else if (strcmp(argv[i], "--help") == 0) {
      return usage(stdout, 0);
    } else {
      fprintf(stderr, "oltp_frontend: unknown argument %s\n", argv[i]);
      return usage(stderr, 2);
    }
  }
  if (!backend_port) return usage(stderr, 2);
  timeout_ms = (int)ms;

  /* The reactor and the pool are made here, not by the I/O context, so
   * that the back-end connections can be bound to the same pool that
   * serves the clients' streams. */
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = reactor_backend;
  int rc = taxi_reactor_create(&fe.r, &ro);
  if (rc == 0) rc = taxi_lf_create(&fe.pool, fe.r, NULL);
  if (rc < 0) {
    fprintf(stderr, "oltp_frontend: cannot start: %s\n", taxi_strerror(rc));
    return finish(&fe,
                  rc == TAXI_ENOBACKEND ? OLTP_EXIT_USAGE : OLTP_EXIT_ERROR);
  }
  taxi_lf_mux_options_t mo = TAXI_LF_MUX_OPTIONS_INIT;
  mo.parse = parse_reply;
  mo.unknown = late_reply;
  for (unsigned long i = 0; i < nlinks; i++) {
    taxi_handle_t h;
    if (echo_connect(backend_host, backend_port, &h) < 0) {
      fprintf(stderr, "oltp_frontend: back end: %s\n", echo_last_error());
      return finish(&fe, OLTP_EXIT_ERROR);
    }
    rc = taxi_lf_mux_create(&links[i], fe.pool, fe.r, h, &mo);
    if (rc < 0) {
      echo_close(h);
      fprintf(stderr, "oltp_frontend: back end: %s\n", taxi_strerror(rc));
      return finish(&fe, OLTP_EXIT_ERROR);
    }
  }

  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  o.dispatcher = TAXI_IO_LF;
  o.reactor = fe.r;
  o.lf_pool = fe.pool;
  rc = taxi_io_create(&fe.io, &o);
  char text[TAXI_ADDR_STRLEN];
  if (rc < 0)
    fprintf(stderr, "oltp_frontend: cannot start: %s\n", taxi_strerror(rc));
  if (rc < 0 || oltp_serve(fe.io, host, port, relay, "oltp_frontend", text,
                           sizeof text) < 0)
    return finish(&fe, OLTP_EXIT_ERROR);
  oltp_stop_on_signals(fe.io, "oltp_frontend");
  /* The pool's other threads; taxi_io_run's caller is the last one. */
  if (threads > 1 && (rc = taxi_lf_spawn(fe.pool, (unsigned)threads - 1)) < 0) {
    fprintf(stderr, "oltp_frontend: cannot start threads: %s\n",
            taxi_strerror(rc));
    return finish(&fe, OLTP_EXIT_ERROR);
  }
  printf("oltp_frontend: threads=%lu links=%lu listening on %s\n", threads,
         nlinks, text);
  fflush(stdout);

  rc = taxi_io_run(fe.io);
  if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  printf(
      "oltp_frontend: stopped after %llu transactions relayed, %llu "
      "unavailable, %llu late replies\n",
      (unsigned long long)atomic_load(&relayed),
      (unsigned long long)atomic_load(&unavailable),
      (unsigned long long)atomic_load(&late));
  if (rc < 0) {
    fprintf(stderr, "oltp_frontend: stopped: %s\n", taxi_strerror(rc));
    return finish(&fe, OLTP_EXIT_ERROR);
  }
  return finish(&fe, OLTP_EXIT_OK);
}
