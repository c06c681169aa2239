/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay.c - a TCP relay (a port-forwarding proxy) on the stream layer:
 * for each client it accepts it connects to the upstream address, then
 * relays both ways with two pipes (taxi_stream_pipe), written once for
 * every dispatcher (--dispatcher).
 *
 *     relay --upstream HOST:PORT [--port P] [--host ADDR]
 *           [--dispatcher reactor|lf|hsha|proactor|proactors]
 *           [--backend NAME] [--threads N] [--connect-timeout S]
 *           [--idle-timeout S] [--stats MS]
 *
 * It prints one line once it is ready,
 *
 *     relay: backend=B dispatcher=D threads=N upstream=U listening on A
 *
 * relays until SIGINT or SIGTERM, then prints how much it did.  Each pipe
 * reads its source only while its destination has room for a read, so a
 * slow reader on either side holds at most one output buffer and one read
 * buffer of the relay's (40 KiB with the sizes below), and TCP's flow
 * control holds the sender back.  The end of one side's sending is passed
 * on to the other (half-close); once both ends have been passed on, both
 * connections are ended.  A reset or a timeout on either side closes the
 * other.
 *
 * --stats MS prints every MS milliseconds what the relay holds, from the
 * streams' counters (taxi_stream_counters) and watermarks:
 *
 *     relay: stats: pairs=N held=H most=M bound=B pauses=P
 *
 * pairs: the client connections with an upstream connection; held: the
 * most bytes read from one side and not yet sent to the other, over the
 * pairs and their two directions, now; most: the most seen so far; bound:
 * what held can never exceed (the destination's high watermark plus one
 * read buffer); pauses: the times a pipe stopped reading for lack of room,
 * over the pairs that are open.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <taxi/taxi.h>

#include "../echo_common.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define EXIT_REFUSED 3

/* The streams' buffers: reads of 8 KiB, 32 KiB of output buffer, read
 * again below 8 KiB (the defaults, named for the bound --stats prints). */
#define READ_BUFFER 8192
#define HIGH_WATERMARK 32768
#define LOW_WATERMARK 8192

struct relay;

/* A client's connection and its upstream one.  Freed once both have
 * closed; it holds a reference to each meanwhile, so that --stats may
 * read their counters from the list. */
struct pair {
  struct relay *r;
  taxi_stream_t *client;
  taxi_stream_t *up; /* NULL until connected (under r->lock) */
  atomic_int closes; /* close callbacks run: 2 and it is freed */
  atomic_int ended;  /* pipes over with their end passed on */
  struct pair *prev, *next;
};

struct relay {
  taxi_io_t *io;
  char upstream[TAXI_ADDR_STRLEN];
  taxi_stream_options_t stream;
  pthread_mutex_t lock; /* pairs */
  struct pair *pairs;
  unsigned long long most;
  unsigned long long connect_failures;
};

static void on_closed(taxi_stream_t *s, int reason);

static void pair_unlink(struct pair *p) {
  struct relay *r = p->r;
  pthread_mutex_lock(&r->lock);
  if (p->prev)
    p->prev->next = p->next;
  else
    r->pairs = p->next;
  if (p->next) p->next->prev = p->prev;
  pthread_mutex_unlock(&r->lock);
}

/* One of the pair's streams closed; the second frees the pair. */
static void on_closed(taxi_stream_t *s, int reason) {
  struct pair *p = taxi_stream_data(s);
  (void)reason;
  if (atomic_fetch_add(&p->closes, 1) != 1) return;
  pair_unlink(p);
  taxi_stream_unref(p->client);
  if (p->up) taxi_stream_unref(p->up);
  free(p);
}

/* A direction is over.  Both ends passed on: nothing more can come either
 * way, so both connections are ended (what is queued goes out first).
 * Otherwise the pipe has closed both already, or the other direction goes
 * on (a half-closed connection). */
