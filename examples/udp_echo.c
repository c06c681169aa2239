/* SPDX-License-Identifier: Apache-2.0 */
/*
 * udp_echo.c - a UDP echo server and its client on datagram endpoints
 * (taxi/dgram.h), written once for every dispatcher (--dispatcher).
 *
 *   udp_echo server [--address HOST:PORT] [--dispatcher D] [--backend B]
 *                   [--threads N] [--batch N] [--recv-size N]
 *                   [--handoff-us US]
 *       echoes every datagram to its sender until SIGINT or SIGTERM,
 *       taking up to --batch datagrams (1..64, default 16) per receive,
 *       into buffers of --recv-size bytes (default 65,536: the largest
 *       datagram; longer ones are cut).  Over io_uring a size up to
 *       65,536 receives with one multishot request into provided buffers
 *       instead: the context's buffer pool for a size that fits it (3,952
 *       bytes or less), else the proactor's group for the size
 *       (taxi/dgram.h).  --handoff-us sets the Leader/Followers pool's
 *       taxi_lf_options_t.handoff_ns (lf only; 1..10,000, default 1,000).  It
 *       prints "udp_echo: dispatcher=D listening on HOST:PORT" once ready
 *       (port 0 binds a free one), and how many it echoed when stopped.
 *   udp_echo client --address HOST:PORT [--count N] [--time-limit S]
 *                   [--dispatcher D] [--backend B]
 *       sends N datagrams (default 200) of random sizes up to 65,507
 *       bytes, one at a time, and checks every byte of each echo, within
 *       --time-limit seconds (default 60).  Prints "udp_echo: N datagrams
 *       echoed, all verified".  HOST may be a name ("localhost"): it is
 *       resolved by the context's resolver threads (taxi_resolve), never
 *       by the dispatching thread, and its addresses are tried in the
 *       order the resolver gives (IPv6 first): an address whose port
 *       answers with ICMP port unreachable (TAXI_ECONNREFUSED on the
 *       connected endpoint) is left for the next, said on stderr.
 *
 * Exit status: 0 done, 1 a failure, 2 bad arguments, 3 the dispatcher
 * or backend asked for does not work here (or has no datagram
 * endpoints).
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
  size_t recv_size; /* 0: the endpoint's default */
  taxi_io_options_t io;
  taxi_lf_options_t lf; /* io.lf points here once --handoff-us is given */
};

