/* SPDX-License-Identifier: Apache-2.0 */
/*
 * udp_echo.c - a UDP echo server and its client on datagram endpoints
 * (taxi/dgram.h), written once for every dispatcher (--dispatcher).
 *
 *   udp_echo server [--address HOST:PORT] [--dispatcher D] [--backend B]
 *                   [--threads N] [--batch N]
 *       echoes every datagram to its sender until SIGINT or SIGTERM,
 *       taking up to --batch datagrams (1..64, default 16) per receive.  It
 *       prints "udp_echo: dispatcher=D listening on HOST:PORT" once ready
 *       (port 0 binds a free one), and how many it echoed when stopped.
 *   udp_echo client --address HOST:PORT [--count N] [--time-limit S]
 *                   [--dispatcher D] [--backend B]
 *       sends N datagrams (default 200) of random sizes up to 65,507
 *       bytes, one at a time, and checks every byte of each echo, within
 *       --time-limit seconds (default 60).  Prints "udp_echo: N datagrams
 *       echoed, all verified".
 *
 * Exit status: 0 done, 1 a failure, 2 bad arguments, 3 the dispatcher
 * asked for has no datagram endpoints here.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

struct config {
  int server;
  const char *address;
  unsigned long count, limit;
  unsigned batch;
  taxi_io_options_t io;
};

static void usage(FILE *out) {
  fputs(
      "usage: udp_echo server [--address HOST:PORT] [--dispatcher D] "
      "[--backend B]\n"
      "              [--threads N] [--batch N]\n"
      "       udp_echo client --address HOST:PORT [--count N] "
      "[--time-limit S]\n"
      "              [--dispatcher D] [--backend B]\n"
      "dispatchers: reactor lf hsha proactor proactors\n",
      out);
}

/* 0 when the command line is taken, else the exit status. */
static int parse(int argc, char **argv, struct config *c) {
  memset(c, 0, sizeof *c);
  taxi_io_options_init(&c->io);
  c->address = "127.0.0.1:0";
  c->count = 200;
  c->limit = 60;
  c->batch = 16;
  if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
    usage(stderr);
    return 2;
  }
  c->server = strcmp(argv[1], "server") == 0;
  /* Options come in pairs: a name and its value. */
  for (int i = 2; i < argc; i += 2) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "udp_echo: %s needs a value\n", argv[i]);
      return 2;
    }
    if (strcmp(argv[i], "--address") == 0) {
      c->address = v;
    } else if (strcmp(argv[i], "--dispatcher") == 0) {
      if (taxi_io_dispatcher_parse(v, &c->io.dispatcher) < 0) {
        fprintf(stderr, "udp_echo: no dispatcher %s\n", v);
        return 2;
      }
    } else if (strcmp(argv[i], "--backend") == 0) {
      c->io.backend = v;
    } else if (strcmp(argv[i], "--threads") == 0) {
      char *end;
      unsigned long n = strtoul(v, &end, 10);
      if (*end || n == 0 || n > 256) {
        fprintf(stderr, "udp_echo: --threads: 1..256\n");
        return 2;
      }
      c->io.threads = (unsigned)n;
    } else if (strcmp(argv[i], "--batch") == 0) {
      char *end;
      unsigned long n = strtoul(v, &end, 10);
      if (*end || n == 0 || n > 64) {
        fprintf(stderr, "udp_echo: --batch: 1..64\n");
        return 2;
      }
      c->batch = (unsigned)n;
    } else if (strcmp(argv[i], "--count") == 0 ||
               strcmp(argv[i], "--time-limit") == 0) {
      char *end;
      unsigned long n = strtoul(v, &end, 10);
      if (*end || n == 0 || n > 1000000) {
        fprintf(stderr, "udp_echo: %s: 1..1000000\n", argv[i]);
        return 2;
      }
      *(argv[i][2] == 'c' ? &c->count : &c->limit) = n;
    } else {
      usage(stderr);
      return 2;
    }
  }
  return 0;
}

/* ---- the server ----------------------------------------------------------
 */

static unsigned long echoed;

/* Runs in the endpoint's callbacks, one at a time. */
static void serve(taxi_dgram_t *d, int status, const void *data, size_t len,
                  const taxi_addr_t *from, unsigned flags, void *arg) {
  (void)flags;
  (void)arg;
  if (status < 0) {
    fprintf(stderr, "udp_echo: %s\n", taxi_strerror(status));
    return;
  }
  /* A full queue drops the echo: the client sends it again. */
  if (taxi_dgram_send_to(d, data, len, from) == 0) echoed++;
}

static void on_stop(taxi_io_t *io, int signo, void *arg) {
  (void)signo;
  (void)arg;
  taxi_io_stop(io);
}

static int server(taxi_io_t *io, const struct config *c) {
  taxi_dgram_t *d;
  /* Receives in batches, and the echoes of a batch leave in one batch;
   * buffers for the largest datagrams (16 of 64 KiB by default). */
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_batch = c->batch;
  int rc = taxi_dgram_open(&d, io, c->address, &o, serve, NULL);
  if (rc < 0) {
    fprintf(stderr, "udp_echo: cannot bind %s: %s\n", c->address,
            taxi_strerror(rc));
    return rc == TAXI_ENOTSUP ? 3 : 1;
  }
  taxi_io_on_signal(io, SIGINT, on_stop, NULL);
  taxi_io_on_signal(io, SIGTERM, on_stop, NULL);
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  if (taxi_dgram_address(d, &a) < 0 ||
      taxi_addr_format(&a, text, sizeof text) < 0)
    return 1;
  printf("udp_echo: dispatcher=%s listening on %s\n",
         taxi_io_dispatcher_name(c->io.dispatcher), text);
  fflush(stdout); /* scripts wait for this line */
  rc = taxi_io_run(io);
  printf("udp_echo: stopped after %lu datagrams\n", echoed);
  return rc == TAXI_ESTOPPED ? 0 : 1;
}

