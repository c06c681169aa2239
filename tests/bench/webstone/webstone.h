/* SPDX-License-Identifier: Apache-2.0 */
/*
 * webstone.h - what the parts of the WebSTONE-like HTTP load generator
 * share: the options, the document root and its files, the per-thread
 * statistics, the socket layer and the client threads.
 *
 * The program is split by job: webstone.c (command line, phases, threads),
 * client.c (one client's state machine), docroot.c (the files, the mix,
 * --make-docroot), stats.c (histograms, the report) and net.c (every socket
 * and epoll call, so that a port touches one file).  It does not use taxi:
 * it is the yardstick for taxi's web server and any other alike.
 */
#ifndef TAXI_BENCH_WEBSTONE_H
#define TAXI_BENCH_WEBSTONE_H

#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../cmdline.h"
#include "../histogram.h"

#define WS_EXIT_OK 0
#define WS_EXIT_ERROR 1
#define WS_EXIT_USAGE 2

#define WS_NSEC_PER_SEC 1000000000LL
#define WS_NSEC_PER_MSEC 1000000LL

int64_t ws_now_ns(void);

/* ---- options --------------------------------------------------------------
 */

struct ws_options {
  const char *host, *port, *docroot;
  long clients, threads;
  long size; /* --size: one file, /size/SIZE.bin; 0: the mix */
  double duration, warmup, time_limit, timeout;
  long long requests; /* 0: run for `duration` instead */
  uint64_t seed;
  int keep_alive, json, allow_errors;
  int tls, tls_resume; /* --tls, --tls-resume */
};

extern struct ws_options ws_opt;

/* ---- the document root (docroot.c) ------------------------------------- */

struct ws_file {
  char path[64]; /* the URL path, "/mix/500b-07.html" */
  unsigned char *data;
  size_t size;
};

/* A class of the mix: its weight in percent and its files. */
struct ws_class {
  const char *name;
  size_t size;
  unsigned weight;
  size_t first, count; /* files[first .. first + count) */
};

struct ws_docroot {
  struct ws_file *files;
  size_t nfiles;
  struct ws_class classes[8];
  size_t nclasses;
  unsigned total_weight;
};

/* Write the paper's files under `dir` (created if missing).  0 or -1 with
 * a message. */
int ws_make_docroot(const char *dir);

/* Read the files a run asks for (the mix, or /size/SIZE.bin) from the
 * docroot into memory.  0 or -1 with a message. */
int ws_docroot_load(struct ws_docroot *d, const char *dir, long size);
void ws_docroot_free(struct ws_docroot *d);

/* Pick a file for the next request with the client's PRNG state. */
const struct ws_file *ws_docroot_pick(const struct ws_docroot *d,
                                      uint64_t *rng);

uint64_t ws_rng_next(uint64_t *state);

/* ---- statistics (stats.c) ----------------------------------------------- */

enum ws_error {
  WS_ERR_REFUSED, /* connect refused */
  WS_ERR_RESET,   /* reset, or closed before the response's headers */
  WS_ERR_TIMEOUT, /* no progress for --timeout seconds */
  WS_ERR_STATUS,  /* not 200, or not a response we can read */
  WS_ERR_SHORT,   /* closed before the whole body */
  WS_ERR_WRONG,   /* a byte (or the length) differs from the file */
  WS_ERR_OTHER,   /* any other socket error */
  WS_ERR_COUNT
};

extern const char *const ws_error_names[WS_ERR_COUNT];

struct ws_stats {
  uint64_t requests;   /* completed while measuring */
  uint64_t bytes;      /* received while measuring: headers and bodies */
  uint64_t body_bytes; /* ... of which bodies */
  uint64_t connects;   /* connections opened while measuring */
  uint64_t warmup_requests;
  uint64_t reconnects; /* a kept-alive connection the server had closed */
  uint64_t handshakes; /* --tls: handshakes completed while measuring */
  uint64_t resumed;    /* ... of which resumed a session */
  double rate_sum;     /* per request: bits / (close - request start) */
  /* Requests still in flight when the measurement stopped, and the age of
   * the oldest: a server that leaves some clients waiting (a full listen
   * queue) shows here, not in the latencies of the completed ones. */
  uint64_t unfinished, unfinished_max_ns;
  int64_t last_done; /* when the last counted request ended (ws_now_ns) */
  uint64_t errors[WS_ERR_COUNT];
  struct histogram first_byte, last_byte; /* ns, ../histogram.h */
};

