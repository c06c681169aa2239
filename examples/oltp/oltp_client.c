/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oltp_client.c - the OLTP example's load generator: C connections, each
 * sending one transaction at a time (transfers and reads between random
 * accounts, ids that tell connection and sequence) and checking every
 * reply; an audit before and after proves the money was conserved.
 *
 *     oltp_client --port P [--host H] [--connections C]
 *                 [--requests N | --duration SECONDS] [--reads PERCENT]
 *                 [--accounts A] [--time-limit SECONDS]
 *
 * It talks to a back end directly or through a front end (same format).
 * A taxi program itself: one Reactor thread over the streams.  On success
 * it prints
 *
 *     oltp_client: C connections, N requests, R requests/s, p50 U us,
 *     p99 V us, all verified, audit S conserved
 *
 * (one line) and exits 0; it exits 1 with a message on a wrong, missing or
 * refused reply, a closed connection, a changed audit sum or the time
 * limit (default 60 s).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "../echo_common.h"
#include "oltp.h"

#define MAX_CONNECTIONS 10000ul
/* Latency histogram: 1 us buckets up to 10 ms, then one overflow. */
#define BUCKETS 10001

struct conn {
  struct client *cl;
  taxi_stream_t *s;
  uint32_t index;
  uint64_t seq;         /* requests sent (the audits included) */
  unsigned long done_n; /* transactions of the load completed */
  struct oltp_request sent;
  taxi_time_t sent_at;
  struct oltp_framer framer;
  uint64_t rng;
  bool done;
};

struct client {
  taxi_io_t *io;
  struct conn *conns;
  unsigned long nconns, running, requests, reads_pct, accounts;
  taxi_time_t deadline; /* --duration: stop sending after it; 0: none */
  unsigned long long completed;
  uint64_t hist[BUCKETS];
  int64_t audit_before;
  int failed;
  enum { PHASE_AUDIT_BEFORE, PHASE_LOAD, PHASE_AUDIT_AFTER } phase;
  taxi_time_t started, ended;
};

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void fail(struct client *cl, const char *what, const struct conn *c) {
  if (!cl->failed)
    fprintf(stderr, "oltp_client: connection %u: %s\n", c ? c->index : 0, what);
  cl->failed = 1;
  taxi_io_stop(cl->io);
}

static void send_request(struct conn *c) {
  struct client *cl = c->cl;
  struct oltp_request *r = &c->sent;
  unsigned char out[OLTP_FRAME];
  memset(r, 0, sizeof *r);
  r->id = (uint64_t)c->index << 32 | (uint32_t)++c->seq;
  if (cl->phase != PHASE_LOAD) {
    r->op = OLTP_AUDIT;
  } else if (next_random(&c->rng) % 100 < cl->reads_pct) {
    r->op = OLTP_READ;
    r->from = (uint32_t)(next_random(&c->rng) % cl->accounts);
  } else {
    r->op = OLTP_TRANSFER;
    r->from = (uint32_t)(next_random(&c->rng) % cl->accounts);
    r->to = (uint32_t)(next_random(&c->rng) % cl->accounts);
    r->amount = (int64_t)(next_random(&c->rng) % 100);
  }
  oltp_request_encode(r, out);
  c->sent_at = taxi_now();
  if (taxi_stream_write(c->s, out, sizeof out, NULL, NULL) < 0)
    fail(cl, "cannot queue a request", c);
}

static void start_load(struct client *cl) {
  cl->phase = PHASE_LOAD;
  cl->started = taxi_now();
  for (unsigned long i = 0; i < cl->nconns; i++) send_request(&cl->conns[i]);
}

/* One connection finished its share; the last one asks for the audit. */
static void conn_finished(struct conn *c) {
  struct client *cl = c->cl;
  c->done = true;
  if (--cl->running > 0) return;
  cl->ended = taxi_now();
  cl->phase = PHASE_AUDIT_AFTER;
  send_request(&cl->conns[0]);
}

