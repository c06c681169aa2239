/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_common.c - the connection handler the Reactor load clients share
 * (see client_common.h).
 */
#include "client_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "echo_common.h"

static int client_conn_input(taxi_handler_t *h, taxi_handle_t fd,
                             unsigned events) {
  struct client_conn *c = TAXI_CONTAINER_OF(h, struct client_conn, handler);
  (void)fd;
  (void)events; /* hang-ups and errors show up as EOF or error from recv */
  return c->on_input(c);
}

static int client_conn_output(taxi_handler_t *h, taxi_handle_t fd,
                              unsigned events) {
  struct client_conn *c = TAXI_CONTAINER_OF(h, struct client_conn, handler);
  (void)fd;
  /* READ is always watched, so hang-ups go to the input step; an error
   * reported here is also returned by the send. */
  (void)events;
  return c->on_output(c);
}

static void client_conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  struct client_conn *c = TAXI_CONTAINER_OF(h, struct client_conn, handler);
  (void)fd;
  echo_close(c->fd);
  free(c); /* the first member: the whole connection */
}

static const taxi_handler_ops_t client_conn_ops = {
    .input = client_conn_input,
    .output = client_conn_output,
    .close = client_conn_close,
};

int client_conn_register(struct client_conn *c, taxi_reactor_t *reactor,
                         client_conn_step_fn on_input,
                         client_conn_step_fn on_output, const char *prog) {
  int rc;
  c->reactor = reactor;
  c->on_input = on_input;
  c->on_output = on_output;
  c->interest = TAXI_EV_READ | TAXI_EV_WRITE;
  taxi_handler_init(&c->handler, &client_conn_ops);
  rc = taxi_reactor_register(reactor, c->fd, &c->handler, c->interest);
  if (rc < 0) {
    fprintf(stderr, "%s: cannot watch connection %lu: %s\n", prog, c->id,
            taxi_strerror(rc));
    echo_close(c->fd); /* not attached: its close hook will not run */
    free(c);
    return -1;
  }
  return 0;
}

int client_conn_follow(struct client_conn *c, int want_write) {
  unsigned interest = TAXI_EV_READ;
  int rc;
  if (want_write) interest |= TAXI_EV_WRITE;
  if (interest == c->interest) return 0;
  rc = taxi_reactor_modify(c->reactor, &c->handler, interest);
  if (rc < 0) return rc;
  c->interest = interest;
  return 0;
}
