/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_client.c - load and checker for quote_server, a taxi Reactor
 * program (one thread multiplexes every connection).
 *
 *     quote_client --port P --quotes FILE [--host ADDR] [--connections C]
 *                  [--requests R | --duration S] [--seed N]
 *                  [--time-limit S] [--split]
 *
 * Opens C connections (default 4); each sends one request at a time and
 * waits for its reply: a known symbol (80%), a random one, mostly unknown
 * (15%), or a request that breaks the format (5%, see quote.h).  Every
 * reply is compared, byte for byte, with what quote_answer() gives for
 * the same request over the same quote file (--split: each request goes
 * out in two sends, the second after a trip through the event loop, so
 * that the server sees requests cut in two).  With --requests (default
 * 1000) each connection sends R requests; with --duration it sends until
 * S seconds have passed, then waits up to 2 s for the replies still due.
 *
 * It prints one line,
 *
 *     quote_client: connections=C requests=N seconds=T rate=X p50_us=A
 *     p99_us=B wrong=0 missing=0 starved=0 refused=0
 *
 * (requests: answered and verified; missing: requests sent and never
 * answered, or connections the server closed; starved: connections that
 * got no answer while the client was sending (with --duration, a model
 * that serves one connection at a time answers the others' first request
 * only in the grace period, if at all); refused: connections that could
 * not be made).
 * Exit status: 0 all answered and right; 1 a wrong answer, or anything
 * missing with --requests, or the run exceeded --time-limit (default
 * 60 s); 2 a bad command line; 4 with --duration, all answers right but
 * some missing (a model that serves a few connections at a time leaves
 * the others waiting).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "../client_common.h"
#include "../echo_common.h"
#include "quote.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define EXIT_MISSING 4
#define GRACE_S 2
#define MAX_CONNECTIONS 20000ul

/* Latencies: exact below 32 us, then 16 buckets per power of two. */
#define BUCKETS (32 + 40 * 16)

static unsigned bucket_of(uint64_t us) {
  unsigned e = 0;
  if (us < 32) return (unsigned)us;
  while ((us >> e) > 1) e++; /* e = floor(log2(us)) >= 5 */
  if (e > 44) return BUCKETS - 1;
  return 32 + (e - 5) * 16 + (unsigned)((us >> (e - 4)) & 15);
}

static uint64_t bucket_value(unsigned i) {
  unsigned e, sub;
  if (i < 32) return i;
  e = (i - 32) / 16 + 5;
  sub = (i - 32) % 16;
  return (uint64_t)(16 + sub) << (e - 4);
}

struct client {
  taxi_reactor_t *reactor;
  struct quote_table table;
  unsigned long requests;      /* per connection, 0 with --duration */
  unsigned long long answered; /* verified */
  unsigned long long wrong;    /* answers that differ */
  unsigned long long missing;  /* never answered */
  unsigned long outstanding;   /* requests on their way */
  unsigned long running;       /* connections still going */
  unsigned long served;        /* connections with an answer */
  unsigned long refused;       /* connections not made */
  int draining;                /* --duration over: send nothing more */
  int timed_out;
  int split; /* --split: each request in two sends */
  uint64_t histogram[BUCKETS];
};

struct connection {
  struct client_conn base; /* first: the shared hooks free the whole block */
  struct client *client;
  unsigned long done;
  uint32_t rng;
  size_t sent, received;
  size_t limit; /* send up to here before waiting for the next event */
  taxi_time_t started;
  unsigned char req[QUOTE_REQUEST_SIZE];
  unsigned char want[QUOTE_REPLY_SIZE], got[QUOTE_REPLY_SIZE];
};

static uint32_t next_random(struct connection *c) {
  c->rng ^= c->rng << 13;
  c->rng ^= c->rng >> 17;
  c->rng ^= c->rng << 5;
  return c->rng;
}

