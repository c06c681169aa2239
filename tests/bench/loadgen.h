/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen.h - what the parts of the load generator share (see loadgen.c
 * for what it does): the run's phases and options, a connection, a client
 * thread, the run-wide state the main thread publishes.
 *
 *   loadgen.c          the run loop: phases, hooks, main()
 *   loadgen_options.c  the command line
 *   loadgen_connect.c  opening the connections, in probed batches
 *   loadgen_client.c   a client thread and its connections' round trips
 *   loadgen_report.c   the result: the human line and the JSON object
 */
#ifndef TAXI_BENCH_LOADGEN_H
#define TAXI_BENCH_LOADGEN_H

#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmdline.h"
#include "histogram.h"
#include "json.h"

#ifdef __linux__
#include <sys/epoll.h>
#define HAVE_EPOLL 1
#else
#define HAVE_EPOLL 0
#endif

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SIGPIPE is ignored as well, see main() */
#endif

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

#define MAX_CONNECTIONS 100000L
#define MAX_THREADS 256L
#define MAX_SIZE (16L * 1024 * 1024)

/* Connections opened before the server must have accepted them all, and
 * the byte each then sends to see it echoed. */
#define CONNECT_BATCH 128
#define PROBE_BYTE 0x5a

/* Ready connections taken from epoll per call. */
#define EPOLL_BATCH 256

/* Descriptors beyond the connections (stdio, epoll, hooks, the resolver). */
#define SPARE_DESCRIPTORS 32

/* How long a thread's poll() sleeps at most, so that it notices phase
 * changes while its connections are quiet. */
#define POLL_TICK_MS 10

/* --mode udp: a datagram unanswered this long was lost (loopback loses
 * one only when a socket buffer is full): it is sent again. */
#define UDP_RESEND_NS (200 * NSEC_PER_MSEC)

/* How long to wait for the round trips in flight to finish when pausing. */
#define DRAIN_TIMEOUT_NS (10 * NSEC_PER_SEC)

/* Report at most this many individual errors; the counts cover all. */
#define MAX_ERROR_REPORTS 10

#define NSEC_PER_SEC 1000000000LL
#define NSEC_PER_MSEC 1000000LL

/* ---- run-wide state ---------------------------------------------------------
 *
 * The main thread steps the run through its phases by publishing
 * `state` = generation << 8 | phase; every publication bumps the
 * generation.  In the phases that stop sending, each client thread, once it
 * has no round trip in flight, acknowledges the generation it saw by
 * incrementing `acks` (reset before publishing) and recording when.
 */

enum phase {
  PHASE_WARMUP,  /* send, count nothing */
  PHASE_PAUSE,   /* send no more; acknowledge when idle */
  PHASE_MEASURE, /* send and count */
  PHASE_STOP,    /* send no more, count what completes; ack when idle */
  PHASE_EXIT     /* return */
};

struct options {
  const char *host, *port;
  long connections, threads, size;
  double duration, warmup, time_limit;
  long long messages; /* 0: run for `duration` instead */
  const char *on_start, *on_end;
  int json;
  int use_epoll; /* else poll() */
  /* --mode cec: every round trip on a connection of its own (connect,
   * echo, close); the server's address, for those connections. */
  int cec;
  /* --mode udp: each "connection" a UDP socket connected to the server,
   * a message one datagram (sent again after UDP_RESEND_NS unanswered). */
  int udp;
  struct sockaddr_storage target;
  socklen_t target_len;
};

struct conn {
  int fd;
  long id;
  int busy;     /* a round trip is in flight */
  int measured; /* ... and it started during the measurement */
  int want_out; /* epoll: waiting for writability too */
  int parked;   /* --mode cec: closed after its round trip, none started */
  size_t sent, received;
  uint64_t seq;           /* round trips started on this connection */
  long long quota;        /* --messages: measured round trips left to start */
  int64_t started_at;     /* when the round trip in flight began */
  int64_t sent_at;        /* --mode udp: when its datagram last went */
  unsigned char *pattern; /* size + 256 bytes of noise */
  unsigned char *out, *in;
};

struct thread_stats {
  uint64_t messages;  /* measured round trips */
  uint64_t in_window; /* ... of which completed before the stop */
  uint64_t warmup_messages;
  uint64_t mismatches, resets, io_errors;
  uint64_t resends; /* --mode udp: datagrams sent again, unanswered */
  uint64_t stale;   /* --mode udp: echoes of a datagram sent again */
};

struct client_thread {
  pthread_t thread;
  long index;
  struct conn *conns;
  long nconns;
  long in_flight;      /* connections with a round trip in flight */
  struct pollfd *pfds; /* poll() */
#if HAVE_EPOLL
  int epfd; /* epoll: each connection registered, data = its index */
  struct epoll_event *events;
#endif
  struct histogram *hist;
  struct thread_stats st;
  int64_t last_measured; /* when its last measured round trip completed */
};

/* The run-wide state (loadgen.c). */
extern struct options opt;
extern atomic_uint_fast64_t state;
extern atomic_int acks;
extern atomic_int finished; /* threads done with their --messages share */
extern atomic_int error_reports;
extern atomic_long live_connections;
extern int64_t deadline; /* --time-limit, as a now_ns() value */

static inline uint64_t make_state(uint64_t generation, enum phase p) {
  return generation << 8 | (uint64_t)p;
}

/* The monotonic clock in nanoseconds; sleeping through EINTR. */
int64_t now_ns(void);
void sleep_ns(int64_t ns);

/* loadgen_options.c: fill `opt` from the command line: 0, or -1 after a
 * message; usage() prints the help to out. */
void usage(FILE *out);
int parse_args(int argc, char **argv);

/* loadgen_connect.c: make room for `want` descriptors (-1 after a message
 * when the hard limit is lower); open opt.connections connections to ai
 * into conns, each probed (0, or -1 after a message). */
int raise_fd_limit(long want);
int open_connections(const struct addrinfo *ai, struct conn *conns);

/* loadgen_client.c: a client thread's body (arg: its client_thread), and
 * its epoll set (0, or -1 after a message). */
void *client_main(void *arg);
#if HAVE_EPOLL
int epoll_setup(struct client_thread *t);
#endif

/* loadgen_report.c: when the measurement began, stopped publishing
 * (0: never) and ended with its last round trip; how long opening took. */
struct run_times {
  int64_t start, stop, end;
  double connect_seconds;
};

/* Sum the threads' counts into `total` (an empty histogram), close the
 * connections, print the result; the exit status, failed if anything
 * went wrong (`failed` already, or an error counted). */
int report(struct client_thread *threads, struct conn *conns,
           struct histogram *total, const struct run_times *rt, int failed);

#endif /* TAXI_BENCH_LOADGEN_H */
