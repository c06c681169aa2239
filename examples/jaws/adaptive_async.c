/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/adaptive_async.c - the adaptive strategy's ASYNC side (see
 * strategy_adaptive.c): the Proactor's reads, accepts and header-timeout
 * sweep of the connections it serves.
 */
#include "adaptive.h"

void adaptive_on_read(taxi_stream_t *s, int status, const void *data,
                      size_t len) {
  struct conn *c = taxi_stream_data(s);
  pthread_mutex_lock(&c->lock);
  jaws_stream_read_done(&c->sc, adaptive_on_read, status, data, len);
  pthread_mutex_unlock(&c->lock);
}

/* A connection the Proactor accepted (while proactor_accepts, or taken
 * by an accept in progress as the pool took over again, or on the TLS
 * listener): ASYNC's from its start. */
void adaptive_on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct adaptive *ad = arg;
  char peer[TAXI_ADDR_STRLEN];
  struct conn *c;
  (void)l;
  if (!jaws_stream_admit(ad->srv, s)) return;
  jaws_stream_peer(s, peer, sizeof peer);
  if ((c = adaptive_conn_new(ad, peer)) == NULL) {
    jaws_leave(ad->srv);
    taxi_stream_close(s);
    return;
  }
  pthread_mutex_lock(&c->lock);
  adaptive_become_async(c, s);
  jaws_stream_accepted(&c->sc, s);
  /* A TLS connection is ASYNC's by design, not moved there. */
  if (c->sc.handshaking) {
    atomic_fetch_add(&ad->tls_accepted, 1);
  } else {
    atomic_fetch_add(&ad->moves[AT_ACCEPT], 1);
    atomic_fetch_add(&ad->accepted, 1);
  }
  jaws_stream_settle(&c->sc, adaptive_on_read,
                     http_session_process(c->sc.sess, jaws_now_ms()));
  pthread_mutex_unlock(&c->lock);
}

void adaptive_on_sweep(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  struct conn *late[SWEEP_BATCH];
  size_t n = 0;
  int64_t now = jaws_now_ms();
  (void)t;
  pthread_mutex_lock(&ad->list_lock);
  for (struct conn *c = ad->list; c && n < SWEEP_BATCH; c = c->next) {
    if (pthread_mutex_trylock(&c->lock) != 0) continue;
    if (!c->moving && jaws_stream_overdue(&c->sc, ad->srv, now)) {
      atomic_fetch_add(&c->refs, 1);
      late[n++] = c;
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&ad->list_lock);
  for (size_t i = 0; i < n; i++) {
    struct conn *c = late[i];
    pthread_mutex_lock(&c->lock);
    if (!c->moving && jaws_stream_overdue(&c->sc, ad->srv, now))
      jaws_stream_expire(&c->sc, adaptive_on_read);
    pthread_mutex_unlock(&c->lock);
    adaptive_conn_unref(c);
  }
}
