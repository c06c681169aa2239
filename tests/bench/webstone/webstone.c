/* SPDX-License-Identifier: Apache-2.0 */
/*
 * webstone.c - a WebSTONE-like HTTP load generator: the command line, the
 * phases of a run and its threads.
 *
 *     webstone --port P [--host H] --docroot DIR [--clients N]
 *              [--duration S | --requests N] [--warmup S]
 *              [--mix | --size BYTES] [--keep-alive] [--seed N]
 *              [--timeout S] [--time-limit S] [--threads T]
 *              [--allow-errors] [--json]
 *     webstone --make-docroot DIR
 *
 * N concurrent clients (default 10) each loop: connect, GET a file, read
 * and verify every byte of the response against the same file in DIR, and
 * close (or reuse the connection with --keep-alive).  The file comes from
 * the mix of the JAWS paper's WebSTONE runs (500 B 35 %, 5 KB 50 %, 50 KB
 * 14 %, 5 MB 1 %; several files of each, /mix/...) by a PRNG seeded with
 * --seed and the client's number, or is the one file /size/BYTES.bin
 * (--size: 500, 5000, 50000, 500000 or 5000000 as made by --make-docroot).
 * T threads (default 1) each drive N/T clients from one epoll set.
 *
 * Nothing is counted during the warm-up (default 1 s).  Then the run
 * measures for --duration seconds (default 5) or until --requests requests
 * are done.  Reported: throughput as bits received per second (status lines,
 * headers and bodies: the paper's client-side server throughput), the
 * average of each request's own bits per second, requests per second, the
 * latency to the first and to the last byte of the response from the start
 * of the request (its connect included when it opens a connection), the
 * requests still in flight at the stop (with the oldest one's age: the
 * latencies are those of completed requests, so a server that starves some
 * clients shows there) and the errors by kind.  Any error, or the run exceeding
 * --time-limit (default 60 s, or warm-up + duration + 30 s if longer), makes
 * the exit status 1 (errors alone do not with --allow-errors); bad usage
 * exits 2.  The human line goes to stdout, or with --json to stderr and one
 * JSON object to stdout, as tests/bench/loadgen does.
 */
#include "webstone.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 100000L
#define MAX_THREADS 256L
#define SPARE_DESCRIPTORS 32

struct ws_options ws_opt;

int64_t ws_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * WS_NSEC_PER_SEC + ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: webstone --port P [--host H] --docroot DIR [--clients N]\n"
          "                [--duration S | --requests N] [--warmup S]\n"
          "                [--mix | --size BYTES] [--keep-alive] [--seed N]\n"
          "                [--timeout S] [--time-limit S] [--threads T]\n"
          "                [--allow-errors] [--json] [--tls [--tls-resume]]\n"
          "       webstone --make-docroot DIR\n"
          "  --port P            the web server's TCP port\n"
          "  --host H            its address (default 127.0.0.1)\n"
          "  --docroot DIR       the files it serves, to verify every byte\n"
          "  --clients N         concurrent clients (default 10)\n"
          "  --duration S        measure for S seconds (default 5)\n"
          "  --requests N        or measure N requests in all\n"
          "  --warmup S          unmeasured warm-up first (default 1)\n"
          "  --mix               the WebSTONE file mix (the default)\n"
          "  --size BYTES        or only the file /size/BYTES.bin\n"
          "  --keep-alive        reuse connections (default: "
          "Connection: close)\n"
          "  --seed N            the PRNG seed of the mix (default 1)\n"
          "  --timeout S         a request making no progress for S seconds\n"
          "                      is an error (default 10)\n"
          "  --time-limit S      give up after S seconds in all (default 60,\n"
          "                      or warm-up + duration + 30 if longer)\n"
          "  --threads T         client threads (default 1)\n"
          "  --allow-errors      exit 0 even if requests failed\n"
          "  --json              print the result as one JSON object\n"
          "  --tls               HTTPS (OpenSSL; the certificate is not\n"
          "                      verified: a measurement, not a check)\n"
          "  --tls-resume        each client offers its last session again\n"
          "                      (default: a full handshake per connection)\n"
          "  --make-docroot DIR  write the benchmark's files into DIR\n");
}

