/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_server.h - what quote_server.c (the command line) shares with the
 * two families of concurrency models: quote_plain.c (iterative,
 * thread-per-request, thread-per-connection, handle-queue: plain sockets
 * and POSIX threads, as the column writes them) and quote_taxi.c (reactor,
 * lf, hsha, proactor: taxi's stream layer on the dispatcher named).
 */
#ifndef QUOTE_SERVER_H
#define QUOTE_SERVER_H

#include <stdatomic.h>

#include "quote.h"

/* Exit statuses, as echo_server's. */
#define QUOTE_EXIT_OK 0
#define QUOTE_EXIT_ERROR 1
#define QUOTE_EXIT_USAGE 2

struct quote_server {
  struct quote_table table;
  const char *host;
  unsigned port;
  unsigned threads;    /* pool size (--threads) */
  const char *backend; /* --backend, NULL: taxi's choice */
  const char *model;
  atomic_ullong requests; /* answered, every model */
  atomic_ullong refused;  /* connections turned away (no thread, no room) */
  atomic_int stopping;    /* set by the stop handler */
};

/* Each runs the model until `stopping`, printing the listening line first;
 * returns an exit status. */
int quote_run_plain(struct quote_server *srv);
int quote_run_taxi(struct quote_server *srv);

/* quote_plain_model / quote_taxi_model - whether name is one of theirs. */
int quote_plain_model(const char *name);
int quote_taxi_model(const char *name);

/* The stop handler quote_server.c installs calls this: set `stopping`,
 * then what the model needs to be woken (taxi_io_stop). */
extern void (*volatile quote_wake_fn)(void);

#endif /* QUOTE_SERVER_H */
