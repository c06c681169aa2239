/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_common.h - what the Reactor load clients (echo_client,
 * quote_client) do alike with a connection: the handler and its hooks,
 * registering it, following what it waits for, closing it.
 *
 * Each client's connection struct starts with a struct client_conn, so that
 * the one ops table here serves both: its hooks find the client_conn from
 * the handler and call the client's own input and output steps, and its
 * close hook frees the whole connection (the client_conn is its first
 * member, so its address is the block's).
 *
 * All of it runs in the thread that runs the reactor (or before the run).
 */
#ifndef CLIENT_COMMON_H
#define CLIENT_COMMON_H

#include <taxi/taxi.h>

struct client_conn;

/* A client's step when the connection is readable or writable.  Returns
 * what a taxi input or output hook returns: 0 to keep the connection, -1
 * to have the reactor remove it (and run the close hook, which frees it). */
typedef int (*client_conn_step_fn)(struct client_conn *c);

struct client_conn {
  taxi_handler_t handler;
  taxi_reactor_t *reactor;
  taxi_handle_t fd;
  unsigned long id;
  unsigned interest; /* what is registered with the reactor */
  client_conn_step_fn on_input, on_output;
};

/*
 * client_conn_register - hand the connected c (its fd and id set, the rest
 * filled by this call) to the reactor, watching both directions: the first
 * request goes out when the socket reports writable.  The block c starts
 * must come from malloc(); from then on the reactor owns it, and
 * taxi_reactor_destroy() closes and frees it if the run ends early.
 * Returns 0, or -1 after printing why (prefixed by prog), closing fd and
 * freeing c.
 */
int client_conn_register(struct client_conn *c, taxi_reactor_t *reactor,
                         client_conn_step_fn on_input,
                         client_conn_step_fn on_output, const char *prog);

/*
 * client_conn_follow - watch reading always, and writing too while
 * want_write: a change is made only when it differs from what is watched.
 * Returns 0, or the taxi error of taxi_reactor_modify() (nothing changed).
 */
int client_conn_follow(struct client_conn *c, int want_write);

#endif /* CLIENT_COMMON_H */
