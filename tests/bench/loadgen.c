/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen.c - a closed-loop TCP echo load generator for the benchmark.
 *
 *     loadgen --port P [--host 127.0.0.1] [--connections C] [--threads T]
 *             [--size S] [--duration SEC | --messages M] [--warmup SEC]
 *             [--time-limit SEC] [--on-measure-start CMD]
 *             [--on-measure-end CMD] [--poller epoll|poll] [--json]
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
 */
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

/* How long to wait for the round trips in flight to finish when pausing. */
#define DRAIN_TIMEOUT_NS (10 * NSEC_PER_SEC)

/* Report at most this many individual errors; the counts cover all. */
#define MAX_ERROR_REPORTS 10

#define NSEC_PER_SEC 1000000000LL
#define NSEC_PER_MSEC 1000000LL

/* ---- time ---------------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static void sleep_ns(int64_t ns) {
  struct timespec ts;
  if (ns <= 0) return;
  ts.tv_sec = (time_t)(ns / NSEC_PER_SEC);
  ts.tv_nsec = (long)(ns % NSEC_PER_SEC);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

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
};

static struct options opt;

static atomic_uint_fast64_t state;
static atomic_int acks;
static atomic_int finished; /* threads done with their --messages share */
static atomic_int error_reports;
static atomic_long live_connections;

static uint64_t make_state(uint64_t generation, enum phase p) {
  return generation << 8 | (uint64_t)p;
}

/* ---- one connection ------------------------------------------------------ */

struct conn {
  int fd;
  long id;
  int busy;     /* a round trip is in flight */
  int measured; /* ... and it started during the measurement */
  int want_out; /* epoll: waiting for writability too */
  size_t sent, received;
  uint64_t seq;           /* round trips started on this connection */
  long long quota;        /* --messages: measured round trips left to start */
  int64_t started_at;     /* when the round trip in flight began */
  unsigned char *pattern; /* size + 256 bytes of noise */
  unsigned char *out, *in;
};