/* ---- the client ----------------------------------------------------------
 */

struct client {
  atomic_int late; /* first: the time limit passed (too_late) */
  taxi_io_t *io;
  taxi_dgram_t *d;
  unsigned long count, seq; /* datagrams to send; the one in flight */
  size_t len;
  unsigned char buf[TAXI_DGRAM_MAX];
  int failed;
};

static unsigned char byte_at(unsigned long seq, size_t i) {
  return (unsigned char)((seq * 131u + i * 7u + (i >> 8)) & 0xff);
}

static void send_next(struct client *c) {
  c->len = c->seq == 0   ? 0
           : c->seq == 1 ? TAXI_DGRAM_MAX
                         : (size_t)rand() % (TAXI_DGRAM_MAX + 1);
  for (size_t i = 0; i < c->len; i++) c->buf[i] = byte_at(c->seq, i);
  int rc = taxi_dgram_send(c->d, c->buf, c->len);
  if (rc < 0 && rc != TAXI_EAGAIN && rc != TAXI_ENOBUFS) {
    fprintf(stderr, "udp_echo: send: %s\n", taxi_strerror(rc));
    c->failed = 1;
    taxi_io_stop(c->io);
  }
}

static void check(taxi_dgram_t *d, int status, const void *data, size_t len,
                  const taxi_addr_t *from, unsigned flags, void *arg) {
  struct client *c = arg;
  (void)d;
  (void)from;
  if (status < 0) {
    fprintf(stderr, "udp_echo: %s\n", taxi_strerror(status));
    c->failed = 1;
    taxi_io_stop(c->io);
    return;
  }
  if (len != c->len || (flags & TAXI_DGRAM_TRUNCATED)) return; /* stale */
  for (size_t i = 0; i < len; i++)
    if (((const unsigned char *)data)[i] != byte_at(c->seq, i)) {
      fprintf(stderr, "udp_echo: datagram %lu differs at byte %zu\n", c->seq,
              i);
      c->failed = 1;
      taxi_io_stop(c->io);
      return;
    }
  if (++c->seq == c->count) {
    taxi_io_stop(c->io);
    return;
  }
  send_next(c);
}

/* The time limit: over loopback nothing is lost, so a datagram whose echo
 * does not come back in time is a failure (a client over a lossy network
 * would send it again instead).  Only stops the run: the state above is
 * the endpoint callback's alone. */
static void too_late(taxi_io_timer_t *t, void *arg) {
  (void)t;
  atomic_store((atomic_int *)arg, 1);
  taxi_io_stop(((struct client *)arg)->io);
}

static int client(taxi_io_t *io, const struct config *c) {
  static struct client cl;
  cl.io = io;
  cl.count = c->count;
  taxi_addr_t peer;
  int rc = taxi_addr_parse(&peer, c->address);
  if (rc < 0) {
    fprintf(stderr, "udp_echo: %s: %s\n", c->address, taxi_strerror(rc));
    return 2;
  }
  rc = taxi_dgram_open(&cl.d, io,
                       peer.family == TAXI_ADDR_IPV6 ? "[::]:0" : "0.0.0.0:0",
                       NULL, check, &cl);
  if (rc == 0) rc = taxi_dgram_connect(cl.d, c->address);
  if (rc < 0) {
    fprintf(stderr, "udp_echo: %s: %s\n", c->address, taxi_strerror(rc));
    return rc == TAXI_ENOTSUP ? 3 : 1;
  }
  taxi_io_timer_t *t;
  if (taxi_io_timer_create(&t, io, too_late, &cl) < 0 ||
      taxi_io_timer_start(t, (taxi_time_t)c->limit * TAXI_NSEC_PER_SEC, 0) < 0)
    return 1;
  srand(1);
  send_next(&cl);
  rc = taxi_io_run(io);
  if (atomic_load(&cl.late))
    fprintf(stderr, "udp_echo: %lu of %lu echoed within %lu s\n", cl.seq,
            cl.count, c->limit);
  if (rc != TAXI_ESTOPPED || cl.failed || cl.seq != cl.count) return 1;
  printf("udp_echo: %lu datagrams echoed, all verified\n", cl.count);
  return 0;
}

int main(int argc, char **argv) {
  struct config c;
  int rc = parse(argc, argv, &c);
  if (rc) return rc;
  taxi_io_t *io;
  rc = taxi_io_create(&io, &c.io);
  if (rc < 0) {
    fprintf(stderr, "udp_echo: %s\n", taxi_strerror(rc));
    return rc == TAXI_ENOBACKEND || rc == TAXI_ENOTSUP ? 3 : 1;
  }
  rc = c.server ? server(io, &c) : client(io, &c);
  taxi_io_destroy(io); /* closes the endpoints */
  return rc;
}
