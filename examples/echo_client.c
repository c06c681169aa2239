/* SPDX-License-Identifier: Apache-2.0 */
/*
 * echo_client.c - a load generator for echo_server, itself a taxi Reactor
 * program.
 *
 *     echo_client --port P [--host 127.0.0.1] [--connections C]
 *                 [--messages M] [--size S] [--keep-going]
 *                 [--time-limit SECONDS]
 *
 * Opens C connections (default 4) and on each performs M round trips
 * (default 10000): send an S-byte message (default 64), read until all S
 * bytes have come back, check they are the bytes sent, repeat.  All the
 * connections run at once, multiplexed by one reactor in one thread, on the
 * backend taxi picks (set TAXI_BACKEND in the environment to choose).
 *
 * On success it prints
 *
 *     echo_client: 4 connections, 40000 round trips, 52345 round trips/s, all
 * verified
 *
 * and exits 0.  It exits 1 with a message if the server closes a connection
 * early, returns different bytes, or the whole run takes over 30 seconds
 * (--time-limit).
 *
 * With --keep-going, a connection the server closes or resets is counted
 * as dropped and the others carry on to the end: the client then exits 0
 * if none was dropped, 4 if some were but every other one completed with
 * every byte right (a test that made one connection fail on purpose checks
 * that the others lost nothing), and 1 otherwise.  Wrong bytes always end
 * the run at once.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "client_common.h"
#include "echo_common.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define EXIT_DROPPED 4 /* --keep-going: some connections dropped, rest fine */

/* The whole run must finish within this (seconds), or the client gives
 * up; --time-limit changes it. */
#define RUN_TIME_LIMIT_S 30ul

#define MAX_CONNECTIONS 10000ul
#define MAX_SIZE (16ul * 1024 * 1024)

struct client {
  taxi_reactor_t *reactor;
  unsigned long messages;         /* round trips per connection */
  size_t size;                    /* bytes per message */
  unsigned long running;          /* connections not finished yet */
  unsigned long long round_trips; /* completed, over all connections */
  unsigned long long total;       /* round trips to do, over all */
  int failed;
  int keep_going; /* --keep-going: a dropped connection ends only itself */
  unsigned long dropped; /* connections the server closed or reset */
  unsigned long time_limit_s;
};

/*
 * One connection.  A round trip is: send out[0 .. size), reading back into
 * in[0 .. size) at the same time.  Reading while still sending matters for
 * large messages: the server echoes as it receives, and if we did not drain
 * its replies, both sides' socket buffers could fill and stall for good.
 */
struct connection {
  struct client_conn base; /* first: the shared hooks free the whole block */
  struct client *client;
  unsigned long done;    /* round trips completed */
  size_t sent, received; /* progress of the current round trip */
  unsigned char *out, *in;
  unsigned char buffers[]; /* out and in, `size` bytes each */
};

/* Stop everything because of this connection; returns what the failing
 * hook should return (-1: remove the connection). */
static int connection_fail(struct connection *c, const char *what) {
  fprintf(stderr, "echo_client: connection %lu, round trip %lu: %s\n",
          c->base.id, c->done + 1, what);
  c->client->failed = 1;
  taxi_reactor_stop(c->client->reactor);
  return -1;
}

/* The server ended this connection (EOF, reset): fatal, unless
 * --keep-going, where only this connection ends. */
static int connection_dropped(struct connection *c, const char *what) {
  struct client *cl = c->client;
  if (!cl->keep_going) return connection_fail(c, what);
  fprintf(stderr, "echo_client: connection %lu, round trip %lu: %s (dropped)\n",
          c->base.id, c->done + 1, what);
  cl->dropped++;
  if (--cl->running == 0) taxi_reactor_stop(cl->reactor);
  return -1;
}

/* Fill the message for the next round trip.  The bytes differ between
 * connections and between round trips, so that a reply sent to the wrong
 * connection, or a stale one, does not pass the check by accident. */
static void connection_prepare(struct connection *c) {
  uint32_t x =
      (uint32_t)(c->base.id * 0x9E3779B9u) ^ (uint32_t)(c->done * 0x85EBCA6Bu);
  size_t i;

  for (i = 0; i < c->client->size; i++) {
    /* xorshift32: cheap and anything but constant */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c->out[i] = (unsigned char)(x >> 24);
  }
  c->sent = c->received = 0;
}

/* Register for what the connection needs now: replies always, and room to
 * write while part of the message is still unsent. */