/* The next request, and the reply it must get. */
static void prepare(struct connection *c) {
  const struct quote_table *t = &c->client->table;
  uint32_t r = next_random(c) % 100;
  if (r < 80) {
    const struct quote_entry *e = &t->entries[next_random(c) % t->count];
    quote_request_make(c->req, e->symbol, strlen(e->symbol));
  } else if (r < 95) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";
    char sym[QUOTE_SYMBOL_MAX];
    size_t len = 1 + next_random(c) % QUOTE_SYMBOL_MAX;
    for (size_t i = 0; i < len; i++)
      sym[i] = alphabet[next_random(c) % (sizeof alphabet - 1)];
    quote_request_make(c->req, sym, len);
  } else {
    switch (next_random(c) % 4) {
      case 0: /* length 0 */
        quote_request_raw(c->req, 0, "", 0);
        break;
      case 1: /* length beyond the field */
        quote_request_raw(c->req, 33 + next_random(c) % 1000, "ACE", 3);
        break;
      case 2: /* a byte outside the alphabet */
        quote_request_raw(c->req, 3, "a c", 3);
        break;
      default: /* padding that is not zero */
        quote_request_raw(c->req, 2, "HPX", 3);
        break;
    }
  }
  quote_answer(t, c->req, c->want);
  c->sent = c->received = 0;
  c->limit = QUOTE_REQUEST_SIZE;
  if (c->client->split)
    c->limit = 1 + next_random(c) % (QUOTE_REQUEST_SIZE - 1);
  c->started = taxi_now();
}

static int finish(struct connection *c) {
  struct client *cl = c->client;
  if (--cl->running == 0) taxi_reactor_stop(cl->reactor);
  return -1; /* taxi removes the handler and runs its close hook */
}

/* The server ended the connection, or an error: what was due is missing. */
static int dropped(struct connection *c, const char *what) {
  struct client *cl = c->client;
  if (cl->requests) {
    fprintf(stderr, "quote_client: connection %lu, request %lu: %s\n",
            c->base.id, c->done + 1, what);
    cl->missing += cl->requests - c->done;
  } else if (c->sent || !cl->draining) {
    cl->missing++;
  }
  if (c->sent) cl->outstanding--;
  return finish(c);
}

static int follow(struct connection *c) {
  int rc = client_conn_follow(&c->base, c->sent < QUOTE_REQUEST_SIZE);
  return rc < 0 ? dropped(c, taxi_strerror(rc)) : 0;
}

static int send_some(struct connection *c) {
  while (c->sent < QUOTE_REQUEST_SIZE) {
    size_t n;
    if (c->sent == c->limit) {
      /* --split: the rest at the next writable event, after a trip
       * through the reactor, so that it likely arrives on its own. */
      c->limit = QUOTE_REQUEST_SIZE;
      return follow(c);
    }
    switch (echo_send(c->base.fd, c->req + c->sent, c->limit - c->sent, &n)) {
      case ECHO_IO_OK:
        if (c->sent == 0) c->client->outstanding++;
        c->sent += n;
        break;
      case ECHO_IO_AGAIN:
        return follow(c);
      default:
        return dropped(c, echo_last_error());
    }
  }
  return follow(c);
}

static int connection_input(struct client_conn *base) {
  struct connection *c = (struct connection *)base;
  struct client *cl = c->client;
  size_t n;

  switch (echo_recv(c->base.fd, c->got + c->received,
                    QUOTE_REPLY_SIZE - c->received, &n)) {
    case ECHO_IO_OK:
      break;
    case ECHO_IO_AGAIN:
      return 0;
    case ECHO_IO_EOF:
      return dropped(c, "the server closed the connection");
    default:
      return dropped(c, echo_last_error());
  }
  if (c->sent < QUOTE_REQUEST_SIZE) {
    cl->wrong++;
    fprintf(stderr,
            "quote_client: connection %lu: a reply before the "
            "request was sent\n",
            c->base.id);
    taxi_reactor_stop(cl->reactor);
    return -1;
  }
  c->received += n;
  if (c->received < QUOTE_REPLY_SIZE) return 0;
  cl->outstanding--;
  if (memcmp(c->got, c->want, QUOTE_REPLY_SIZE) != 0) {
    cl->wrong++;
    fprintf(stderr,
            "quote_client: connection %lu, request %lu (symbol field "
            "\"%.32s\"): wrong answer\n",
            c->base.id, c->done + 1, (const char *)c->req + 4);
    taxi_reactor_stop(cl->reactor);
    return -1;
  }
  cl->histogram[bucket_of((uint64_t)(taxi_now() - c->started) / 1000)]++;
  cl->answered++;
  if (c->done++ == 0 && !cl->draining) cl->served++;
  if ((cl->requests && c->done == cl->requests) || cl->draining)
    return finish(c);
  prepare(c);
  return send_some(c);
}

