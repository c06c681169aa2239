/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen.c - a closed-loop TCP echo load generator for the benchmark.
 *
 *     loadgen --port P [--host 127.0.0.1] [--connections C] [--threads T]
 *             [--size S] [--duration SEC | --messages M] [--warmup SEC]
 *             [--time-limit SEC] [--on-measure-start CMD]
 *             [--on-measure-end CMD] [--poller epoll|poll]
 *             [--mode echo|cec] [--json]
 *
 * Opens C connections (default 64) to an echo server and spreads them over
 * T client threads (default 2).  Each connection plays ping-pong: it sends
 * one S-byte message (default 64), waits for all S bytes to come back,
 * checks them byte for byte, records the round trip's latency and starts
 * the next one at once.  Each thread drives its connections, non-blocking,
 * with epoll where it exists (Linux) and poll() elsewhere (or when asked
 * with --poller poll).  poll() looks at every connection on every call, so
 * with thousands of them the generator rather than the server would set the
 * pace; epoll looks only at the ready ones.  The descriptor limit
 * (RLIMIT_NOFILE) is raised up to the hard limit when the connections need
 * it.
 *
 * With --mode cec (connect, echo, close) every round trip is made on a
 * connection of its own: the client connects (non-blocking), sends the
 * message, reads its echo and closes; the server sees the end and closes
 * its side.  A round trip's latency then includes the connect, and the
 * server's CPU per message is its CPU per connection: what accepting,
 * setting a connection up and tearing it down cost.  The C connections
 * are C such sequences running side by side.
 *
 * With --mode udp each connection is a UDP socket connected to the server
 * (--port its UDP port), and each message one datagram, checked whole
 * when its echo comes.  A datagram unanswered for 200 ms is taken as lost
 * (on loopback, when the server's socket buffer was full) and sent again;
 * an echo that comes late, after that, is counted and ignored.  Both
 * counts are reported (resends, stale): a run with many measures the
 * losses more than the server.
 *
 * The connections are opened first, in batches of 128: each sends one byte
 * and waits for its echo before the next batch is opened, so that the
 * server's listen queue never overflows (see open_connections()).
 *
 * The run has two phases.  During the warm-up (default 1 s) nothing is
 * counted.  Then the generator stops sending, waits for every round trip in
 * flight to finish, runs the --on-measure-start command (with system()), and
 * measures: for --duration seconds (default 5), or until --messages round
 * trips in all have been made.  At the end it again lets the round trips in
 * flight finish, runs --on-measure-end and closes the connections.  The
 * server is therefore idle while either command runs, and what it did
 * between them is exactly the measured round trips ("messages" below, the
 * ones started during the measurement): a harness can snapshot the server's
 * counters (CPU time, allocations) from the two commands and divide.
 *
 * The rate (msgs/s) is the round trips completed within the --duration
 * window divided by the window, so that a slow straggler among the last
 * round trips does not stretch it; with --messages it is the messages over
 * the time until the last one completed.
 *
 * Latencies go into a per-thread log-linear histogram (256 linear
 * sub-buckets per power of two, so a reported value is within 0.4% of the
 * true one), merged at the end.  Nothing is allocated per message.
 *
 * Output, on stdout, one line:
 *
 *     loadgen: 64 conns x 64 B, 2 threads: 3.00 s, 361234 msgs,
 *     120411 msgs/s; latency us p50 520.1 p99 1001.3 p999 1530.0
 *     max 2410.7; errors 0
 *
 * (on one line), or with --json a single JSON object instead (the human line
 * then goes to stderr).  Any error - a connection refused, reset or closed
 * by the server, bytes that differ from those sent, a hook that fails, the
 * run exceeding --time-limit - makes the exit status 1; bad usage exits 2.
 *
 * This program deliberately does not use taxi: it is the yardstick, and
 * must measure any echo server the same way.
 *
 * The parts: see loadgen.h.
 */
#include "loadgen.h"

struct options opt;
atomic_uint_fast64_t state;
atomic_int acks;
atomic_int finished;
atomic_int error_reports;
atomic_long live_connections;
int64_t deadline;

/* ---- time ---------------------------------------------------------------- */

int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

void sleep_ns(int64_t ns) {
  struct timespec ts;
  if (ns <= 0) return;
  ts.tv_sec = (time_t)(ns / NSEC_PER_SEC);
  ts.tv_nsec = (long)(ns % NSEC_PER_SEC);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- main thread --------------------------------------------------------- */

static void publish(uint64_t *generation, enum phase p) {
  atomic_store(&acks, 0);
  ++*generation;
  atomic_store(&state, make_state(*generation, p));
}

/* Wait until `*counter` reaches `want`, all connections died, or the time
 * limit or `limit` passes.  Returns 0, or -1 with a message. */
static int wait_count(atomic_int *counter, int want, int64_t limit,
                      const char *what) {
  while (atomic_load(counter) < want) {
    int64_t now = now_ns();
    if (now >= deadline) {
      fprintf(stderr, "loadgen: the time limit of %.1f s ran out %s\n",
              opt.time_limit, what);
      return -1;
    }
    if (now >= limit) {
      fprintf(stderr, "loadgen: timed out %s\n", what);
      return -1;
    }
    sleep_ns(NSEC_PER_MSEC / 2);
  }
  return 0;
}

/* Sleep until `until`, returning early (-1) if the time limit passes or
 * every connection has failed. */
static int sleep_until(int64_t until) {
  for (;;) {
    int64_t now = now_ns(), step = until - now;
    if (step <= 0) return 0;
    if (now >= deadline) {
      fprintf(stderr, "loadgen: the time limit of %.1f s ran out\n",
              opt.time_limit);
      return -1;
    }
    if (atomic_load(&live_connections) == 0) {
      fprintf(stderr, "loadgen: every connection has failed\n");
      return -1;
    }
    if (step > 20 * NSEC_PER_MSEC) step = 20 * NSEC_PER_MSEC;
    sleep_ns(step);
  }
}

/* Run a hook command; returns 0 if it exited 0. */
static int run_hook(const char *which, const char *cmd) {
  int rc;
  if (cmd == NULL) return 0;
  fflush(NULL);
  rc = system(cmd);
  if (rc == -1) {
    fprintf(stderr, "loadgen: %s: cannot run '%s': %s\n", which, cmd,
            strerror(errno));
    return -1;
  }
  if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    fprintf(stderr, "loadgen: %s: '%s' failed (status %d)\n", which, cmd,
            WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  struct addrinfo hints, *ai = NULL;
  struct client_thread *threads = NULL;
  struct conn *conns = NULL;
  unsigned char *buffers = NULL;
  struct histogram *total = NULL;
  struct run_times rt;
  uint64_t generation = 0;
  int64_t t_start = 0, t_end = 0, t_stop = 0, started, warm_start = 0;
  long i, next;
  int rc, failed = 0, nstarted = 0;
  size_t per_conn;
  double connect_seconds = 0;

  if (parse_args(argc, argv) < 0) {
    usage(stderr);
    return EXIT_USAGE;
  }
  signal(SIGPIPE, SIG_IGN);
  if (raise_fd_limit(opt.connections + opt.threads + SPARE_DESCRIPTORS) < 0)
    return EXIT_ERROR;
  /* A backstop should the program hang where it does not look at the
   * clock (a hook that never returns): SIGALRM ends the process. */
  alarm((unsigned)opt.time_limit + 10);
  started = now_ns();
  deadline = started + (int64_t)(opt.time_limit * NSEC_PER_SEC);

  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = opt.udp ? SOCK_DGRAM : SOCK_STREAM;
  rc = getaddrinfo(opt.host, opt.port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "loadgen: %s port %s: %s\n", opt.host, opt.port,
            gai_strerror(rc));
    return EXIT_ERROR;
  }

  if (ai->ai_addrlen > sizeof opt.target) {
    fprintf(stderr, "loadgen: %s: an address too long\n", opt.host);
    return EXIT_ERROR;
  }
  memcpy(&opt.target, ai->ai_addr, ai->ai_addrlen);
  opt.target_len = ai->ai_addrlen;

  /* Everything is allocated here, once. */
  /* pattern, out, in; in one byte longer, to see a datagram too long */
  per_conn = 3 * (size_t)opt.size + 256 + 1;
  conns = calloc((size_t)opt.connections, sizeof *conns);
  buffers = malloc(per_conn * (size_t)opt.connections);
  threads = calloc((size_t)opt.threads, sizeof *threads);
  total = calloc(1, sizeof *total);
  if (!conns || !buffers || !threads || !total) {
    fprintf(stderr, "loadgen: out of memory\n");
    return EXIT_ERROR;
  }
#if HAVE_EPOLL
  for (i = 0; i < opt.threads; i++) threads[i].epfd = -1;
#endif
  for (i = 0; i < opt.connections; i++) {
    struct conn *c = &conns[i];
    uint32_t x = (uint32_t)(i + 1) * 0x9E3779B9u;
    size_t k;
    c->fd = -1;
    c->id = i;
    c->pattern = buffers + per_conn * (size_t)i;
    c->out = c->pattern + opt.size + 256;
    c->in = c->out + opt.size;
    for (k = 0; k < (size_t)opt.size + 256; k++) {
      x ^= x << 13; /* xorshift32 */
      x ^= x >> 17;
      x ^= x << 5;
      c->pattern[k] = (unsigned char)(x >> 24);
    }
    if (opt.messages > 0)
      c->quota = opt.messages / opt.connections +
                 (i < opt.messages % opt.connections ? 1 : 0);
  }

  if (open_connections(ai, conns) < 0) failed = 1;
  freeaddrinfo(ai);
  warm_start = now_ns(); /* the warm-up begins once all are open */
  connect_seconds = (double)(warm_start - started) / 1e9;
  if (failed) goto report;

  /* Connections are dealt out in blocks: thread k has
   * connections [next, next + n). */
  publish(&generation, opt.warmup > 0 ? PHASE_WARMUP : PHASE_PAUSE);
  next = 0;
  for (i = 0; i < opt.threads; i++) {
    struct client_thread *t = &threads[i];
    long n = opt.connections / opt.threads +
             (i < opt.connections % opt.threads ? 1 : 0);
    t->index = i;
    t->conns = conns + next;
    t->nconns = n;
    next += n;
#if HAVE_EPOLL
    if (opt.use_epoll && epoll_setup(t) < 0) {
      failed = 1;
      break;
    }
#endif
    if (!opt.use_epoll) t->pfds = calloc((size_t)n, sizeof *t->pfds);
    t->hist = calloc(1, sizeof *t->hist);
    if ((!opt.use_epoll && !t->pfds) || !t->hist) {
      fprintf(stderr, "loadgen: out of memory\n");
      failed = 1;
      break;
    }
    rc = pthread_create(&t->thread, NULL, client_main, t);
    if (rc != 0) {
      fprintf(stderr, "loadgen: pthread_create: %s\n", strerror(rc));
      failed = 1;
      break;
    }
    nstarted++;
  }
  if (failed) goto stop;

  /* Warm up, then quiesce. */
  if (opt.warmup > 0) {
    if (sleep_until(warm_start + (int64_t)(opt.warmup * NSEC_PER_SEC)) < 0) {
      failed = 1;
      goto stop;
    }
    publish(&generation, PHASE_PAUSE);
  }
  if (wait_count(&acks, nstarted, now_ns() + DRAIN_TIMEOUT_NS,
                 "waiting for the warm-up's echoes") < 0 ||
      run_hook("--on-measure-start", opt.on_start) < 0) {
    failed = 1;
    goto stop;
  }

  /* Measure. */
  t_start = now_ns();
  publish(&generation, PHASE_MEASURE);
  if (opt.messages > 0) {
    if (wait_count(&finished, nstarted, INT64_MAX, "measuring") < 0) {
      failed = 1;
      goto stop;
    }
  } else if (sleep_until(t_start + (int64_t)(opt.duration * NSEC_PER_SEC)) <
             0) {
    failed = 1;
    goto stop;
  }
  t_stop = now_ns();
  publish(&generation, PHASE_STOP);
  if (wait_count(&acks, nstarted, now_ns() + DRAIN_TIMEOUT_NS,
                 "waiting for the last echoes") < 0) {
    failed = 1;
    goto stop;
  }
  if (run_hook("--on-measure-end", opt.on_end) < 0) failed = 1;

stop:
  publish(&generation, PHASE_EXIT);
  for (i = 0; i < nstarted; i++) pthread_join(threads[i].thread, NULL);
  /* The measurement ends with the last round trip counted. */
  t_end = t_start;
  for (i = 0; i < nstarted; i++)
    if (threads[i].last_measured > t_end) t_end = threads[i].last_measured;

report:
  rt.start = t_start;
  rt.stop = t_stop;
  rt.end = t_end;
  rt.connect_seconds = connect_seconds;
  failed = report(threads, conns, total, &rt, failed);
  free(threads);
  free(conns);
  free(buffers);
  free(total);
  return failed ? EXIT_ERROR : EXIT_OK;
}
