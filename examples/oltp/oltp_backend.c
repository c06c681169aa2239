/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oltp_backend.c - the back-end database server of the OLTP example: a
 * table of accounts in memory, transactions from any number of
 * connections (clients, or front ends multiplexing many clients on a few
 * connections), each run by whichever thread the dispatcher gives it.
 *
 *     oltp_backend [--port P] [--host H] [--dispatcher lf|hsha|reactor|
 *                  proactor] [--threads N] [--backend B] [--accounts N]
 *                  [--initial AMOUNT] [--work UNITS]
 *
 * The paper's back end runs an unbound Leader/Followers pool (--dispatcher
 * lf, the default); --dispatcher hsha runs the half-sync/half-async pool
 * it is measured against, with the same handlers.  It prints
 *
 *     oltp_backend: dispatcher=D threads=N accounts=A listening on H:P
 *
 * serves until SIGINT or SIGTERM, then prints how many transactions it ran.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "../echo_common.h"
#include "oltp.h"

static struct oltp_table *table;

static void on_close(taxi_stream_t *s, int status) {
  (void)status;
  free(taxi_stream_data(s));
}

/* One request: run it, queue its reply. */
static int serve(void *arg, const unsigned char *frame) {
  taxi_stream_t *s = arg;
  struct oltp_request req;
  struct oltp_reply rep;
  unsigned char out[OLTP_FRAME];
  oltp_request_decode(frame, &req);
  oltp_table_execute(table, &req, &rep);
  oltp_reply_encode(&rep, out);
  return taxi_stream_write(s, out, sizeof out, NULL, NULL);
}

static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  if (status < 0)
    taxi_stream_end(s);
  else if (oltp_framer_feed(taxi_stream_data(s), data, len, serve, s) < 0)
    taxi_stream_close(s);
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  struct oltp_framer *c = calloc(1, sizeof *c); /* per connection */
  if (!c) {
    taxi_stream_close(s);
    return;
  }
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, on_close);
  taxi_stream_read_start(s, on_read);
}

static int usage(FILE *out, int status) {
  fprintf(out,
          "usage: oltp_backend [--port P] [--host H] [--dispatcher "
          "lf|hsha|reactor|proactor]\n"
          "                    [--threads N] [--backend B] [--accounts N] "
          "[--initial AMOUNT]\n"
          "                    [--work UNITS]\n");
  return status;
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1", *v;
  unsigned port = 0;
  unsigned long accounts = 1000, initial = 1000000, work = 0, threads = 0;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  o.dispatcher = TAXI_IO_LF;
  if (echo_net_init() < 0) {
    fprintf(stderr, "oltp_backend: %s\n", echo_last_error());
    return OLTP_EXIT_ERROR;
  }
  for (int i = 1; i < argc;) {
    int m;
    if ((m = echo_option(argc, argv, &i, "--port", &v)) != 0) {
      if (m < 0 || echo_parse_port(v, &port) < 0) return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--host", &v)) != 0) {
      if (m < 0) return usage(stderr, 2);
      host = v;
    } else if ((m = echo_option(argc, argv, &i, "--dispatcher", &v)) != 0) {
      if (m < 0 || taxi_io_dispatcher_parse(v, &o.dispatcher) < 0) {
        fprintf(stderr, "oltp_backend: unknown dispatcher %s\n",
                m < 0 ? "" : v);
        return usage(stderr, 2);
      }
    } else if ((m = echo_option(argc, argv, &i, "--backend", &v)) != 0) {
      if (m < 0) return usage(stderr, 2);
      o.backend = v;
    } else if ((m = echo_option(argc, argv, &i, "--threads", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 1, 1024, &threads) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--accounts", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 2, 1ul << 24, &accounts) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--initial", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 0, 1000000000ul, &initial) < 0)
        return usage(stderr, 2);
    } else if ((m = echo_option(argc, argv, &i, "--work", &v)) != 0) {
      if (m < 0 || echo_parse_count(v, 0, 1000000, &work) < 0)
        return usage(stderr, 2);
    } else if (strcmp(argv[i], "--help") == 0) {
      return usage(stdout, 0);
    } else {
      fprintf(stderr, "oltp_backend: unknown argument %s\n", argv[i]);
      return usage(stderr, 2);
    }
  }
  o.threads = (unsigned)threads;

  table =
      oltp_table_create((uint32_t)accounts, (int64_t)initial, (unsigned)work);
  if (!table) {
    fprintf(stderr, "oltp_backend: out of memory for %lu accounts\n", accounts);
    return OLTP_EXIT_ERROR;
  }
  taxi_io_t *io;
  int rc = taxi_io_create(&io, &o);
  if (rc < 0) {
    fprintf(stderr, "oltp_backend: cannot start: %s%s\n", taxi_strerror(rc),
            o.dispatcher == TAXI_IO_REACTOR && threads > 1
                ? " (the reactor dispatcher has one thread)"
                : "");
    oltp_table_destroy(table);
    return rc == TAXI_ENOTSUP || rc == TAXI_ENOBACKEND ? OLTP_EXIT_REFUSED
                                                       : OLTP_EXIT_ERROR;
  }
  char address[300], text[TAXI_ADDR_STRLEN];
  snprintf(address, sizeof address, strchr(host, ':') ? "[%s]:%u" : "%s:%u",
           host, port);
  /* A reply is as long as its request, so pausing reading while a read's
   * worth of replies would not fit means a reply always finds room: no
   * request waits in the program, none is refused.  (Peers that send
   * without reading are held back by TCP.) */
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.flags = TAXI_STREAM_PAUSE_READING | TAXI_STREAM_NODELAY;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  lo.stream = &so;
  taxi_listener_t *l;
  rc = taxi_listener_create(&l, io, address, &lo, on_accept, NULL);
  if (rc < 0) {
    fprintf(stderr, "oltp_backend: cannot listen on %s: %s\n", address,
            taxi_strerror(rc));
    taxi_io_destroy(io);
    oltp_table_destroy(table);
    return OLTP_EXIT_ERROR;
  }
  oltp_stop_on_signals(io, "oltp_backend");
  taxi_addr_t bound;
  taxi_listener_address(l, &bound);
  taxi_addr_format(&bound, text, sizeof text);
  printf(
      "oltp_backend: dispatcher=%s threads=%u accounts=%lu listening on %s\n",
      taxi_io_dispatcher_name(o.dispatcher), taxi_io_threads(io), accounts,
      text);
  fflush(stdout);

  rc = taxi_io_run(io);
  taxi_io_destroy(io);
  printf("oltp_backend: stopped after %llu transactions\n",
         (unsigned long long)oltp_table_transactions(table));
  oltp_table_destroy(table);
  echo_net_cleanup();
  if (rc < 0) {
    fprintf(stderr, "oltp_backend: stopped: %s\n", taxi_strerror(rc));
    return OLTP_EXIT_ERROR;
  }
  return OLTP_EXIT_OK;
}