void ws_stats_merge(struct ws_stats *into, const struct ws_stats *s);
uint64_t ws_stats_errors(const struct ws_stats *s);

/* The human line (to `human`) and, with --json, the JSON line (stdout). */
void ws_report(FILE *human, const struct ws_stats *s, double seconds,
               int failed);

/* ---- sockets and readiness (net.c) -------------------------------------- */

struct ws_address {
  struct sockaddr_storage addr;
  socklen_t len;
};

int ws_net_resolve(const char *host, const char *port, struct ws_address *a);
/* Start a non-blocking connect: a descriptor (>= 0) and *done = 1 if it
 * connected at once, or -errno. */
int ws_net_connect(const struct ws_address *a, int *done);
/* The outcome of a connect in progress: 0 or an errno value. */
int ws_net_connect_result(int fd);
/* Bytes moved, or -errno (-EAGAIN when the socket is not ready). */
ssize_t ws_net_send(int fd, const void *buf, size_t len);
ssize_t ws_net_recv(int fd, void *buf, size_t len);
void ws_net_close(int fd);
int ws_net_raise_fd_limit(long want);

#define WS_EV_IN 1
#define WS_EV_OUT 2
#define WS_EV_ERR 4

struct ws_event {
  uint32_t tag;
  int flags;
};

int ws_poller_open(void);
/* Watch `fd` for WS_EV_IN and/or WS_EV_OUT; add or change. */
int ws_poller_watch(int poller, int fd, int add, int flags, uint32_t tag);
int ws_poller_wait(int poller, struct ws_event *ev, int max, int timeout_ms);
void ws_poller_close(int poller);

/* ---- TLS (tls.c, --tls) ------------------------------------------------- */

/* The client context; 0, or -1 with a message (built without OpenSSL). */
int ws_tls_init(void);
void ws_tls_cleanup(void);
/* TLS on the connected socket fd, offering `session` (from ws_tls_end;
 * NULL: none): the connection's state, or NULL (out of memory). */
void *ws_tls_begin(int fd, void *session);
/* The handshake's next step: 0 once done, -EAGAIN with *want (WS_EV_IN
 * or WS_EV_OUT) to wait for, -EPROTO (a TLS failure) or -errno. */
int ws_tls_handshake(void *t, int *want);
/* As ws_net_send and ws_net_recv (recv: 0 at close_notify or the
 * socket's end), -EAGAIN with *want set. */
ssize_t ws_tls_send(void *t, const void *buf, size_t len, int *want);
ssize_t ws_tls_recv(void *t, void *buf, size_t len, int *want);
/* 1 when the handshake resumed a session. */
int ws_tls_resumed(void *t);
/* Free t (not its socket); with `session`, keep its session there for
 * the next connection (replacing the one kept). */
void ws_tls_end(void *t, void **session);
void ws_tls_forget(void *session);

/* ---- client threads (client.c) ------------------------------------------ */

enum ws_phase { WS_WARMUP, WS_MEASURE, WS_STOP };

extern atomic_int ws_phase;
extern atomic_llong ws_quota;    /* --requests: measured ones left to start */
extern atomic_llong ws_finished; /* measured requests done (or failed) */
extern atomic_int ws_error_reports;

struct ws_client;

struct ws_thread {
  pthread_t thread;
  long index;
  struct ws_client *clients;
  long nclients;
  const struct ws_docroot *docroot;
  const struct ws_address *address;
  struct ws_stats *st;
  int poller;
};

/* Allocate a thread's clients (all memory of the run is taken here). */
int ws_thread_init(struct ws_thread *t, long first_client, long n);
void ws_thread_free(struct ws_thread *t);
void *ws_thread_main(void *arg);

#endif
