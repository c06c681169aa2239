/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/strategy_adaptive.c - the adaptive strategy: the paper's
 * conclusion (an optimal server adapts its concurrency strategy to load
 * and file size) as a State pattern over its two winning models in one
 * process.
 *
 *   SYNC   the paper's synchronous Thread Pool (strategy_threads.c's
 *          thread-pool), made never to wait on a client: --threads
 *          threads (half the processors by default) each accept
 *          connections and serve them with plain system calls, reading
 *          and sending what is there, and wait (poll) for the listener
 *          and for the next bytes of the few connections they just
 *          accepted or answered.
 *   ASYNC  the Proactor (--backend; uring where it works, else taxi's
 *          default completion backend), with as many threads; it also
 *          runs the header-timeout sweep and the load timers.
 *
 * The server is in one of two states, decided every ADAPT_PERIOD by
 * adapt_policy.c (by default from what each state is measured to serve
 * in the regime of load the server is in; --adapt-policy threshold: from
 * the open connections and the share of large responses alone):
 *
 *   SYNC_ONLY  every response is sent by the pool thread that read its
 *              request;
 *   HYBRID     a large response goes out by the Proactor's transmit-file:
 *              its connection moves to ASYNC, and its thread goes back to
 *              its others.  Where nearly every response is large (90% of
 *              them, smoothed over periods), the Proactor accepts new
 *              connections itself and reads their requests too, and the
 *              pool's threads wait: reading a request on the pool only to
 *              hand the connection over with its answer cost 7-10% of the
 *              throughput with 5 MB files, and a pool thread accepting to
 *              hand each connection over costs a wake-up of the thread
 *              and one of the Proactor per connection.  Both accept from
 *              the one listening socket (the Proactor's listener adopts
 *              it, paused while the pool accepts): its queue is shared,
 *              so no connection is lost when accepting changes hands.
 *
 * A pool thread never waits on a client, since a few clients would
 * otherwise hold all its few threads (the synchronous pool's known
 * weakness) while the Proactor waits for them at no cost.  A connection
 * whose bytes are not there yet (just accepted, just answered, its head
 * in part) waits among its thread's pending connections (struct pending),
 * which hold no thread: the thread accepts and serves others meanwhile.
 * It moves to ASYNC, in either state:
 *
 *   - when it has waited HANDOFF_MS since its accept or its last answer
 *     (a client that connects and sends nothing, or a byte at a time, or
 *     keeps its connection for later), or is the oldest of PENDING_MAX
 *     waiting: a crowd of idle connections costs the pool an accept, a
 *     read and a move each, and never holds up the accepts of others;
 *   - when its socket is full: sends never wait for room, and what a
 *     client has not taken (a slow reader, one that never reads) goes
 *     out by the Proactor.
 *
 * Moves go one way: a connection in ASYNC stays there to its end (its
 * pool thread is serving others by then).
 *
 * A move happens between responses, or within one whose socket filled:
 * the session hands the sink a response (and perhaps pipelined ones after
 * it) that the sink keeps, or the part of it the socket did not take; the
 * pool thread then opens the socket as a stream in ASYNC
 * (taxi_stream_open), queues the kept responses there and reads on.  The
 * session, with any pipelined requests in its buffer, goes with it.
 *
 * The parts: see adaptive.h.
 */
#include "adaptive.h"

static void say_stderr(void *arg, const char *line) {
  (void)arg;
  fprintf(stderr, "%s\n", line);
}

static void on_count(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  (void)t;
  /* The pool admits only as many connections as it has threads: the
   * others wait in the listener's queue, and count. */
  atomic_fetch_add(&ad->conn_sum, atomic_load(&ad->srv->connections) +
                                      (ad->listener != TAXI_INVALID_HANDLE
                                           ? jaws_sock_backlog(ad->listener)
                                           : 0));
  atomic_fetch_add(&ad->conn_samples, 1);
}