static int connection_output(struct client_conn *base) {
  return send_some((struct connection *)base);
}

/* One timer: with --duration first the end of sending, then the end of
 * the grace period; with --requests the time limit. */
struct timer {
  taxi_handler_t handler;
  taxi_timer_t timer;
  struct client *client;
  int phase;
};

static int timer_fired(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  struct timer *w = TAXI_CONTAINER_OF(h, struct timer, handler);
  struct client *cl = w->client;
  (void)act;
  if (w->phase == 0 && !cl->requests) {
    w->phase = 1;
    cl->draining = 1;
    if (cl->outstanding == 0) {
      taxi_reactor_stop(cl->reactor);
      return 0;
    }
    return taxi_reactor_schedule(cl->reactor, t, h,
                                 (taxi_time_t)GRACE_S * TAXI_NSEC_PER_SEC, 0,
                                 NULL) < 0
               ? -1
               : 0;
  }
  cl->timed_out = !cl->draining;
  taxi_reactor_stop(cl->reactor);
  return 0;
}

static const taxi_handler_ops_t timer_ops = {.timeout = timer_fired};

static int connection_open(struct client *cl, const char *host, unsigned port,
                           unsigned long id, unsigned long seed) {
  struct connection *c = calloc(1, sizeof *c);
  if (c == NULL) {
    fprintf(stderr, "quote_client: out of memory\n");
    return -1;
  }
  if (echo_connect(host, port, &c->base.fd) != 0) {
    free(c);
    cl->refused++;
    if (cl->requests) {
      fprintf(stderr, "quote_client: %s\n", echo_last_error());
      return -1;
    }
    return 0;
  }
  c->client = cl;
  c->base.id = id;
  c->rng = (uint32_t)(seed * 2654435761u + id * 40503u) | 1u;
  prepare(c);
  if (client_conn_register(&c->base, cl->reactor, connection_input,
                           connection_output, "quote_client") != 0)
    return -1;
  cl->running++;
  return 0;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: quote_client --port P --quotes FILE [--host ADDR]\n"
          "                    [--connections C] [--requests R | --duration "
          "S]\n"
          "                    [--seed N] [--time-limit S] [--split]\n"
          "  --port P          the quote server's port\n"
          "  --quotes FILE     the quote table the server was given\n"
          "  --host ADDR       the server's address (default 127.0.0.1)\n"
          "  --connections C   connections at once (default 4)\n"
          "  --requests R      requests per connection (default 1000)\n"
          "  --duration S      send for S seconds instead\n"
          "  --seed N          varies the requests (default 1)\n"
          "  --time-limit S    with --requests: give up after S s (60)\n"
          "  --split           send each request in two pieces\n");
}

static uint64_t percentile(const struct client *cl, double p) {
  uint64_t total = 0, seen = 0, want;
  for (unsigned i = 0; i < BUCKETS; i++) total += cl->histogram[i];
  if (total == 0) return 0;
  want = (uint64_t)((double)total * p);
  if (want >= total) want = total - 1;
  for (unsigned i = 0; i < BUCKETS; i++) {
    seen += cl->histogram[i];
    if (seen > want) return bucket_value(i);
  }
  return bucket_value(BUCKETS - 1);
}

