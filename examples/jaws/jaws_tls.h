/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_tls.h - HTTPS for the strategies over taxi's stream
 * layer: the server context made from --tls-cert and --tls-key, its
 * reload on SIGHUP, and the handshake a connection owes before its
 * header timeout.
 *
 * One context serves every TLS listener; a reload makes a new one from
 * the same files and gives it to the TLS listener (taxi_listener_set_tls),
 * so new connections get the new certificate while streams accepted
 * before keep the context they started with.  A reload that fails (a
 * file missing or refused, a key that does not match) keeps the old one
 * and says why.
 */
#ifndef JAWS_TLS_H
#define JAWS_TLS_H

#include <stddef.h>

#include <taxi/taxi.h>
#include <taxi/tls.h>

#include "jaws.h"

/* The ALPN protocol jaws offers: it speaks HTTP/1.1 only. */
#define JAWS_TLS_ALPN "http/1.1"

/* A server context from cfg's --tls-cert and --tls-key (ALPN
 * JAWS_TLS_ALPN): 0 and *out set (the caller's reference), or -1 after a
 * message on stderr saying which file and why. */
int jaws_tls_create(const struct jaws_config *cfg, taxi_tls_context_t **out);

/* A signal callback (taxi_io_on_signal, arg the struct jaws_server):
 * reloads the certificate and key into srv->tls_listener and logs the
 * outcome on stderr. */
void jaws_tls_on_reload(taxi_io_t *io, int signo, void *arg);

/* HOST:PORT of listener l into out[cap] ("?" when unknown). */
void jaws_listener_text(const taxi_listener_t *l, char *out, size_t cap);

#endif /* JAWS_TLS_H */
