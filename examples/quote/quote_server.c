/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_server.c - the stock quote server of Schmidt and Vinoski's
 * thread-pool column, in every concurrency model that column and the
 * Leader/Followers paper discuss, chosen with --model (see usage()).
 * Every model answers the protocol of quote.h byte for byte.
 *
 * It prints, once ready,
 *
 *     quote_server: model=M ...
 *     quote_server: listening on HOST:PORT
 *
 * with the port actually bound (--port 0 lets the system choose), serves
 * until SIGINT or SIGTERM (Ctrl-C on Windows), then prints
 *
 *     quote_server: stopped after N requests
 *
 * and exits 0.  A bad command line exits 2, a failure to start 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../echo_common.h"
#include "quote_net.h"
#include "quote_server.h"

void (*volatile quote_wake_fn)(void);

static struct quote_server srv;

/* In a signal handler (or Windows' console thread). */
static void on_stop(void) {
  void (*fn)(void) = quote_wake_fn;
  atomic_store(&srv.stopping, 1);
  if (fn) fn();
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: quote_server --model MODEL --quotes FILE [--port P]\n"
          "                    [--host ADDR] [--threads N] [--backend B]\n"
          "  --model MODEL   how requests are given threads:\n"
          "                  iterative, thread-per-request,\n"
          "                  thread-per-connection, handle-queue (plain\n"
          "                  sockets and threads), reactor, lf, hsha,\n"
          "                  proactor (taxi)\n"
          "  --quotes FILE   the quote table (lines \"SYMBOL PRICE\")\n"
          "  --port P        port to listen on (default 0: any free one)\n"
          "  --host ADDR     address to listen on (default 127.0.0.1)\n"
          "  --threads N     pool size of handle-queue, lf, hsha and\n"
          "                  proactor (default 4)\n"
          "  --backend B     taxi's backend for reactor, lf, hsha\n"
          "                  (epoll, poll, ...) or proactor (uring, ...)\n");
}

int main(int argc, char **argv) {
  const char *quotes = NULL;
  char err[300];
  unsigned long threads = 4;
  int i = 1, status;

  srv.host = "127.0.0.1";
  while (i < argc) {
    const char *value;
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return QUOTE_EXIT_OK;
    }
    if ((m = echo_option(argc, argv, &i, "--model", &value)) > 0) {
      if (!quote_plain_model(value) && !quote_taxi_model(value)) {
        fprintf(stderr, "quote_server: unknown model '%s'\n", value);
        usage(stderr);
        return QUOTE_EXIT_USAGE;
      }
      srv.model = value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--port", &value)) > 0) {
      if (echo_parse_port(value, &srv.port) != 0) {
        fprintf(stderr, "quote_server: invalid port '%s'\n", value);
        return QUOTE_EXIT_USAGE;
      }
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--host", &value)) > 0) {
      srv.host = value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--threads", &value)) > 0) {
      if (echo_parse_count(value, 1, 1024, &threads) != 0) {
        fprintf(stderr, "quote_server: --threads must be 1 to 1024\n");
        return QUOTE_EXIT_USAGE;
      }
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--quotes", &value)) > 0) {
      quotes = value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--backend", &value)) > 0) {
      srv.backend = value;
    } else {
      if (m == 0)
        fprintf(stderr, "quote_server: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return QUOTE_EXIT_USAGE;
    }
  }
  if (srv.model == NULL || quotes == NULL) {
    fprintf(stderr, "quote_server: --model and --quotes are required\n");
    usage(stderr);
    return QUOTE_EXIT_USAGE;
  }
  if (srv.backend && !quote_taxi_model(srv.model)) {
    fprintf(stderr, "quote_server: --backend is for the taxi models only\n");
    return QUOTE_EXIT_USAGE;
  }
  srv.threads = (unsigned)threads;
  if (quote_table_load(&srv.table, quotes, err, sizeof err) != 0) {
    fprintf(stderr, "quote_server: %s\n", err);
    return QUOTE_EXIT_USAGE;
  }
  if (echo_net_init() != 0 || quote_on_stop(on_stop) != 0) {
    fprintf(stderr, "quote_server: cannot set up: %s\n", echo_last_error());
    quote_table_free(&srv.table);
    return QUOTE_EXIT_ERROR;
  }

  status = quote_plain_model(srv.model) ? quote_run_plain(&srv)
                                        : quote_run_taxi(&srv);
  if (status == QUOTE_EXIT_OK) {
    unsigned long long refused = atomic_load(&srv.refused);
    if (refused)
      fprintf(stderr, "quote_server: %llu connections refused\n", refused);
    printf("quote_server: stopped after %llu requests\n",
           (unsigned long long)atomic_load(&srv.requests));
  }
  quote_table_free(&srv.table);
  echo_net_cleanup();
  return status;
}