static void check_reply(struct conn *c, const struct oltp_reply *rep) {
  struct client *cl = c->cl;
  const struct oltp_request *req = &c->sent;
  char what[160];
  if (rep->id != req->id || rep->op != req->op) {
    snprintf(what, sizeof what,
             "reply id %llx op %u does not answer request id %llx op %u",
             (unsigned long long)rep->id, rep->op, (unsigned long long)req->id,
             req->op);
    fail(cl, what, c);
    return;
  }
  bool ok = rep->status == OLTP_OK ||
            (req->op == OLTP_TRANSFER && rep->status == OLTP_INSUFFICIENT);
  if (!ok || rep->a < 0 || rep->b < 0) {
    snprintf(what, sizeof what, "op %u: status %u, balances %lld %lld", req->op,
             rep->status, (long long)rep->a, (long long)rep->b);
    fail(cl, what, c);
    return;
  }
  if (cl->phase == PHASE_AUDIT_BEFORE) {
    cl->audit_before = rep->a;
    start_load(cl);
    return;
  }
  if (cl->phase == PHASE_AUDIT_AFTER) {
    if (rep->a != cl->audit_before) {
      snprintf(what, sizeof what, "audit %lld after, %lld before",
               (long long)rep->a, (long long)cl->audit_before);
      fail(cl, what, c);
    }
    taxi_io_stop(cl->io);
    return;
  }
  taxi_time_t us = (taxi_now() - c->sent_at) / 1000;
  cl->hist[us < BUCKETS - 1 ? us : BUCKETS - 1]++;
  cl->completed++;
  c->done_n++;
  bool more =
      cl->deadline ? taxi_now() < cl->deadline : c->done_n < cl->requests;
  if (more)
    send_request(c);
  else
    conn_finished(c);
}

static int on_frame(void *arg, const unsigned char *frame) {
  struct conn *c = arg;
  struct oltp_reply rep;
  oltp_reply_decode(frame, &rep);
  check_reply(c, &rep);
  return c->cl->failed;
}

static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct conn *c = taxi_stream_data(s);
  if (status < 0)
    fail(c->cl, "the server closed the connection", c);
  else
    oltp_framer_feed(&c->framer, data, len, on_frame, c);
}

static void on_close(taxi_stream_t *s, int reason) {
  struct conn *c = taxi_stream_data(s);
  c->s = NULL;
  if (reason < 0 && !c->cl->failed && c->cl->phase != PHASE_AUDIT_AFTER)
    fail(c->cl, taxi_strerror(reason), c);
}

static void on_connect(taxi_stream_t *s, int status, void *arg) {
  struct conn *c = arg;
  struct client *cl = c->cl;
  if (status < 0) {
    char what[120];
    snprintf(what, sizeof what, "connect: %s", taxi_strerror(status));
    fail(cl, what, c);
    return;
  }
  taxi_stream_on_close(s, on_close);
  taxi_stream_read_start(s, on_read);
  /* Everyone connected: audit, then the load. */
  if (++cl->running == cl->nconns) send_request(&cl->conns[0]);
}

static void on_time_limit(taxi_io_timer_t *t, void *arg) {
  (void)t;
  fail(arg, "time limit reached", NULL);
}

static uint64_t percentile(const struct client *cl, double q) {
  uint64_t want = (uint64_t)(q * (double)cl->completed), seen = 0;
  for (uint64_t i = 0; i < BUCKETS; i++)
    if ((seen += cl->hist[i]) > want) return i;
  return BUCKETS - 1;
}

static int usage(FILE *out, int status) {
  fprintf(out,
          "usage: oltp_client --port P [--host H] [--connections C]\n"
          "                   [--requests N | --duration SECONDS] "
          "[--reads PERCENT]\n"
          "                   [--accounts A] [--time-limit SECONDS]\n");
  return status;
}