/* 1: --make-docroot was done (or failed: *status), 0: a run, -1: usage. */
static int parse_args(int argc, char **argv, int *status) {
  int i = 1, have_duration = 0, have_limit = 0;
  long requests = 0, seed = 1;
  const cmdline_spec_t specs[] = {
      {"--port", CMDLINE_PORT, &ws_opt.port, 0, 0, 0, NULL},
      {"--host", CMDLINE_TEXT, &ws_opt.host, 0, 0, 0, NULL},
      {"--docroot", CMDLINE_TEXT, &ws_opt.docroot, 0, 0, 0, NULL},
      {"--clients", CMDLINE_LONG, &ws_opt.clients, 1, MAX_CLIENTS, 0, NULL},
      {"--threads", CMDLINE_LONG, &ws_opt.threads, 1, MAX_THREADS, 0, NULL},
      {"--size", CMDLINE_LONG, &ws_opt.size, 1, LONG_MAX, 0, NULL},
      {"--duration", CMDLINE_SECONDS, &ws_opt.duration, 0, 0, 0.001,
       &have_duration},
      {"--requests", CMDLINE_LONG, &requests, 1, LONG_MAX, 0, NULL},
      {"--warmup", CMDLINE_SECONDS, &ws_opt.warmup, 0, 0, 0, NULL},
      {"--timeout", CMDLINE_SECONDS, &ws_opt.timeout, 0, 0, 0.001, NULL},
      {"--time-limit", CMDLINE_SECONDS, &ws_opt.time_limit, 0, 0, 0.001,
       &have_limit},
      {"--seed", CMDLINE_LONG, &seed, 0, LONG_MAX, 0, NULL},
  };
  ws_opt.host = "127.0.0.1";
  ws_opt.clients = 10;
  ws_opt.threads = 1;
  ws_opt.duration = 5;
  ws_opt.warmup = 1;
  ws_opt.time_limit = 60;
  ws_opt.timeout = 10;
  while (i < argc) {
    const char *v;
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      exit(WS_EXIT_OK);
    }
    if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "--mix") == 0 ||
        strcmp(argv[i], "--keep-alive") == 0 ||
        strcmp(argv[i], "--allow-errors") == 0 ||
        strcmp(argv[i], "--tls") == 0 || strcmp(argv[i], "--tls-resume") == 0) {
      if (strcmp(argv[i], "--tls") == 0) ws_opt.tls = 1;
      if (strcmp(argv[i], "--tls-resume") == 0)
        ws_opt.tls = ws_opt.tls_resume = 1;
      if (argv[i][2] == 'j') ws_opt.json = 1;
      if (argv[i][2] == 'm') ws_opt.size = 0;
      if (argv[i][2] == 'k') ws_opt.keep_alive = 1;
      if (argv[i][2] == 'a') ws_opt.allow_errors = 1;

      i++;
      continue;
    }
    if ((m = cmdline_option("webstone", argc, argv, &i, "--make-docroot", &v)) >
        0) {
      *status = ws_make_docroot(v) == 0 ? WS_EXIT_OK : WS_EXIT_ERROR;
      if (*status == WS_EXIT_OK) printf("webstone: wrote the docroot %s\n", v);
      return 1;
    }
    if (m == 0)
      m = cmdline_table("webstone", argc, argv, &i, specs,
                        sizeof specs / sizeof specs[0]);
    if (m < 0) return -1;
    if (m == 0) {
      fprintf(stderr, "webstone: unknown argument '%s'\n", argv[i]);
      return -1;
    }
  }
  ws_opt.requests = requests;
  ws_opt.seed = (uint64_t)seed;
  if (ws_opt.port == NULL || ws_opt.docroot == NULL) {
    fprintf(stderr, "webstone: --port and --docroot are required\n");
    return -1;
  }
  if (have_duration && ws_opt.requests > 0) {
    fprintf(stderr, "webstone: give --duration or --requests, not both\n");
    return -1;
  }
  if (ws_opt.threads > ws_opt.clients) ws_opt.threads = ws_opt.clients;
  /* A long --duration alone stretches the default limit. */
  if (!have_limit && ws_opt.requests == 0 &&
      ws_opt.warmup + ws_opt.duration + 30 > ws_opt.time_limit)
    ws_opt.time_limit = ws_opt.warmup + ws_opt.duration + 30;
  return 0;
}

/* Sleep until `until` (ns); -1 with a message once the time limit is
 * passed. */
static int sleep_until(int64_t until, int64_t deadline) {
  for (;;) {
    int64_t now = ws_now_ns();
    if (now >= deadline) {
      fprintf(stderr, "webstone: the time limit of %.1f s ran out\n",
              ws_opt.time_limit);
      return -1;
    }
    if (now >= until) return 0;
    if (ws_opt.requests > 0 && atomic_load(&ws_phase) == WS_MEASURE &&
        atomic_load(&ws_finished) >= ws_opt.requests)
      return 0;
    sleep_ms(5);
  }
}