/* Who accepts: with `at_accept`, the Proactor (its listener resumed, the
 * pool's threads parked), else the pool (the Proactor's listener paused
 * once the pool accepts again: connections meanwhile wait in the queue
 * both share).  Without an acceptor, the pool accepts and moves each
 * connection at once. */
static void set_move_at_accept(struct adaptive *ad, bool at_accept,
                               bool hybrid) {
  int rc;
  if (at_accept == atomic_load(&ad->move_at_accept)) return;
  if (at_accept && ad->acceptor &&
      (rc = taxi_listener_resume(ad->acceptor)) < 0) {
    fprintf(stderr,
            "jaws: adaptive: the proactor cannot accept (%s): the pool "
            "accepts for it\n",
            taxi_strerror(rc));
  } else if (at_accept && ad->acceptor) {
    atomic_store(&ad->proactor_accepts, true);
    fprintf(stderr,
            "jaws: adaptive: the proactor accepts (large responses %.0f%% of "
            "responses)\n",
            ad->large_ratio * 100);
  }
  atomic_store(&ad->move_at_accept, at_accept);
  if (at_accept || !atomic_load(&ad->proactor_accepts)) return;
  if (hybrid)
    fprintf(stderr,
            "jaws: adaptive: the pool accepts again (large responses %.0f%% "
            "of responses)\n",
            ad->large_ratio * 100);
  else
    fprintf(stderr, "jaws: adaptive: the pool accepts again (SYNC_ONLY)\n");
  pthread_mutex_lock(&ad->pool_lock);
  atomic_store(&ad->proactor_accepts, false);
  pthread_cond_broadcast(&ad->pool_cond);
  pthread_mutex_unlock(&ad->pool_lock);
  (void)taxi_listener_pause(ad->acceptor);
}

/* The State decision: every ADAPT_PERIOD, adapt_policy.c from what the
 * period saw. */
static void on_adapt(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  struct adapt_sample s;
  int64_t now = jaws_now_ms();
  unsigned long long moves = 0, large;
  int state = atomic_load(&ad->state), next;
  unsigned long long sum = atomic_exchange(&ad->conn_sum, 0);
  unsigned samples = atomic_exchange(&ad->conn_samples, 0);
  (void)t;
  for (int i = 0; i < MOVE_REASONS; i++) moves += atomic_load(&ad->moves[i]);
  s.connections = samples ? (unsigned)((sum + samples / 2) / samples)
                          : atomic_load(&ad->srv->connections);
  s.responses = atomic_exchange(&ad->responses, 0);
  s.bytes = atomic_exchange(&ad->bytes, 0);
  s.large_bytes = atomic_exchange(&ad->large_bytes, 0);
  large = atomic_exchange(&ad->large_responses, 0);
  s.served = atomic_exchange(&ad->served, 0);
  s.served_bytes = atomic_exchange(&ad->served_bytes, 0);
  s.moves = moves - ad->last_moves;
  s.ms = now - ad->last_ms;
  ad->last_moves = moves;
  ad->last_ms = now;
  next = adapt_policy_step(&ad->policy, &s);
  /* Where nearly every response is large, a HYBRID pool thread would read
   * each request only to hand its connection over with the answer: it
   * hands the connection over at once instead, and the Proactor reads the
   * request too.  (A pool thread's recv and the move of a kept response
   * cost 7-10% of the throughput with 5 MB files at 200 clients.) */
  if (s.responses > 0)
    ad->large_ratio +=
        ((double)large / (double)s.responses - ad->large_ratio) / 4;
  set_move_at_accept(ad,
                     next == ADAPT_HYBRID && ad->large_ratio >= ALL_LARGE_RATIO,
                     next == ADAPT_HYBRID);
  if (next == state) return;
  atomic_store(&ad->state, next);
  atomic_fetch_add(&ad->changes, 1);
}

static void on_stop(taxi_io_t *io, int signo, void *arg) {
  struct adaptive *ad = arg;
  (void)signo;
  atomic_store(&ad->srv->stopping, 1);
  taxi_io_stop(io);
}