struct thread_stats {
  uint64_t messages;  /* measured round trips */
  uint64_t in_window; /* ... of which completed before the stop */
  uint64_t warmup_messages;
  uint64_t mismatches, resets, io_errors;
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

static void report_error(const struct conn *c, const char *fmt, ...) {
  va_list ap;
  if (atomic_fetch_add(&error_reports, 1) >= MAX_ERROR_REPORTS) return;
  fprintf(stderr, "loadgen: connection %ld, round trip %llu: ", c->id,
          (unsigned long long)c->seq);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void conn_kill(struct client_thread *t, struct conn *c) {
  if (c->fd >= 0) {
    close(c->fd); /* which also takes it out of the epoll set */
    c->fd = -1;
    atomic_fetch_sub(&live_connections, 1);
  }
  if (c->busy) t->in_flight--;
  c->busy = 0;
}

static void conn_failed_io(struct client_thread *t, struct conn *c,
                           const char *what, int err) {
  if (err == ECONNRESET || err == EPIPE || err == ECONNABORTED) {
    t->st.resets++;
    report_error(c, "%s: connection reset (%s)", what, strerror(err));
  } else {
    t->st.io_errors++;
    report_error(c, "%s: %s", what, strerror(err));
  }
  conn_kill(t, c);
}

/* With epoll, wait for writability only while a message is half sent
 * (rare: the socket buffer takes a whole message almost always). */
static void conn_want_output(struct client_thread *t, struct conn *c, int on) {
#if HAVE_EPOLL
  struct epoll_event ev;
  if (!opt.use_epoll || c->fd < 0 || c->want_out == on) return;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN | (on ? EPOLLOUT : 0);
  ev.data.u64 = (uint64_t)(c - t->conns);
  if (epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
    c->want_out = on;
  else
    conn_failed_io(t, c, "epoll_ctl", errno);
#else
  (void)t;
  (void)c;
  (void)on;
#endif
}

/* Fill the next message: noise from the connection's pattern at an offset
 * that changes every time, stamped with the connection and round trip, so
 * that a stale reply or one meant for another connection does not pass. */
static void conn_prepare(struct conn *c, size_t size) {
  uint64_t stamp = c->seq ^ ((uint64_t)c->id << 40);
  memcpy(c->out, c->pattern + (c->seq & 255), size);
  memcpy(c->out, &stamp, size < sizeof stamp ? size : sizeof stamp);
  c->sent = c->received = 0;
}

/* Send what the socket takes of the message in flight.  Returns -1 if the
 * connection failed (and was closed). */
static int conn_send(struct client_thread *t, struct conn *c, size_t size) {
  while (c->sent < size) {
    ssize_t n = send(c->fd, c->out + c->sent, size - c->sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        conn_want_output(t, c, 1);
        return c->fd < 0 ? -1 : 0;
      }
      conn_failed_io(t, c, "send", errno);
      return -1;
    }
    c->sent += (size_t)n;
  }
  conn_want_output(t, c, 0);
  return c->fd < 0 ? -1 : 0;
}

static void conn_start(struct client_thread *t, struct conn *c, int measured,
                       int64_t now) {
  size_t size = (size_t)opt.size;
  conn_prepare(c, size);
  c->busy = 1;
  t->in_flight++;
  c->measured = measured;
  c->started_at = now;
  if (measured && opt.messages > 0) c->quota--;
  c->seq++;
  (void)conn_send(t, c, size);
}

/* The socket is readable.  Returns 1 if the round trip completed. */
static int conn_receive(struct client_thread *t, struct conn *c) {
  size_t size = (size_t)opt.size;
  for (;;) {
    ssize_t n;
    unsigned char probe;
    if (!c->busy) {
      /* Nothing is expected: anything readable is a mistake or a close. */
      n = recv(c->fd, &probe, 1, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
      if (n < 0) {
        conn_failed_io(t, c, "recv", errno);
      } else if (n == 0) {
        t->st.resets++;
        report_error(c, "the server closed the connection");
        conn_kill(t, c);
      } else {
        t->st.mismatches++;
        report_error(c, "unexpected bytes while no message was in flight");
        conn_kill(t, c);
      }
      return 0;
    }
    n = recv(c->fd, c->in + c->received, size - c->received, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      conn_failed_io(t, c, "recv", errno);
      return 0;
    }
    if (n == 0) {
      t->st.resets++;
      report_error(c,
                   "the server closed the connection (%zu of %zu bytes back)",
                   c->received, size);
      conn_kill(t, c);
      return 0;
    }
    if (c->received + (size_t)n > c->sent) {
      t->st.mismatches++;
      report_error(c, "%zu bytes came back, only %zu were sent",
                   c->received + (size_t)n, c->sent);
      conn_kill(t, c);
      return 0;
    }
    if (memcmp(c->in + c->received, c->out + c->received, (size_t)n) != 0) {
      size_t at = c->received;
      while (c->in[at] == c->out[at]) at++;
      t->st.mismatches++;
      report_error(c, "byte %zu came back as 0x%02x, sent 0x%02x", at,
                   c->in[at], c->out[at]);
      conn_kill(t, c);
      return 0;
    }
    c->received += (size_t)n;
    if (c->received == size) return 1;
  }
}

/* ---- a client thread ----------------------------------------------------- */

/* Connection c reported revents (POLLIN, POLLOUT, POLLERR, POLLHUP,
 * POLLNVAL): finish its round trip if the echo is complete, and start the
 * next one at once if the phase allows. */
static void conn_ready(struct client_thread *t, struct conn *c, short re) {
  size_t size = (size_t)opt.size;
  if (re == 0 || c->fd < 0) return;
  if (re & POLLNVAL) {
    t->st.io_errors++;
    report_error(c, "poll: the descriptor is not open");
    c->fd = -1;
    if (c->busy) t->in_flight--;
    c->busy = 0;
    atomic_fetch_sub(&live_connections, 1);
    return;
  }
  /* An error or hang-up shows up as such from recv or send. */
  if ((re & (POLLIN | POLLHUP | POLLERR)) && conn_receive(t, c)) {
    int64_t end = now_ns();
    enum phase p = (enum phase)(atomic_load(&state) & 0xff);
    c->busy = 0;
    t->in_flight--;
    if (c->measured) {
      hist_record(t->hist, (uint64_t)(end - c->started_at));
      t->st.messages++;
      if (p == PHASE_MEASURE) t->st.in_window++;
      t->last_measured = end;
    } else {
      t->st.warmup_messages++;
    }
    /* Start the next round trip right away if allowed: the socket is
     * almost certainly writable, so this saves a wait. */
    if ((p == PHASE_WARMUP || p == PHASE_MEASURE) &&
        !(p == PHASE_MEASURE && opt.messages > 0 && c->quota <= 0))
      conn_start(t, c, p == PHASE_MEASURE, end);
  }
  if (c->fd >= 0 && c->busy && c->sent < size && (re & POLLOUT))
    (void)conn_send(t, c, size);
}

/* Wait up to POLL_TICK_MS for the connections with poll() and handle what
 * is ready.  Returns -1 on a failure of poll itself. */
static int turn_poll(struct client_thread *t) {
  size_t size = (size_t)opt.size;
  long i;
  int rc;
  for (i = 0; i < t->nconns; i++) {
    const struct conn *c = &t->conns[i];
    t->pfds[i].fd = c->fd; /* negative: ignored by poll */
    t->pfds[i].events = POLLIN;
    t->pfds[i].revents = 0;
    if (c->fd >= 0 && c->busy && c->sent < size) t->pfds[i].events |= POLLOUT;
  }
  rc = poll(t->pfds, (nfds_t)t->nconns, POLL_TICK_MS);
  if (rc < 0) {
    if (errno == EINTR) return 0;
    fprintf(stderr, "loadgen: poll: %s\n", strerror(errno));
    return -1;
  }
  for (i = 0; rc > 0 && i < t->nconns; i++)
    conn_ready(t, &t->conns[i], t->pfds[i].revents);
  return 0;
}

#if HAVE_EPOLL
/* The same with epoll: only the ready connections are looked at. */
static int turn_epoll(struct client_thread *t) {
  int i, n = epoll_wait(t->epfd, t->events, EPOLL_BATCH, POLL_TICK_MS);
  if (n < 0) {
    if (errno == EINTR) return 0;
    fprintf(stderr, "loadgen: epoll_wait: %s\n", strerror(errno));
    return -1;
  }
  for (i = 0; i < n; i++) {
    uint32_t ev = t->events[i].events;
    short re = (short)(((ev & EPOLLIN) ? POLLIN : 0) |
                       ((ev & EPOLLOUT) ? POLLOUT : 0) |
                       ((ev & EPOLLERR) ? POLLERR : 0) |
                       ((ev & EPOLLHUP) ? POLLHUP : 0));
    conn_ready(t, &t->conns[t->events[i].data.u64], re);
  }
  return 0;
}

/* Register the thread's connections with a new epoll set. */
static int epoll_setup(struct client_thread *t) {
  long i;
  t->epfd = epoll_create1(EPOLL_CLOEXEC);
  t->events = calloc(EPOLL_BATCH, sizeof *t->events);
  if (t->epfd < 0 || t->events == NULL) {
    fprintf(stderr, "loadgen: epoll set: %s\n",
            t->epfd < 0 ? strerror(errno) : "out of memory");
    return -1;
  }
  for (i = 0; i < t->nconns; i++) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.u64 = (uint64_t)i;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->conns[i].fd, &ev) < 0) {
      fprintf(stderr, "loadgen: epoll_ctl: %s\n", strerror(errno));
      return -1;
    }
  }
  return 0;
}
#endif