static void on_piped(taxi_stream_t *from, taxi_stream_t *to, int status,
                     void *arg) {
  struct pair *p = arg;
  if (status == 0 && atomic_fetch_add(&p->ended, 1) == 1) {
    taxi_stream_end(from);
    taxi_stream_end(to);
  }
}

static void on_connect(taxi_stream_t *up, int status, void *arg) {
  struct pair *p = arg;
  struct relay *r = p->r;
  /* The first callback of up: its close callback goes here, whatever
   * the outcome. */
  taxi_stream_on_close(up, on_closed);
  if (status < 0) {
    pthread_mutex_lock(&r->lock);
    r->connect_failures++;
    pthread_mutex_unlock(&r->lock);
    fprintf(stderr, "relay: cannot connect to %s: %s\n", r->upstream,
            taxi_strerror(status));
    taxi_stream_close(p->client); /* up closes after this returns */
    return;
  }
  taxi_stream_ref(up);
  pthread_mutex_lock(&r->lock);
  p->up = up;
  pthread_mutex_unlock(&r->lock);
  /* The client may have gone meanwhile (TAXI_EBADF): then up is closed
   * here, or by the first pipe, which closes the other stream of a pipe
   * whose stream closes. */
  if (taxi_stream_pipe(p->client, up, on_piped, p) < 0 ||
      taxi_stream_pipe(up, p->client, on_piped, p) < 0) {
    taxi_stream_close(p->client);
    taxi_stream_close(up);
  }
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *client, void *arg) {
  struct relay *r = arg;
  taxi_stream_t *up;
  (void)l;
  struct pair *p = calloc(1, sizeof *p);
  if (!p) {
    taxi_stream_close(client);
    return;
  }
  p->r = r;
  p->client = client;
  taxi_stream_ref(client);
  taxi_stream_set_data(client, p);
  taxi_stream_on_close(client, on_closed);
  pthread_mutex_lock(&r->lock);
  p->next = r->pairs;
  if (r->pairs) r->pairs->prev = p;
  r->pairs = p;
  pthread_mutex_unlock(&r->lock);
  /* The upstream stream's data pointer starts as p. */
  int rc =
      taxi_stream_connect(&up, r->io, r->upstream, &r->stream, on_connect, p);
  if (rc < 0) {
    fprintf(stderr, "relay: cannot connect to %s: %s\n", r->upstream,
            taxi_strerror(rc));
    atomic_fetch_add(&p->closes, 1); /* no upstream stream to close */
    taxi_stream_close(client);
  }
}

/* Bytes read from `from` and not yet sent by `to`: from's counter read
 * first, so that what goes out meanwhile can only make it smaller. */
static unsigned long long held(taxi_stream_t *from, taxi_stream_t *to,
                               unsigned long long *pauses) {
  taxi_stream_counters_t in, out;
  taxi_stream_counters(from, &in);
  taxi_stream_counters(to, &out);
  *pauses += in.read_pauses;
  return in.bytes_in > out.bytes_out ? in.bytes_in - out.bytes_out : 0;
}

static void on_stats(taxi_io_timer_t *t, void *arg) {
  struct relay *r = arg;
  unsigned long long now = 0, pauses = 0, pairs = 0;
  size_t low = 0, high = 0;
  (void)t;
  pthread_mutex_lock(&r->lock);
  for (struct pair *p = r->pairs; p; p = p->next) {
    if (!p->up) continue;
    pairs++;
    unsigned long long a = held(p->client, p->up, &pauses);
    unsigned long long b = held(p->up, p->client, &pauses);
    if (a > now) now = a;
    if (b > now) now = b;
    if (high == 0) taxi_stream_watermarks(p->up, &low, &high);
  }
  if (now > r->most) r->most = now;
  unsigned long long most = r->most;
  pthread_mutex_unlock(&r->lock);
  if (high == 0) high = HIGH_WATERMARK;
  printf("relay: stats: pairs=%llu held=%llu most=%llu bound=%zu pauses=%llu\n",
         pairs, now, most, high + READ_BUFFER, pauses);
  fflush(stdout);
}

