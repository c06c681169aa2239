/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_tls.c - see jaws_tls.h.
 */
#include "jaws_tls.h"

#include <stdio.h>

int jaws_tls_create(const struct jaws_config *cfg, taxi_tls_context_t **out) {
  taxi_tls_options_t to;
  int rc;
  taxi_tls_options_init(&to);
  to.cert_file = cfg->tls_cert;
  to.key_file = cfg->tls_key;
  to.alpn = JAWS_TLS_ALPN;
  if ((rc = taxi_tls_server_create(out, &to)) == 0) return 0;
  if (rc == TAXI_ENOTSUP)
    fprintf(stderr, "jaws: TLS: this build has no TLS engine (%s)\n",
            taxi_strerror(rc));
  else
    fprintf(stderr, "jaws: TLS: certificate %s, key %s: %s (%s)\n",
            cfg->tls_cert, cfg->tls_key, taxi_strerror(rc),
            taxi_error_detail());
  return -1;
}

void jaws_tls_on_reload(taxi_io_t *io, int signo, void *arg) {
  struct jaws_server *srv = arg;
  taxi_tls_context_t *c;
  int rc;
  (void)io;
  /* Files are read here, in a dispatching thread: a reload is rare and
   * small (two PEM files), and the old context serves meanwhile. */
  if (jaws_tls_create(&srv->cfg, &c) != 0) {
    fprintf(stderr,
            "jaws: signal %d: TLS reload failed: the certificate in use "
            "stays\n",
            signo);
    return;
  }
  rc = taxi_listener_set_tls(srv->tls_listener, c);
  taxi_tls_context_unref(c); /* the listener holds its own */
  if (rc < 0) {
    fprintf(stderr, "jaws: signal %d: TLS reload not applied: %s\n", signo,
            taxi_strerror(rc));
    return;
  }
  atomic_fetch_add(&srv->tls_reloads, 1);
  fprintf(stderr,
          "jaws: signal %d: TLS reloaded: certificate %s, key %s for new "
          "connections\n",
          signo, srv->cfg.tls_cert, srv->cfg.tls_key);
}

void jaws_listener_text(const taxi_listener_t *l, char *out, size_t cap) {
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  if (taxi_listener_address(l, &a) != 0 ||
      taxi_addr_format(&a, text, sizeof text) < 0)
    snprintf(out, cap, "?");
  else
    snprintf(out, cap, "%s", text);
}