int main(int argc, char **argv) {
  static struct client cl;
  const char *host = "127.0.0.1", *v;
  unsigned port = 0;
  unsigned long duration = 0, limit = 60;
  cl.nconns = 16;
  cl.requests = 1000;
  cl.reads_pct = 20;
  cl.accounts = 1000;
  if (echo_net_init() < 0) {
    fprintf(stderr, "oltp_client: %s\n", echo_last_error());
    return OLTP_EXIT_ERROR;
  }
  for (int i = 1; i < argc;) {
    int m;
    if ((m = echo_option(argc, argv, &i, "--port", &v)) != 0) {
      if (m < 0 || echo_parse_port(v, &port) < 0 || port == 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--host", &v)) != 0) {
      if (m < 0) return usage(stderr, 2);
      host = v;
    } else if ((m = echo_option(argc, argv, &i, "--connections", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, MAX_CONNECTIONS, &cl.nconns) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--requests", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, 1ul << 30, &cl.requests) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--duration", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, 3600, &duration) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--reads", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 0, 100, &cl.reads_pct) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--accounts", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 2, 1ul << 24, &cl.accounts) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--time-limit", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, 86400, &limit) < 0)
        return usage(stderr, 2);
    } else if (strcmp(argv[i], "--help") == 0) {
      return usage(stdout, 0);
    } else {
      fprintf(stderr, "oltp_client: unknown argument %s\n", argv[i]);
      return usage(stderr, 2);
    }
  }
  if (port == 0) return usage(stderr, 2);

  int rc = taxi_io_create(&cl.io, NULL);
  cl.conns = calloc(cl.nconns, sizeof *cl.conns);
  if (rc < 0 || !cl.conns) {
    fprintf(stderr, "oltp_client: cannot start: %s\n",
            rc < 0 ? taxi_strerror(rc) : "out of memory");
    return OLTP_EXIT_ERROR;
  }
  char address[300];
  snprintf(address, sizeof address, strchr(host, ':') ? "[%s]:%u" : "%s:%u",
           host, port);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.flags = TAXI_STREAM_NODELAY;
  so.connect_timeout = 10 * TAXI_NSEC_PER_SEC;
  for (unsigned long i = 0; i < cl.nconns && !cl.failed; i++) {
    struct conn *c = &cl.conns[i];
    c->cl = &cl;
    c->index = (uint32_t)i;
    c->rng = 0x9e3779b97f4a7c15ull * (i + 1);
    rc = taxi_stream_connect(&c->s, cl.io, address, &so, on_connect, c);
    if (rc < 0) {
      fprintf(stderr, "oltp_client: connect %s: %s\n", address,
              taxi_strerror(rc));
      return OLTP_EXIT_ERROR;
    }
  }
  taxi_io_timer_t *t;
  if (taxi_io_timer_create(&t, cl.io, on_time_limit, &cl) == 0)
    taxi_io_timer_start(t, (taxi_time_t)limit * TAXI_NSEC_PER_SEC, 0);
  if (duration)
    cl.deadline = taxi_now() + (taxi_time_t)duration * TAXI_NSEC_PER_SEC;
  rc = taxi_io_run(cl.io);
  if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  taxi_io_destroy(cl.io);
  free(cl.conns);
  echo_net_cleanup();
  if (rc < 0 || cl.failed || cl.phase != PHASE_AUDIT_AFTER) {
    if (!cl.failed)
      fprintf(stderr, "oltp_client: stopped early: %s\n", taxi_strerror(rc));
    return OLTP_EXIT_ERROR;
  }
  double secs = (double)(cl.ended - cl.started) / 1e9;
  printf(
      "oltp_client: %lu connections, %llu requests, %.0f requests/s, "
      "p50 %llu us, p99 %llu us, all verified, audit %lld conserved\n",
      cl.nconns, cl.completed, secs > 0 ? (double)cl.completed / secs : 0.0,
      (unsigned long long)percentile(&cl, 0.50),
      (unsigned long long)percentile(&cl, 0.99), (long long)cl.audit_before);
  return OLTP_EXIT_OK;
}