static int connection_follow(struct connection *c) {
  int rc = client_conn_follow(&c->base, c->sent < c->client->size);
  return rc < 0 ? connection_fail(c, taxi_strerror(rc)) : 0;
}

/* Send as much of the current message as the socket takes now.
 * Returns 0, or -1 after connection_fail(). */
static int connection_send(struct connection *c) {
  while (c->sent < c->client->size) {
    size_t n;
    switch (echo_send(c->base.fd, c->out + c->sent, c->client->size - c->sent,
                      &n)) {
      case ECHO_IO_OK:
        c->sent += n;
        break;
      case ECHO_IO_AGAIN:
        return 0;
      default:
        return connection_dropped(c, echo_last_error());
    }
  }
  return 0;
}

static int connection_input(struct client_conn *base) {
  struct connection *c = (struct connection *)base;
  struct client *cl = c->client;
  size_t n;
  char what[96];

  switch (
      echo_recv(c->base.fd, c->in + c->received, cl->size - c->received, &n)) {
    case ECHO_IO_OK:
      break;
    case ECHO_IO_AGAIN:
      return 0;
    case ECHO_IO_EOF:
      snprintf(what, sizeof what,
               "server closed the connection (%zu of %zu "
               "bytes back)",
               c->received, cl->size);
      return connection_dropped(c, what);
    default:
      return connection_dropped(c, echo_last_error());
  }

  /* Check each piece as it arrives, against what was sent at that offset. */
  if (memcmp(c->in + c->received, c->out + c->received, n) != 0) {
    size_t at = c->received;
    while (c->in[at] == c->out[at]) at++;
    snprintf(what, sizeof what, "byte %zu came back as 0x%02x, sent 0x%02x", at,
             c->in[at], c->out[at]);
    return connection_fail(c, what);
  }
  c->received += n;
  if (c->received < cl->size) return 0; /* the rest is on its way */

  c->done++;
  cl->round_trips++;
  if (c->done == cl->messages) {
    /* This connection is finished; the last one to finish ends the run.
     * Returning -1 has taxi remove it and run its close hook. */
    if (--cl->running == 0) taxi_reactor_stop(cl->reactor);
    return -1;
  }
  /* Start the next round trip right away: the socket is almost certainly
   * writable, so trying before waiting for readiness saves a wait. */
  connection_prepare(c);
  if (connection_send(c) < 0) return -1;
  return connection_follow(c);
}

static int connection_output(struct client_conn *base) {
  struct connection *c = (struct connection *)base;
  if (connection_send(c) < 0) return -1;
  return connection_follow(c);
}

/* Connect, and hand the connection to the reactor; the reactor then owns it
 * (taxi_reactor_destroy() closes it if the run ends early).
 * Returns 0, or -1 after printing why. */
static int connection_open(struct client *cl, const char *host, unsigned port,
                           unsigned long id) {
  struct connection *c = malloc(sizeof *c + 2 * cl->size);

  if (c == NULL) {
    fprintf(stderr, "echo_client: out of memory\n");
    return -1;
  }
  if (echo_connect(host, port, &c->base.fd) != 0) {
    fprintf(stderr, "echo_client: %s\n", echo_last_error());
    free(c);
    return -1;
  }
  c->client = cl;
  c->base.id = id;
  c->done = 0;
  c->out = c->buffers;
  c->in = c->buffers + cl->size;
  connection_prepare(c);
  /* The first message goes out when the socket reports writable. */
  if (client_conn_register(&c->base, cl->reactor, connection_input,
                           connection_output, "echo_client") != 0)
    return -1;
  cl->running++;
  return 0;
}

/* Bounds the run: a server that stops answering must not hang the client
 * (or the test that runs it). */
struct watchdog {
  taxi_handler_t handler;
  taxi_timer_t timer;
  struct client *client;
};

static int watchdog_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  struct watchdog *w = TAXI_CONTAINER_OF(h, struct watchdog, handler);
  struct client *cl = w->client;
  (void)t;
  (void)act;
  fprintf(stderr,
          "echo_client: timed out after %lu s: %llu of %llu round trips done\n",
          cl->time_limit_s, cl->round_trips, cl->total);
  cl->failed = 1;
  taxi_reactor_stop(cl->reactor);
  return 0;
}

static const taxi_handler_ops_t watchdog_ops = {.timeout = watchdog_timeout};