static void usage(FILE *out) {
  fputs(
      "usage: udp_echo server [--address HOST:PORT] [--dispatcher D] "
      "[--backend B]\n"
      "              [--threads N] [--batch N] [--recv-size N]\n"
      "              [--handoff-us US]\n"
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
  taxi_lf_options_init(&c->lf);
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
    } else if (strcmp(argv[i], "--recv-size") == 0) {
      char *end;
      unsigned long n = strtoul(v, &end, 10);
      if (*end || n == 0 || n > 65536) {
        fprintf(stderr, "udp_echo: --recv-size: 1..65536\n");
        return 2;
      }
      c->recv_size = n;
    } else if (strcmp(argv[i], "--handoff-us") == 0) {
      char *end;
      unsigned long n = strtoul(v, &end, 10);
      if (*end || n == 0 || n > TAXI_LF_HANDOFF_MAX_NS / 1000) {
        fprintf(stderr, "udp_echo: --handoff-us: 1..%u\n",
                TAXI_LF_HANDOFF_MAX_NS / 1000);
        return 2;
      }
      c->lf.handoff_ns = (uint64_t)n * 1000;
      c->io.lf = &c->lf;
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
  if (c->recv_size) o.recv_size = c->recv_size;
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
  if ((rc = taxi_dgram_address(d, &a)) < 0 ||
      (rc = taxi_addr_format(&a, text, sizeof text)) < 0) {
    fprintf(stderr, "udp_echo: the address bound to: %s (%s; OS error %d)\n",
            taxi_strerror(rc), taxi_error_detail(), taxi_last_os_error());
    return 1;
  }
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
  const char *name;                    /* --address, as given */
  taxi_addr_t addrs[TAXI_RESOLVE_MAX]; /* its addresses, in order */
  size_t naddrs, at;                   /* how many; the one in use */
};

static void check(taxi_dgram_t *d, int status, const void *data, size_t len,
                  const taxi_addr_t *from, unsigned flags, void *arg);

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

/* Give up: say why, and stop the run. */
static void fail(struct client *c, const char *what, int rc) {
  fprintf(stderr, "udp_echo: %s: %s\n", what, taxi_strerror(rc));
  c->failed = 1;
  taxi_io_stop(c->io);
}

/* An endpoint of the family of c->addrs[c->at], connected to it, and the
 * first datagram sent (again, if an earlier address refused it). */
static void use_address(struct client *c) {
  const taxi_addr_t *a = &c->addrs[c->at];
  char text[TAXI_ADDR_STRLEN];
  int rc = taxi_addr_format(a, text, sizeof text);
  if (rc < 0) {
    fail(c, c->name, rc);
    return;
  }
  rc = taxi_dgram_open(&c->d, c->io,
                       a->family == TAXI_ADDR_IPV6 ? "[::]:0" : "0.0.0.0:0",
                       NULL, check, c);
  if (rc == 0) {
    rc = taxi_dgram_connect(c->d, text);
    if (rc < 0) (void)taxi_dgram_close(c->d, NULL, NULL);
  }
  if (rc < 0) {
    fail(c, text, rc);
    if (rc == TAXI_ENOTSUP) c->failed = 3; /* no endpoints on this dispatcher */
    return;
  }
  send_next(c);
}

static void check(taxi_dgram_t *d, int status, const void *data, size_t len,
                  const taxi_addr_t *from, unsigned flags, void *arg) {
  struct client *c = arg;
  (void)from;
  /* Nothing listens at this address (ICMP port unreachable) before any
   * echo came back: the next address of the name, if there is one. */
  if (status == TAXI_ECONNREFUSED && c->seq == 0 && c->at + 1 < c->naddrs) {
    char text[TAXI_ADDR_STRLEN];
    if (taxi_addr_format(&c->addrs[c->at], text, sizeof text) >= 0)
      fprintf(stderr, "udp_echo: %s refused, trying the next address\n", text);
    (void)taxi_dgram_close(d, NULL, NULL);
    c->at++;
    use_address(c);
    return;
  }
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

/* The name's addresses (in a dispatching thread, as every callback). */
static void resolved(taxi_resolve_t *r, int status, const taxi_addr_t *addrs,
                     size_t n, void *arg) {
  struct client *c = arg;
  (void)r;
  if (status < 0) {
    fail(c, c->name, status);
    return;
  }
  c->naddrs = n < TAXI_RESOLVE_MAX ? n : TAXI_RESOLVE_MAX;
  memcpy(c->addrs, addrs, c->naddrs * sizeof *addrs);
  use_address(c);
}

static int client(taxi_io_t *io, const struct config *c) {
  static struct client cl;
  cl.io = io;
  cl.count = c->count;
  cl.name = c->address;
  srand(1);
  /* A numeric address is answered through the same callback, at once. */
  int rc = taxi_resolve(NULL, io, c->address, NULL, resolved, &cl);
  if (rc < 0) {
    fprintf(stderr, "udp_echo: %s: %s\n", c->address, taxi_strerror(rc));
    return rc == TAXI_EBADADDR ? 2 : 1;
  }
  taxi_io_timer_t *t;
  if (taxi_io_timer_create(&t, io, too_late, &cl) < 0 ||
      taxi_io_timer_start(t, (taxi_time_t)c->limit * TAXI_NSEC_PER_SEC, 0) < 0)
    return 1;
  rc = taxi_io_run(io);
  if (cl.failed == 3) return 3;
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