/* Where the backend takes no signals (Windows), Ctrl-C comes through
 * quote_on_stop's console handler, on a thread of its own. */
static struct adaptive *console_ad;

static void on_console_stop(void) {
  atomic_store(&console_ad->srv->stopping, 1);
  taxi_io_stop(console_ad->io);
}

/* A proactor per thread, each its own completion queue (on io_uring a
 * ring no other thread locks), where the backend has them; else one
 * Proactor run by a Leader/Followers pool.  Once the connections of
 * kept-alive clients have moved to ASYNC, the pool over one ring cost two
 * context switches and four system calls a request on the WebSTONE mix,
 * a proactor per thread under one of each (docs/bench/README.md). */
static int create_proactors(struct adaptive *ad, taxi_io_options_t *o) {
  int rc;
  o->dispatcher = TAXI_IO_PROACTORS;
  if ((rc = taxi_io_create(&ad->io, o)) == 0) return 0;
  o->dispatcher = TAXI_IO_PROACTOR;
  return taxi_io_create(&ad->io, o);
}

/* Threads on each side without --threads: half the processors, at least
 * one, so that the two sides together have as many threads as the host
 * has processors.  More only take turns on them: with a client on the
 * same two-core host, two on each side moved 6% fewer bytes on the
 * WebSTONE mix with keep-alive than one on each (examples/jaws/README.md).
 */
static unsigned side_threads(const struct jaws_config *cfg) {
  if (cfg->threads) return cfg->threads;
  unsigned half = jaws_cpu_count() / 2;
  return half ? half : 1;
}

/* The Proactor's context; 0, or the exit status after a message. */
static int create_context(struct adaptive *ad) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  const struct jaws_config *cfg = &ad->srv->cfg;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  int rc;
  o.threads = side_threads(cfg);
  o.backend = cfg->backend ? cfg->backend : "uring";
  rc = create_proactors(ad, &o);
  if (rc < 0 && cfg->backend == NULL) {
    o.backend = NULL; /* no io_uring here: the default completion backend */
    rc = create_proactors(ad, &o);
  }
  if (rc < 0) {
    fprintf(stderr, "jaws: cannot start the proactor side%s%s: %s\n",
            cfg->backend ? " on backend " : "",
            cfg->backend ? cfg->backend : "", taxi_strerror(rc));
    /* `jaws --backend epoll` meant the Reactor when it was the default. */
    if (cfg->backend && !cfg->strategy_given)
      fprintf(stderr,
              "jaws: the default strategy, adaptive, takes a completion "
              "backend (uring, aio, emulated, iocp); --strategy reactive "
              "for a readiness one\n");
    ad->srv->no_proactor = cfg->backend == NULL;
    return rc == TAXI_ENOBACKEND ? 2 : 1;
  }
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++)
    if ((rc = taxi_io_on_signal(ad->io, stop_signals[i], on_stop, ad)) < 0) {
      console_ad = ad;
      if (quote_on_stop(on_console_stop) != 0)
        fprintf(stderr, "jaws: no orderly stop on signal %d: %s\n",
                stop_signals[i], taxi_strerror(rc));
    }
  return 0;
}

static void start_timer(taxi_io_t *io, taxi_io_timer_fn fn, void *arg,
                        taxi_time_t period, const char *what) {
  taxi_io_timer_t *t;
  int rc;
  if ((rc = taxi_io_timer_create(&t, io, fn, arg)) < 0 ||
      (rc = taxi_io_timer_start(t, period, period)) < 0)
    fprintf(stderr, "jaws: no %s: %s\n", what, taxi_strerror(rc));
}

/* The listening socket for the pool, non-blocking (a pool thread polls it
 * beside its pending connections), and the Proactor's listener on it,
 * paused (see set_move_at_accept). */
