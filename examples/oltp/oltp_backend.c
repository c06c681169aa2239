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

/* One request: run it, queue its reply. */
static int serve(taxi_stream_t *s, const unsigned char *frame) {
  struct oltp_request req;
  struct oltp_reply rep;
  unsigned char out[OLTP_FRAME];
  oltp_request_decode(frame, &req);
  oltp_table_execute(table, &req, &rep);
  oltp_reply_encode(&rep, out);
  return taxi_stream_write(s, out, sizeof out, NULL, NULL);
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
  char text[TAXI_ADDR_STRLEN];
  if (oltp_serve(io, host, port, serve, "oltp_backend", text, sizeof text) <
      0) {
    taxi_io_destroy(io);
    oltp_table_destroy(table);
    return OLTP_EXIT_ERROR;
  }
  oltp_stop_on_signals(io, "oltp_backend");
  printf(
      "oltp_backend: dispatcher=%s threads=%u accounts=%lu listening on %s\n",
      taxi_io_dispatcher_name(o.dispatcher), taxi_io_threads(io), accounts,
      text);
  fflush(stdout);

  rc = taxi_io_run(io);
  if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
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