int main(int argc, char **argv) {
  static struct client cl;
  const char *host = "127.0.0.1", *quotes = NULL;
  unsigned port = 0;
  unsigned long connections = 4, requests = 1000, duration = 0, seed = 1;
  unsigned long time_limit = 60;
  int have_port = 0, status = EXIT_OK, rc;
  struct timer timer;
  taxi_time_t start, elapsed;
  char err[300];

  const struct echo_arg args[] = {
      {"--split", ECHO_ARG_FLAG, &cl.split, 0, 0, NULL},
      {"--port", ECHO_ARG_PORT, &port, 0, 0, &have_port},
      {"--host", ECHO_ARG_TEXT, &host, 0, 0, NULL},
      {"--quotes", ECHO_ARG_TEXT, &quotes, 0, 0, NULL},
      {"--connections", ECHO_ARG_COUNT, &connections, 1, MAX_CONNECTIONS, NULL},
      {"--requests", ECHO_ARG_COUNT, &requests, 1, 1000000000ul, NULL},
      {"--duration", ECHO_ARG_COUNT, &duration, 1, 86400, NULL},
      {"--seed", ECHO_ARG_COUNT, &seed, 0, 4000000000ul, NULL},
      {"--time-limit", ECHO_ARG_COUNT, &time_limit, 1, 86400, NULL},
  };
  rc = echo_parse_args("quote_client", argc, argv, args,
                       sizeof args / sizeof args[0], usage);
  if (rc != 0) return rc > 0 ? EXIT_OK : EXIT_USAGE;
  if (!have_port || quotes == NULL) {
    fprintf(stderr, "quote_client: --port and --quotes are required\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  if (quote_table_load(&cl.table, quotes, err, sizeof err) != 0) {
    fprintf(stderr, "quote_client: %s\n", err);
    return EXIT_USAGE;
  }
  cl.requests = duration ? 0 : requests;
  if (echo_net_init() != 0) {
    fprintf(stderr, "quote_client: %s\n", echo_last_error());
    quote_table_free(&cl.table);
    return EXIT_ERROR;
  }
  rc = taxi_reactor_create(&cl.reactor, NULL);
  if (rc < 0) {
    fprintf(stderr, "quote_client: cannot create the reactor: %s\n",
            taxi_strerror(rc));
    quote_table_free(&cl.table);
    echo_net_cleanup();
    return EXIT_ERROR;
  }
  for (unsigned long id = 1; id <= connections; id++)
    if (connection_open(&cl, host, port, id, seed) != 0) {
      status = EXIT_ERROR;
      goto out;
    }
  timer.client = &cl;
  timer.phase = 0;
  taxi_handler_init(&timer.handler, &timer_ops);
  taxi_timer_init(&timer.timer);
  rc = taxi_reactor_schedule(
      cl.reactor, &timer.timer, &timer.handler,
      (taxi_time_t)(duration ? duration : time_limit) * TAXI_NSEC_PER_SEC, 0,
      NULL);
  if (rc < 0) {
    fprintf(stderr, "quote_client: cannot arm the timer: %s\n",
            taxi_strerror(rc));
    status = EXIT_ERROR;
    goto out;
  }
  start = taxi_now();
  rc = cl.running ? taxi_reactor_run(cl.reactor) : TAXI_ESTOPPED;
  if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  elapsed = taxi_now() - start;
  if (rc < 0) {
    fprintf(stderr, "quote_client: event loop failed: %s\n", taxi_strerror(rc));
    status = EXIT_ERROR;
  } else {
    double seconds = (double)elapsed / (double)TAXI_NSEC_PER_SEC;
    /* With --duration the rate counts the sending time only. */
    if (duration && seconds > (double)duration) seconds = (double)duration;
    /* Connections still open now never finished: with --duration each
     * owes the reply to the request it sent; with --requests the rest. */
    cl.missing += cl.outstanding;
    if (cl.timed_out) {
      fprintf(stderr, "quote_client: timed out after %lu s\n", time_limit);
      status = EXIT_ERROR;
    }
    printf(
        "quote_client: connections=%lu requests=%llu seconds=%.2f "
        "rate=%.0f p50_us=%llu p99_us=%llu wrong=%llu missing=%llu "
        "starved=%lu refused=%lu\n",
        connections, cl.answered, seconds,
        seconds > 0 ? (double)cl.answered / seconds : 0.0,
        (unsigned long long)percentile(&cl, 0.50),
        (unsigned long long)percentile(&cl, 0.99), cl.wrong, cl.missing,
        connections - cl.refused - cl.served, cl.refused);
    if (cl.wrong)
      status = EXIT_ERROR;
    else if (cl.missing || cl.refused || cl.timed_out)
      status = duration && !cl.timed_out ? EXIT_MISSING : EXIT_ERROR;
  }
out:
  taxi_reactor_destroy(cl.reactor);
  quote_table_free(&cl.table);
  echo_net_cleanup();
  return status;
}