static void *client_main(void *arg) {
  struct client_thread *t = arg;
  uint64_t acked = UINT64_MAX;   /* the state last acknowledged */
  uint64_t started = UINT64_MAX; /* the state idle connections started in */
  int done = 0;                  /* --messages share completed */

  for (;;) {
    uint64_t s = atomic_load(&state);
    enum phase p = (enum phase)(s & 0xff);
    int measuring = p == PHASE_MEASURE;
    int rc;

    if (p == PHASE_EXIT) break;

    /* A connection left idle only because the phase forbade sending (or
     * its --messages quota ran out) waits for the next phase: start them
     * all when it comes.  The others restart as their echo completes. */
    if (s != started) {
      long i;
      int64_t now = now_ns();
      started = s;
      for (i = 0; i < t->nconns && (p == PHASE_WARMUP || measuring); i++) {
        struct conn *c = &t->conns[i];
        if (c->fd >= 0 && !c->busy &&
            !(measuring && opt.messages > 0 && c->quota <= 0))
          conn_start(t, c, measuring, now);
      }
    }

    if (t->in_flight == 0) {
      if ((p == PHASE_PAUSE || p == PHASE_STOP) && acked != s) {
        acked = s;
        atomic_fetch_add(&acks, 1);
      } else if (measuring && opt.messages > 0 && !done) {
        done = 1;
        atomic_fetch_add(&finished, 1);
      }
    }

#if HAVE_EPOLL
    rc = opt.use_epoll ? turn_epoll(t) : turn_poll(t);
#else
    rc = turn_poll(t);
#endif
    if (rc < 0) {
      t->st.io_errors++;
      break;
    }
  }
  return NULL;
}

