/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/apr_port/common.h - what the APR server and its taxi port share:
 * options, the listening socket, and the protocol.  Neither the protocol
 * nor the sockets change in the port; only who waits for readiness and
 * which thread serves a request does, and that is all that differs between
 * apr_server.c and taxi_server.c.
 *
 * The protocol, one request per line, one answer line per request:
 *
 *     PING             -> PONG
 *     ECHO text        -> text
 *     UPPER text       -> TEXT
 *     SUM 1 2 -3       -> 0          (decimal integers)
 *     COUNT            -> how many requests this connection has made,
 *                         this one included
 *     anything else    -> ERR unknown command
 *     a line longer than PORT_LINE_MAX -> ERR line too long
 *
 * With --echo the servers send back every byte instead (the protocol of
 * the echo benchmark, tests/bench).
 */
#ifndef TAXI_EXAMPLES_APR_PORT_COMMON_H
#define TAXI_EXAMPLES_APR_PORT_COMMON_H

#include <apr_network_io.h>
#include <apr_pools.h>

#include <stdatomic.h>

#define PORT_LINE_MAX 1024

typedef struct port_options {
  const char *prog; /* "apr_server" or "taxi_server", for messages */
  const char *host;
  int port;
  unsigned threads;
  const char *backend; /* apr_server: pollset method; taxi_server: backend */
  int echo;
} port_options_t;

/* Parse the command line:
 *   --port P [--host H] [--threads N] [--backend NAME] [--echo]
 * Returns 0, or 2 after printing a usage message. */
int port_parse(port_options_t *o, int argc, char **argv);

/* A non-blocking (timeout 0) listening socket on o->host:o->port, in
 * `pool`; the port bound is stored in *bound. */
apr_status_t port_listen(apr_socket_t **out, apr_port_t *bound,
                         const port_options_t *o, apr_pool_t *pool);

/* Send all of data on a socket with timeout 0, waiting for room when the
 * socket buffer is full (at most 10 s at a time). */
apr_status_t port_send_all(apr_socket_t *s, const char *data, apr_size_t len);

/* One connection's protocol state. */
typedef struct port_session {
  char line[PORT_LINE_MAX + 1];
  apr_size_t len;
  int overflow; /* discarding the rest of a line too long */
  unsigned long requests;
  int echo;
} port_session_t;

void port_session_init(port_session_t *s, int echo);

/* Take n received bytes and send the answers they complete on sock.
 * Returns APR_SUCCESS or the status of a failed send. */
apr_status_t port_session_feed(port_session_t *s, const char *data,
                               apr_size_t n, apr_socket_t *sock);

/* What a server did, printed when it stops. */
typedef struct port_counters {
  atomic_ulong connections;
  atomic_ulong bytes;
} port_counters_t;

#endif /* TAXI_EXAMPLES_APR_PORT_COMMON_H */