static void usage(FILE *out) {
  fprintf(out,
          "usage: echo_client --port P [--host ADDR] [--connections C]\n"
          "                   [--messages M] [--size S] [--keep-going]\n"
          "                   [--time-limit SECONDS]\n"
          "  --port P          the echo server's port\n"
          "  --host ADDR       the echo server's address (default 127.0.0.1)\n"
          "  --connections C   connections to open at once (default 4)\n"
          "  --messages M      round trips on each connection (default 10000)\n"
          "  --size S          bytes per message (default 64)\n"
          "  --keep-going      a connection the server drops ends alone;\n"
          "                    exit 4 if some were dropped, the rest fine\n"
          "  --time-limit S    give up after S seconds (default 30)\n");
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1";
  unsigned port = 0;
  unsigned long connections = 4, messages = 10000, size = 64, id;
  unsigned long time_limit_s = RUN_TIME_LIMIT_S;
  int keep_going = 0, have_port = 0, status = EXIT_OK, rc;
  struct client cl;
  struct watchdog watchdog;
  taxi_time_t start, elapsed;

  const struct echo_arg args[] = {
      {"--keep-going", ECHO_ARG_FLAG, &keep_going, 0, 0, NULL},
      {"--port", ECHO_ARG_PORT, &port, 0, 0, &have_port},
      {"--host", ECHO_ARG_TEXT, &host, 0, 0, NULL},
      {"--connections", ECHO_ARG_COUNT, &connections, 1, MAX_CONNECTIONS, NULL},
      {"--messages", ECHO_ARG_COUNT, &messages, 1, 1000000000ul, NULL},
      {"--time-limit", ECHO_ARG_COUNT, &time_limit_s, 1, 86400, NULL},
      {"--size", ECHO_ARG_COUNT, &size, 1, MAX_SIZE, NULL},
  };
  rc = echo_parse_args("echo_client", argc, argv, args,
                       sizeof args / sizeof args[0], usage);
  if (rc != 0) return rc > 0 ? EXIT_OK : EXIT_USAGE;
  if (!have_port) {
    fprintf(stderr, "echo_client: --port is required\n");
    usage(stderr);
    return EXIT_USAGE;
  }

  if (echo_net_init() != 0) {
    fprintf(stderr, "echo_client: %s\n", echo_last_error());
    return EXIT_ERROR;
  }
  memset(&cl, 0, sizeof cl);
  cl.messages = messages;
  cl.size = size;
  cl.total = (unsigned long long)connections * messages;
  cl.keep_going = keep_going;
  cl.time_limit_s = time_limit_s;
  rc = taxi_reactor_create(&cl.reactor, NULL);
  if (rc < 0) {
    fprintf(stderr, "echo_client: cannot create the reactor: %s\n",
            taxi_strerror(rc));
    echo_net_cleanup();
    return EXIT_ERROR;
  }

  for (id = 1; id <= connections; id++) {
    if (connection_open(&cl, host, port, id) != 0) {
      status = EXIT_ERROR;
      goto out;
    }
  }

  watchdog.client = &cl;
  taxi_handler_init(&watchdog.handler, &watchdog_ops);
  taxi_timer_init(&watchdog.timer);
  rc = taxi_reactor_schedule(cl.reactor, &watchdog.timer, &watchdog.handler,
                             (taxi_time_t)time_limit_s * TAXI_NSEC_PER_SEC, 0,
                             NULL);
  if (rc < 0) {
    fprintf(stderr, "echo_client: cannot arm the time limit: %s\n",
            taxi_strerror(rc));
    status = EXIT_ERROR;
    goto out;
  }

  start = taxi_now();
  rc = taxi_reactor_run(cl.reactor);
  elapsed = taxi_now() - start;
  if (rc != TAXI_ESTOPPED) {
    fprintf(stderr, "echo_client: event loop failed: %s\n", taxi_strerror(rc));
    status = EXIT_ERROR;
  } else if (cl.failed) {
    status = EXIT_ERROR;
  } else {
    double seconds = (double)elapsed / (double)TAXI_NSEC_PER_SEC;
    printf(
        "echo_client: %lu connections, %llu round trips, %.0f round trips/s, "
        "all verified",
        connections, cl.round_trips,
        seconds > 0 ? (double)cl.round_trips / seconds : 0.0);
    if (cl.dropped) {
      printf("; %lu dropped by the server", cl.dropped);
      status = EXIT_DROPPED;
    }
    printf("\n");
  }

out:
  /* Closes whatever connections are still open, and disarms the watchdog. */
  taxi_reactor_destroy(cl.reactor);
  echo_net_cleanup();
  return status;
}