/* ---- main thread --------------------------------------------------------- */

static int64_t deadline; /* --time-limit, as a now_ns() value */

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

/* Make room for `want` descriptors: raise the soft limit, up to the hard
 * one, if it is lower.  Returns -1 with a message if that is not enough. */
static int raise_fd_limit(long want) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0; /* try anyway */
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)want) return 0;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (rlim_t)want
                    ? (rlim_t)want
                    : rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= (rlim_t)want)
    return 0;
  fprintf(stderr,
          "loadgen: %ld connections need %ld descriptors, and the limit is "
          "%llu (hard limit %llu)\n",
          opt.connections, want, (unsigned long long)rl.rlim_cur,
          (unsigned long long)rl.rlim_max);
  return -1;
}

static int connect_one(const struct addrinfo *ai, int *out) {
  int fd = -1, one = 1, err = 0, flags;
  const struct addrinfo *a;
  for (a = ai; a != NULL; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    err = errno;
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    errno = err;
    return -1;
  }
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
    err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  *out = fd;
  return 0;
}

/* Wait until every connection of conns[0 .. n) has had its probe byte
 * echoed.  Returns -1 with a message if one fails or the time runs out. */
static int await_probes(struct conn *conns, long n, struct pollfd *pfds) {
  long i, left = n;
  int64_t limit = now_ns() + DRAIN_TIMEOUT_NS;
  for (i = 0; i < n; i++) {
    pfds[i].fd = conns[i].fd;
    pfds[i].events = POLLIN;
  }
  while (left > 0) {
    int64_t now = now_ns(), until = limit < deadline ? limit : deadline;
    int rc;
    if (now >= until) {
      fprintf(stderr,
              "loadgen: the server answered %ld of %ld new connections "
              "within %lld s\n",
              n - left, n, (long long)(DRAIN_TIMEOUT_NS / NSEC_PER_SEC));
      return -1;
    }
    rc = poll(pfds, (nfds_t)n, (int)((until - now) / NSEC_PER_MSEC) + 1);
    if (rc < 0 && errno != EINTR) {
      fprintf(stderr, "loadgen: poll: %s\n", strerror(errno));
      return -1;
    }
    for (i = 0; rc > 0 && i < n; i++) {
      unsigned char byte;
      ssize_t got;
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      got = recv(pfds[i].fd, &byte, 1, 0);
      if (got < 0 &&
          (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        continue;
      if (got != 1 || byte != PROBE_BYTE) {
        fprintf(stderr, "loadgen: connection %ld: %s\n", conns[i].id,
                got < 0    ? strerror(errno)
                : got == 0 ? "closed by the server before any echo"
                           : "the first byte echoed is not the one sent");
        return -1;
      }
      pfds[i].fd = -1;
      left--;
    }
  }
  return 0;
}

/*
 * Open the connections in batches, and have the server echo one byte on
 * each before opening the next batch.  A connection that completes its
 * handshake while the server's listen queue is full is dropped by the
 * server's kernel and retried a second or more later (the client's kernel
 * thinks it open meanwhile), which would stall the run: the echo shows the
 * server has accepted the batch, so the queue never holds more than one.
 */
static int open_connections(const struct addrinfo *ai, struct conn *conns) {
  struct pollfd *pfds = calloc(CONNECT_BATCH, sizeof *pfds);
  long first, i;
  int rc = 0;
  if (pfds == NULL) {
    fprintf(stderr, "loadgen: out of memory\n");
    return -1;
  }
  for (first = 0; rc == 0 && first < opt.connections; first += CONNECT_BATCH) {
    long n = opt.connections - first;
    if (n > CONNECT_BATCH) n = CONNECT_BATCH;
    for (i = first; rc == 0 && i < first + n; i++) {
      static const unsigned char probe = PROBE_BYTE;
      int err;
      if (connect_one(ai, &conns[i].fd) == 0) {
        atomic_fetch_add(&live_connections, 1);
        if (send(conns[i].fd, &probe, 1, MSG_NOSIGNAL) == 1) continue;
      }
      err = errno;
      fprintf(stderr, "loadgen: connection %ld to %s port %s: %s%s\n", i,
              opt.host, opt.port, strerror(err),
              err == EADDRNOTAVAIL ? " (out of local ports? see "
                                     "/proc/sys/net/ipv4/ip_local_port_range)"
                                   : "");
      rc = -1;
    }
    if (rc == 0) rc = await_probes(conns + first, n, pfds);
  }
  free(pfds);
  return rc;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: loadgen --port P [--host ADDR] [--connections C] "
          "[--threads T]\n"
          "               [--size S] [--duration SEC | --messages M] "
          "[--warmup SEC]\n"
          "               [--time-limit SEC] [--on-measure-start CMD]\n"
          "               [--on-measure-end CMD] [--poller epoll|poll] "
          "[--json]\n"
          "  --port P              the echo server's TCP port\n"
          "  --host ADDR           its address (default 127.0.0.1)\n"
          "  --connections C       concurrent connections (default 64)\n"
          "  --threads T           client threads (default 2)\n"
          "  --size S              bytes per message (default 64)\n"
          "  --duration SEC        measure for SEC seconds (default 5)\n"
          "  --messages M          or measure M round trips in all\n"
          "  --warmup SEC          unmeasured warm-up first (default 1)\n"
          "  --time-limit SEC      give up after SEC seconds in all\n"
          "                        (default: warm-up + duration + 30, or\n"
          "                        warm-up + 300 with --messages)\n"
          "  --on-measure-start CMD  run CMD (sh -c) just before measuring\n"
          "  --on-measure-end CMD    run CMD just after measuring\n"
          "  --poller epoll|poll   how threads wait (default: epoll where it\n"
          "                        exists, else poll)\n"
          "  --json                print the result as one JSON object\n");
}

static int parse_args(int argc, char **argv) {
  int i = 1, have_duration = 0, have_limit = 0;
  opt.host = "127.0.0.1";
  opt.port = NULL;
  opt.connections = 64;
  opt.threads = 2;
  opt.size = 64;
  opt.duration = 5;
  opt.warmup = 1;
  opt.messages = 0;
  opt.use_epoll = HAVE_EPOLL;

  while (i < argc) {
    const char *v;
    long n;
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      exit(EXIT_OK);
    }
    if (strcmp(argv[i], "--json") == 0) {
      opt.json = 1;
      i++;
      continue;
    }
    if ((m = cmdline_option("loadgen", argc, argv, &i, "--port", &v)) > 0) {
      if (cmdline_long("loadgen", "--port", v, 1, 65535, &n) < 0) return -1;
      opt.port = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--host", &v)) > 0) {
      opt.host = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--connections", &v)) > 0) {
      if (cmdline_long("loadgen", "--connections", v, 1, MAX_CONNECTIONS,
                       &opt.connections) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--threads", &v)) > 0) {
      if (cmdline_long("loadgen", "--threads", v, 1, MAX_THREADS,
                       &opt.threads) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--size", &v)) > 0) {
      if (cmdline_long("loadgen", "--size", v, 1, MAX_SIZE, &opt.size) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--duration", &v)) > 0) {
      if (cmdline_seconds("loadgen", "--duration", v, 0.001, &opt.duration) < 0)
        return -1;
      have_duration = 1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--messages", &v)) > 0) {
      if (cmdline_long("loadgen", "--messages", v, 1, LONG_MAX, &n) < 0)
        return -1;
      opt.messages = n;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--warmup", &v)) > 0) {
      if (cmdline_seconds("loadgen", "--warmup", v, 0, &opt.warmup) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--time-limit", &v)) > 0) {
      if (cmdline_seconds("loadgen", "--time-limit", v, 0.001,
                          &opt.time_limit) < 0)
        return -1;
      have_limit = 1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--on-measure-start", &v)) > 0) {
      opt.on_start = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--on-measure-end", &v)) > 0) {
      opt.on_end = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--poller", &v)) > 0) {
      if (strcmp(v, "poll") == 0) {
        opt.use_epoll = 0;
      } else if (strcmp(v, "epoll") == 0 && HAVE_EPOLL) {
        opt.use_epoll = 1;
      } else {
        fprintf(stderr, "loadgen: --poller: '%s' is not available here\n", v);
        return -1;
      }
    } else {
      if (m == 0) fprintf(stderr, "loadgen: unknown argument '%s'\n", argv[i]);
      return -1;
    }
  }
  if (opt.port == NULL) {
    fprintf(stderr, "loadgen: --port is required\n");
    return -1;
  }
  if (have_duration && opt.messages > 0) {
    fprintf(stderr, "loadgen: give --duration or --messages, not both\n");
    return -1;
  }
  if (opt.threads > opt.connections) opt.threads = opt.connections;
  if (!have_limit)
    opt.time_limit =
        opt.warmup + (opt.messages > 0 ? 300.0 : opt.duration) + 30.0;
  return 0;
}

int main(int argc, char **argv) {
  struct addrinfo hints, *ai = NULL;
  struct client_thread *threads = NULL;
  struct conn *conns = NULL;
  unsigned char *buffers = NULL;
  struct histogram *total = NULL;
  struct thread_stats sum;
  uint64_t generation = 0;
  int64_t t_start = 0, t_end = 0, t_stop = 0, started, warm_start = 0;
  long i, next;
  int rc, failed = 0, nstarted = 0;
  size_t per_conn;
  double seconds, rate, connect_seconds = 0;
  unsigned long long errors;
  FILE *human;

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
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(opt.host, opt.port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "loadgen: %s port %s: %s\n", opt.host, opt.port,
            gai_strerror(rc));
    return EXIT_ERROR;
  }

  /* Everything is allocated here, once. */
  per_conn = 3 * (size_t)opt.size + 256; /* pattern, out, in */
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
  memset(&sum, 0, sizeof sum);
  for (i = 0; i < opt.threads; i++) {
    struct client_thread *t = &threads[i];
    if (t->hist) hist_merge(total, t->hist);
    sum.messages += t->st.messages;
    sum.in_window += t->st.in_window;
    sum.warmup_messages += t->st.warmup_messages;
    sum.mismatches += t->st.mismatches;
    sum.resets += t->st.resets;
    sum.io_errors += t->st.io_errors;
    free(t->pfds);
    free(t->hist);
#if HAVE_EPOLL
    if (t->epfd >= 0) close(t->epfd);
    free(t->events);
#endif
  }
  for (i = 0; i < opt.connections; i++)
    if (conns[i].fd >= 0) close(conns[i].fd);

  if (opt.messages > 0 || t_stop == 0) {
    seconds = t_end > t_start ? (double)(t_end - t_start) / 1e9 : 0;
    rate = seconds > 0 ? (double)sum.messages / seconds : 0;
  } else {
    seconds = (double)(t_stop - t_start) / 1e9;
    rate = seconds > 0 ? (double)sum.in_window / seconds : 0;
  }
  errors = (unsigned long long)(sum.mismatches + sum.resets + sum.io_errors +
                                (unsigned)failed);
  if (errors) failed = 1;

  human = opt.json ? stderr : stdout;
  fprintf(human,
          "loadgen: %ld conns x %ld B, %ld threads: %.2f s, %llu msgs, "
          "%.0f msgs/s; latency us p50 %.1f p99 %.1f p999 %.1f max %.1f; "
          "errors %llu\n",
          opt.connections, opt.size, opt.threads, seconds,
          (unsigned long long)sum.messages, rate,
          hist_quantile(total, 0.50) / 1e3, hist_quantile(total, 0.99) / 1e3,
          hist_quantile(total, 0.999) / 1e3, (double)total->max / 1e3, errors);
  if (opt.json) {
    printf("{\"host\":");
    json_string(stdout, opt.host);
    printf(
        ",\"port\":%s,\"connections\":%ld,\"threads\":%ld,\"size\":%ld,"
        "\"connect_s\":%.3f,\"warmup_s\":%.3f,\"duration_s\":%.6f,"
        "\"messages\":%llu,"
        "\"window_messages\":%llu,"
        "\"warmup_messages\":%llu,\"msgs_per_s\":%.1f,"
        "\"mean_us\":%.2f,\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,"
        "\"p999_us\":%.2f,\"max_us\":%.2f,\"errors\":%llu,"
        "\"mismatches\":%llu,\"resets\":%llu,\"io_errors\":%llu,"
        "\"ok\":%s}\n",
        opt.port, opt.connections, opt.threads, opt.size, connect_seconds,
        opt.warmup, seconds, (unsigned long long)sum.messages,
        (unsigned long long)sum.in_window,
        (unsigned long long)sum.warmup_messages, rate,
        total->total ? (double)total->sum / (double)total->total / 1e3 : 0.0,
        hist_quantile(total, 0.50) / 1e3, hist_quantile(total, 0.90) / 1e3,
        hist_quantile(total, 0.99) / 1e3, hist_quantile(total, 0.999) / 1e3,
        (double)total->max / 1e3, errors, (unsigned long long)sum.mismatches,
        (unsigned long long)sum.resets, (unsigned long long)sum.io_errors,
        failed ? "false" : "true");
  }
  fflush(stdout);
  free(threads);
  free(conns);
  free(buffers);
  free(total);
  return failed ? EXIT_ERROR : EXIT_OK;
}