/* Runs in a dispatching thread, not in the signal handler. */
static void on_signal(taxi_io_t *io, int signo, void *arg) {
  (void)signo;
  (void)arg;
  taxi_io_stop(io);
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: relay --upstream HOST:PORT [--port P] [--host ADDR]\n"
          "             [--dispatcher reactor|lf|hsha|proactor|proactors]\n"
          "             [--backend NAME] [--threads N] [--connect-timeout S]\n"
          "             [--idle-timeout S] [--stats MS]\n"
          "  --upstream A     where each client is relayed to (numeric)\n"
          "  --port P         TCP port to listen on (default 0: any free)\n"
          "  --host ADDR      numeric address to listen on (127.0.0.1)\n"
          "  --dispatcher D   who runs the callbacks (default reactor)\n"
          "  --backend NAME   readiness or completion backend (default:\n"
          "                   the best available)\n"
          "  --threads N      threads running callbacks (reactor: 1)\n"
          "  --connect-timeout S  give up on the upstream after S seconds\n"
          "                   (default 10)\n"
          "  --idle-timeout S close a connection idle that long, with its\n"
          "                   other side (default 0: never)\n"
          "  --stats MS       print what the relay holds every MS ms\n"
          "exit status: 0 stopped by SIGINT/SIGTERM, 1 failure, 2 bad usage,\n"
          "             3 configuration refused by the library\n");
}

/* Read the command line into r, io options o, listening address `listen`
 * and stats period; -1 to run, else the exit status. */