int main(int argc, char **argv) {
  struct ws_docroot docroot;
  struct ws_address address;
  struct ws_thread *threads;
  struct ws_stats *total;
  int64_t started, deadline, t_start = 0, t_stop = 0;
  long i, next = 0;
  int status = WS_EXIT_OK, failed = 0, nstarted = 0, rc;
  double seconds;

  rc = parse_args(argc, argv, &status);
  if (rc > 0) return status;
  if (rc < 0) {
    usage(stderr);
    return WS_EXIT_USAGE;
  }
  signal(SIGPIPE, SIG_IGN);
  /* The backstop should a thread hang where it does not look at the clock:
   * SIGALRM ends the process. */
  alarm((unsigned)ws_opt.time_limit + 10);
  started = ws_now_ns();
  deadline = started + (int64_t)(ws_opt.time_limit * WS_NSEC_PER_SEC);
  if (ws_net_raise_fd_limit(ws_opt.clients + 2 * ws_opt.threads +
                            SPARE_DESCRIPTORS) < 0 ||
      ws_net_resolve(ws_opt.host, ws_opt.port, &address) < 0 ||
      ws_docroot_load(&docroot, ws_opt.docroot, ws_opt.size) < 0 ||
      (ws_opt.tls && ws_tls_init() < 0))
    return WS_EXIT_ERROR;

  threads = calloc((size_t)ws_opt.threads, sizeof *threads);
  total = calloc(1, sizeof *total);
  if (threads == NULL || total == NULL) {
    fprintf(stderr, "webstone: out of memory\n");
    return WS_EXIT_ERROR;
  }
  atomic_store(&ws_phase, ws_opt.warmup > 0 ? WS_WARMUP : WS_MEASURE);
  atomic_store(&ws_quota, ws_opt.requests);
  for (i = 0; i < ws_opt.threads; i++) {
    struct ws_thread *t = &threads[i];
    long n = ws_opt.clients / ws_opt.threads +
             (i < ws_opt.clients % ws_opt.threads ? 1 : 0);
    t->index = i;
    t->docroot = &docroot;
    t->address = &address;
    t->poller = -1;
    if (ws_thread_init(t, next, n) < 0) {
      failed = 1;
      break;
    }
    next += n;
  }
  if (!failed && ws_opt.warmup == 0) t_start = ws_now_ns();
  for (i = 0; !failed && i < ws_opt.threads; i++) {
    rc = pthread_create(&threads[i].thread, NULL, ws_thread_main, &threads[i]);
    if (rc != 0) {
      fprintf(stderr, "webstone: pthread_create: %s\n", strerror(rc));
      failed = 1;
      break;
    }
    nstarted++;
  }

  /* Warm up, then measure: for the duration or until the requests are
   * done. */
  if (!failed && ws_opt.warmup > 0) {
    if (sleep_until(started + (int64_t)(ws_opt.warmup * WS_NSEC_PER_SEC),
                    deadline) < 0)
      failed = 1;
    t_start = ws_now_ns();
    atomic_store(&ws_phase, WS_MEASURE);
  }
  if (!failed &&
      sleep_until(ws_opt.requests > 0
                      ? INT64_MAX
                      : t_start + (int64_t)(ws_opt.duration * WS_NSEC_PER_SEC),
                  deadline) < 0)
    failed = 1;
  t_stop = ws_now_ns();
  atomic_store(&ws_phase, WS_STOP);
  for (i = 0; i < nstarted; i++) pthread_join(threads[i].thread, NULL);

  for (i = 0; i < ws_opt.threads; i++) {
    if (threads[i].st) ws_stats_merge(total, threads[i].st);
    ws_thread_free(&threads[i]);
    free(threads[i].st);
  }
  /* --requests: the measurement ends with the last request. */
  if (ws_opt.requests > 0 && total->last_done > t_start)
    t_stop = total->last_done;
  seconds =
      t_start > 0 && t_stop > t_start ? (double)(t_stop - t_start) / 1e9 : 0;
  if (ws_stats_errors(total) > 0 && !ws_opt.allow_errors) failed = 1;
  if (total->requests == 0 && !failed) {
    fprintf(stderr, "webstone: no request completed while measuring\n");
    failed = 1;
  }
  ws_report(ws_opt.json ? stderr : stdout, total, seconds, failed);
  ws_docroot_free(&docroot);
  if (ws_opt.tls) ws_tls_cleanup();
  free(threads);
  free(total);
  return failed ? WS_EXIT_ERROR : WS_EXIT_OK;
}