static void start_acceptor(struct adaptive *ad) {
  const struct jaws_config *cfg = &ad->srv->cfg;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  int rc;
  /* The options set for the pool first: the Proactor's connections
   * inherit them as well, and set their own over them. */
  ad->prepared = jaws_sock_accept_waits(ad->listener, cfg->send_timeout_ms,
                                        HANDOFF_MS) == 1;
  /* A pool thread woken for a connection whose request has not come
   * would read nothing, poll and be woken again: with the kernel holding
   * it until its bytes come, a connection per request costs the pool one
   * wake-up and no empty read (on the mix at 50 clients a context switch
   * and two or three system calls fewer a request, 30% less CPU). */
  if (cfg->defer_accept_s > 0 &&
      jaws_sock_defer_accept(ad->listener, cfg->defer_accept_s) < 0)
    fprintf(stderr, "jaws: adaptive: the listener refused a deferred accept\n");
  lo.flags = TAXI_LISTEN_KEEP_SOCKET;
  lo.stream = &ad->so;
  rc = taxi_listener_adopt(&ad->acceptor, ad->io, ad->listener, &lo,
                           adaptive_on_accept, ad);
  if (rc == 0 && (rc = taxi_listener_pause(ad->acceptor)) < 0) {
    taxi_listener_close(ad->acceptor);
    ad->acceptor = NULL;
  }
  if (rc == 0) return; /* adopted: the socket is non-blocking */
  ad->acceptor = NULL;
  fprintf(stderr,
          "jaws: adaptive: the proactor cannot accept on the listener (%s): "
          "the pool accepts for it\n",
          taxi_strerror(rc));
  /* jaws_sock_accept_waits made it blocking (Linux). */
  if (echo_set_nonblocking(ad->listener) != 0) {
    fprintf(stderr, "jaws: adaptive: the listener stays blocking: %s\n",
            echo_last_error());
  }
}

/* The pool's threads; how many started. */
static unsigned start_pool(struct adaptive *ad, pthread_t *threads,
                           unsigned n) {
  unsigned started = 0;
  for (; started < n; started++)
    if (jaws_thread_start(&threads[started], adaptive_pool_thread, ad) != 0)
      break;
  return started;
}