static int args(int argc, char **argv, struct relay *r, taxi_io_options_t *o,
                char *listen, size_t cap, unsigned long *stats_ms) {
  const char *host = "127.0.0.1", *upstream = NULL;
  unsigned port = 0;
  unsigned long connect_s = 10, idle_s = 0, threads = 0;
  for (int i = 1; i < argc;) {
    const char *v = "";
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return EXIT_OK;
    }
    if ((m = echo_option(argc, argv, &i, "--upstream", &v)) > 0) {
      upstream = v;
    } else if (m == 0 && (m = echo_option(argc, argv, &i, "--port", &v)) > 0) {
      if (echo_parse_port(v, &port) != 0) m = -2;
    } else if (m == 0 && (m = echo_option(argc, argv, &i, "--host", &v)) > 0) {
      host = v;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--dispatcher", &v)) > 0) {
      if (taxi_io_dispatcher_parse(v, &o->dispatcher) != 0) m = -2;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--backend", &v)) > 0) {
      o->backend = v;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--threads", &v)) > 0) {
      if (echo_parse_count(v, 1, TAXI_LF_MAX_THREADS, &threads) != 0) m = -2;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--connect-timeout", &v)) > 0) {
      if (echo_parse_count(v, 1, 86400, &connect_s) != 0) m = -2;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--idle-timeout", &v)) > 0) {
      if (echo_parse_count(v, 0, 86400, &idle_s) != 0) m = -2;
    } else if (m == 0 && (m = echo_option(argc, argv, &i, "--stats", &v)) > 0) {
      if (echo_parse_count(v, 1, 3600000, stats_ms) != 0) m = -2;
    } else if (m == 0) {
      fprintf(stderr, "relay: unknown argument '%s'\n", argv[i]);
      m = -1;
    }
    if (m == -2) fprintf(stderr, "relay: invalid value '%s'\n", v);
    if (m < 0) {
      usage(stderr);
      return EXIT_USAGE;
    }
  }
  taxi_addr_t a;
  if (!upstream || taxi_addr_parse(&a, upstream) != 0) {
    fprintf(stderr, "relay: --upstream HOST:PORT (numeric) is required\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  snprintf(r->upstream, sizeof r->upstream, "%s", upstream);
  snprintf(listen, cap, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
  o->threads = (unsigned)threads;
  taxi_stream_options_init(&r->stream);
  r->stream.read_buffer = READ_BUFFER;
  r->stream.high_watermark = HIGH_WATERMARK;
  r->stream.low_watermark = LOW_WATERMARK;
  r->stream.flags = TAXI_STREAM_NODELAY;
  r->stream.connect_timeout = (taxi_time_t)connect_s * TAXI_NSEC_PER_SEC;
  r->stream.idle_timeout = (taxi_time_t)idle_s * TAXI_NSEC_PER_SEC;
  return -1;
}

int main(int argc, char **argv) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  static struct relay r;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  taxi_listener_t *l;
  taxi_io_timer_t *timer = NULL;
  taxi_addr_t bound;
  taxi_io_stats_t st;
  char listen[300], text[TAXI_ADDR_STRLEN];
  unsigned long stats_ms = 0;

  int rc = args(argc, argv, &r, &o, listen, sizeof listen, &stats_ms);
  if (rc >= 0) return rc;
  if (echo_net_init() != 0) {
    fprintf(stderr, "relay: %s\n", echo_last_error());
    return EXIT_ERROR;
  }
  pthread_mutex_init(&r.lock, NULL);
  if ((rc = taxi_io_create(&r.io, &o)) < 0) {
    fprintf(stderr, "relay: cannot start (dispatcher %s, backend %s): %s\n",
            taxi_io_dispatcher_name(o.dispatcher),
            o.backend ? o.backend : "automatic", taxi_strerror(rc));
    return rc == TAXI_ENOTSUP || rc == TAXI_EINVAL || rc == TAXI_ENOBACKEND
               ? EXIT_REFUSED
               : EXIT_ERROR;
  }
  lo.stream = &r.stream; /* the clients' streams: the same sizes */
  if ((rc = taxi_listener_create(&l, r.io, listen, &lo, on_accept, &r)) < 0) {
    fprintf(stderr, "relay: cannot listen on %s: %s\n", listen,
            taxi_strerror(rc));
    taxi_io_destroy(r.io);
    return EXIT_ERROR;
  }
  /* Before taxi_io_run starts other threads (see taxi_io_on_signal). */
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++)
    if ((rc = taxi_io_on_signal(r.io, stop_signals[i], on_signal, NULL)) < 0)
      fprintf(stderr, "relay: no orderly stop on signal %d: %s\n",
              stop_signals[i], taxi_strerror(rc));
  if (stats_ms &&
      ((rc = taxi_io_timer_create(&timer, r.io, on_stats, &r)) < 0 ||
       (rc = taxi_io_timer_start(timer, (taxi_time_t)stats_ms * 1000000,
                                 (taxi_time_t)stats_ms * 1000000)) < 0))
    fprintf(stderr, "relay: no --stats: %s\n", taxi_strerror(rc));
  taxi_listener_address(l, &bound);
  taxi_addr_format(&bound, text, sizeof text);
  printf(
      "relay: backend=%s dispatcher=%s threads=%u upstream=%s listening "
      "on %s\n",
      taxi_io_backend(r.io), taxi_io_dispatcher_name(o.dispatcher),
      taxi_io_threads(r.io), r.upstream, text);
  fflush(stdout); /* scripts wait for this line */

  rc = taxi_io_run(r.io); /* until on_signal stops it: TAXI_ESTOPPED */
  if (rc == TAXI_ESTOPPED) rc = 0;
  taxi_io_stats(r.io, &st);
  taxi_io_destroy(r.io); /* closes the listener and the connections */
  pthread_mutex_destroy(&r.lock);
  echo_net_cleanup();
  if (rc < 0) {
    fprintf(stderr, "relay: stopped: %s\n", taxi_strerror(rc));
    return EXIT_ERROR;
  }
  printf(
      "relay: stopped after %llu connections, %llu bytes relayed, "
      "%llu upstream connects failed, most held %llu bytes\n",
      (unsigned long long)st.accepts, (unsigned long long)st.bytes_out,
      r.connect_failures, r.most);
  return EXIT_OK;
}
