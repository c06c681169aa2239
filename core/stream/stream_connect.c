/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_connect.c - a stream connecting to one address in the
 * background: the socket opened, the stream made around it and the
 * driver's connect started.  What taxi_stream_connect (stream_make.c) does
 * for a numeric address, and what each attempt of a race between a name's
 * addresses (stream_dial.c) does.  Calls stream.c, the driver through its
 * table and the ports.
 */
#include "config.h"

#include "core/stream/io_impl.h"

int taxi__stream_connect_to(taxi_stream_t **out, taxi_io_t *io,
                            const taxi_addr_t *a,
                            const taxi_stream_options_t *o,
                            taxi_stream_connect_fn fn,
                            taxi_stream_close_fn close_fn, void *arg) {
  taxi_handle_t fd;
  int rc = taxi__sock_open(a, &fd);
  if (rc < 0) return rc;
  taxi_stream_t *s;
  rc = taxi__stream_new(io, fd, o, NULL, false, &s);
  if (rc < 0) {
    taxi__close(fd);
    return rc;
  }
  s->peer = *a;
  s->own_fd = true; /* made here; nothing runs it yet: no lock needed */
  s->connect_fn = fn;
  s->connect_arg = arg;
  s->close_fn = close_fn;
  s->data = arg;
  s->flags |= TAXI__S_CONNECTING;
  taxi__stream_lock(s);
  /* A failure to start is reported like any other: through fn, from a
   * dispatching thread. */
  rc = io->drv->connect_start(s, a);
  if (rc < 0 && rc != TAXI_EAGAIN) s->conn_err = rc;
  taxi__stream_unlock(s);
  *out = s;
  taxi__stream_start(s, false);
  return 0;
}