int jaws_run_adaptive(struct jaws_server *srv,
                      const struct jaws_strategy *self) {
  struct adaptive *ad = calloc(1, sizeof *ad);
  /* --tls-only: no plain listener, so no pool (see adaptive.h). */
  bool pool = !srv->cfg.tls_only;
  unsigned n = pool ? side_threads(&srv->cfg) : 0;
  unsigned started = 0;
  pthread_t *threads = calloc(n ? n : 1, sizeof *threads);
  char bound[TAXI_ADDR_STRLEN], backends[64], tls_bound[TAXI_ADDR_STRLEN] = "";
  bool failed = false;
  unsigned port;
  taxi_time_t period;
  int rc;
  (void)self;
  if (ad == NULL || threads == NULL) {
    fprintf(stderr, "jaws: out of memory\n");
    free(ad);
    free(threads);
    return 1;
  }
  ad->srv = srv;
  adapt_policy_init(&ad->policy,
                    srv->cfg.adapt_threshold ? ADAPT_THRESHOLD : ADAPT_MEASURE,
                    srv->cfg.adapt_high, srv->cfg.adapt_low, say_stderr, NULL);
  ad->last_ms = jaws_now_ms();
  if ((rc = create_context(ad)) != 0) {
    free(ad);
    free(threads);
    return rc;
  }
  ad->listener = TAXI_INVALID_HANDLE;
  if (pool && echo_listen(srv->cfg.host, srv->cfg.port, &ad->listener, bound,
                          sizeof bound, &port) != 0) {
    fprintf(stderr, "jaws: %s\n", echo_last_error());
    taxi_io_destroy(ad->io);
    free(ad);
    free(threads);
    return 1;
  }
  pthread_mutex_init(&ad->ctx_lock, NULL);
  pthread_mutex_init(&ad->list_lock, NULL);
  pthread_mutex_init(&ad->pool_lock, NULL);
  pthread_cond_init(&ad->pool_cond, NULL);
  ad->alive = true;
  jaws_stream_options(srv, &ad->so);
  ad->tls_so = ad->so;
  if (pool) start_acceptor(ad);
  period = (taxi_time_t)srv->cfg.header_timeout_ms * TAXI_NSEC_PER_MSEC / 5;
  if (period < 10 * TAXI_NSEC_PER_MSEC) period = 10 * TAXI_NSEC_PER_MSEC;
  if (period > TAXI_NSEC_PER_SEC) period = TAXI_NSEC_PER_SEC;
  start_timer(ad->io, adaptive_on_sweep, ad, period, "header timeout");
  start_timer(ad->io, on_count, ad, COUNT_PERIOD, "connection count");
  start_timer(ad->io, on_adapt, ad, ADAPT_PERIOD, "adaptation");
  if (srv->tls && jaws_stream_listen_tls(srv, ad->io, &ad->tls_so,
                                         adaptive_on_accept, ad) != 0) {
    failed = true;
  } else if ((started = start_pool(ad, threads, n)) < n) {
    fprintf(stderr, "jaws: cannot start %u pool threads\n", n);
    failed = true;
  }
  if (failed) {
    atomic_store(&srv->stopping, 1);
    rc = -1;
  } else {
    if (srv->tls_listener)
      jaws_listener_text(srv->tls_listener, tls_bound, sizeof tls_bound);
    if (!pool) snprintf(bound, sizeof bound, "%s", tls_bound);
    snprintf(backends, sizeof backends, "%s%s", pool ? "blocking+" : "",
             taxi_io_backend(ad->io));
    jaws_print_listening(srv, backends, pool ? n : taxi_io_threads(ad->io),
                         bound, pool && srv->tls_listener ? tls_bound : NULL);
    rc = taxi_io_run(ad->io);
    if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  }
  atomic_store(&srv->stopping, 1);
  pthread_mutex_lock(&ad->pool_lock); /* parked threads see it */
  pthread_cond_broadcast(&ad->pool_cond);
  pthread_mutex_unlock(&ad->pool_lock);
  /* The pool takes no connection any more, and moves from now on end
   * their connections (see hand_off); then the Proactor closes its own. */
  pthread_mutex_lock(&ad->ctx_lock);
  ad->alive = false;
  pthread_mutex_unlock(&ad->ctx_lock);
  for (unsigned i = 0; i < started; i++) pthread_join(threads[i], NULL);
  taxi_io_destroy(ad->io);
  srv->tls_listener = NULL;
  /* After the timers that look at its queue, and the Proactor's listener
   * on it (ended with the context). */
  if (pool) echo_close(ad->listener);
  snprintf(srv->stop_note, sizeof srv->stop_note,
           " (adaptive: %llu moves to the proactor for large responses, %llu "
           "while waiting, %llu with the socket full, %llu at accept (%llu "
           "accepted by the proactor), %llu state changes, %llu TLS "
           "connections)",
           (unsigned long long)atomic_load(&ad->moves[FOR_LARGE]),
           (unsigned long long)atomic_load(&ad->moves[FOR_WAITING]),
           (unsigned long long)atomic_load(&ad->moves[FOR_FULL]),
           (unsigned long long)atomic_load(&ad->moves[AT_ACCEPT]),
           (unsigned long long)atomic_load(&ad->accepted),
           (unsigned long long)atomic_load(&ad->changes),
           (unsigned long long)atomic_load(&ad->tls_accepted));
  pthread_mutex_destroy(&ad->ctx_lock);
  pthread_mutex_destroy(&ad->list_lock);
  pthread_mutex_destroy(&ad->pool_lock);
  pthread_cond_destroy(&ad->pool_cond);
  free(ad);
  free(threads);
  if (rc < 0) {
    if (!failed)
      fprintf(stderr, "jaws: stopped by an error: %s\n", taxi_strerror(rc));
    return 1;
  }
  return 0;
}
