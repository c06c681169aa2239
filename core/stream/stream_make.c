/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_make.c - making streams the application asks for: a
 * connection made in the background (taxi_stream_connect, to an address
 * or to a host name: core/stream/stream_dial.c races the addresses), and a
 * stream of a connected socket the application has (taxi_stream_open).
 * Accepted streams are made by core/stream/listener.c.  Calls
 * stream_connect.c (a connection to one address), stream_dial.c (the race
 * of a name's addresses), host_names.c, stream.c (a new stream, its
 * start), stream_settings.c (its options) and address.c.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/io_impl.h"
#include "core/stream/tls_engine.h"

/* A host name: a stream without a socket yet, which races the name's
 * addresses (core/stream/stream_dial.c) and takes the winner's. */
static int connect_name(taxi_stream_t **out, taxi_io_t *io, const char *host,
                        unsigned port, const taxi_stream_options_t *o,
                        taxi_stream_connect_fn fn, void *arg) {
  taxi_stream_t *s;
  int rc = taxi__stream_new(io, TAXI_INVALID_HANDLE, o, NULL, false, &s);
  if (rc < 0) return rc;
  s->keep_handle = true; /* none to close until the dial gives one */
  s->connect_fn = fn;
  s->connect_arg = arg;
  s->data = arg;
  s->flags |= TAXI__S_CONNECTING | TAXI__S_DIALING;
  rc = taxi__dial_start(s, host, port, o);
  if (rc < 0) {
    taxi__stream_discard(s);
    return rc;
  }
  *out = s;
  taxi__stream_start(s, false);
  return 0;
}

int taxi_stream_connect(taxi_stream_t **out, taxi_io_t *io, const char *address,
                        const taxi_stream_options_t *opts,
                        taxi_stream_connect_fn fn, void *arg) {
  taxi_stream_options_t o;
  taxi_addr_t a;
  if (!out || !io || !address)
    return taxi__refuse(TAXI_EINVAL, "taxi_stream_connect: %s: NULL",
                        !out  ? "out"
                        : !io ? "io"
                              : "address");
  if (taxi__io_foreign(io))
    return taxi__stream_refuse_foreign("taxi_stream_connect");
  int rc = taxi__stream_options(&o, opts, "taxi_stream_connect: options");
  if (rc < 0) return rc;
  char host[TAXI_RESOLVE_NAME_MAX + 1];
  unsigned port;
  if (o.tls && o.tls->server)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_stream_connect: options.tls: a server context "
                        "(a connect makes a client: taxi_tls_client_create)");
  /* A TLS client's name to verify: the host of the address, as given. */
  if (o.tls && !o.tls_server_name &&
      taxi__host_port_split(address, host, &port, "taxi_stream_connect") == 0)
    o.tls_server_name = host;
  rc = taxi_addr_parse(&a, address);
  if (rc == 0) return taxi__stream_connect_to(out, io, &a, &o, fn, NULL, arg);
  if (rc != TAXI_EBADADDR) return rc;
  /* Not a numeric address: a host name, or a mistake the split names. */
  rc = taxi__host_port_split(address, host, &port, "taxi_stream_connect");
  if (rc < 0) return rc;
  return connect_name(out, io, host, port, &o, fn, arg);
}

int taxi_stream_open(taxi_stream_t **out, taxi_io_t *io, taxi_handle_t h,
                     const taxi_stream_options_t *opts) {
  taxi_stream_options_t o;
  if (!out || !io)
    return taxi__refuse(TAXI_EINVAL, "taxi_stream_open: %s: NULL",
                        !out ? "out" : "io");
  if (taxi__io_foreign(io))
    return taxi__stream_refuse_foreign("taxi_stream_open");
  int rc = taxi__stream_options(&o, opts, "taxi_stream_open: options");
  if (rc < 0) return rc;
  if (h == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  rc = taxi__set_nonblocking(h);
  if (rc < 0) return rc;
  taxi_stream_t *s;
  rc = taxi__stream_new(io, h, &o, NULL, false, &s);
  if (rc < 0) return rc;
  taxi_addr_t peer;
  if (taxi__sock_peer_addr(h, &peer) == 0 && peer.family) s->peer = peer;
  *out = s;
  /* No round yet: its first comes with the application's first call that
   * needs one (read_start, a write, set_timeouts, close, ...), so that
   * nothing - a timeout among them - can close the stream, and free it,
   * before the caller has set its callbacks. */
  taxi__stream_lock(s);
  s->pending |= TAXI__P_WORK;
  s->flags &= ~TAXI__S_BUSY;
  taxi__stream_unlock(s);
  return 0;
}
