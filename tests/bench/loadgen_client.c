/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen_client.c - the load generator's client threads: each drives its
 * block of connections, non-blocking, through the round trips of the
 * phase the main thread publishes (see loadgen.c).
 */
#include "loadgen.h"

/* ---- one connection ------------------------------------------------------ */

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

/* --mode cec: the round trip is over; close the connection (the server
 * sees the end, and closes its side).  The slot stays live: it connects
 * again for its next round trip. */
static void conn_park(struct conn *c) {
  close(c->fd); /* which also takes it out of the epoll set */
  c->fd = -1;
  c->want_out = 0;
  c->parked = 1;
}

/* --mode cec: a new connection for the next round trip, connecting in the
 * background (the message goes once it is writable).  Returns -1 if it
 * failed (the slot is dead then). */
static int conn_reopen(struct client_thread *t, struct conn *c) {
  int one = 1, fd, err;
  if (c->fd >= 0) conn_park(c);
  c->parked = 0;
  fd = socket(opt.target.ss_family, SOCK_STREAM, 0);
  if (fd < 0) goto failed;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
    goto failed;
  if (connect(fd, (const struct sockaddr *)&opt.target, opt.target_len) < 0 &&
      errno != EINPROGRESS)
    goto failed;
#if HAVE_EPOLL
  if (opt.use_epoll) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.u64 = (uint64_t)(c - t->conns);
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) goto failed;
  }
#endif
  c->fd = fd;
  return 0;
failed:
  err = errno;
  if (fd >= 0) close(fd);
  t->st.io_errors++;
  report_error(c, "connect: %s", strerror(err));
  atomic_fetch_sub(&live_connections, 1);
  return -1;
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
  if (opt.cec && conn_reopen(t, c) < 0) {
    c->busy = 0;
    t->in_flight--;
    return;
  }
  c->sent_at = now;
  (void)conn_send(t, c, size);
}

/* --mode udp: the socket is readable.  Returns 1 if the round trip
 * completed: its datagram came back whole.  The echo of a datagram sent
 * again may come twice: the second, or one that comes while nothing is in
 * flight, is skipped (its stamp is that of an earlier round trip). */
static int conn_receive_udp(struct client_thread *t, struct conn *c) {
  size_t size = (size_t)opt.size, stamp = size < 8 ? size : 8;
  for (;;) {
    ssize_t n = recv(c->fd, c->in, size + 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      conn_failed_io(t, c, "recv", errno);
      return 0;
    }
    if (!c->busy || ((size_t)n >= stamp && memcmp(c->in, c->out, stamp) != 0)) {
      t->st.stale++;
      continue;
    }
    if ((size_t)n != size) {
      t->st.mismatches++;
      report_error(c, "a datagram of %zd bytes came back, %zu were sent", n,
                   size);
      conn_kill(t, c);
      return 0;
    }
    if (memcmp(c->in, c->out, size) != 0) {
      size_t at = 0;
      while (c->in[at] == c->out[at]) at++;
      t->st.mismatches++;
      report_error(c, "byte %zu came back as 0x%02x, sent 0x%02x", at,
                   c->in[at], c->out[at]);
      conn_kill(t, c);
      return 0;
    }
    c->received = size;
    return 1;
  }
}

/* --mode udp: send again the datagrams unanswered for UDP_RESEND_NS. */
static void udp_resend(struct client_thread *t, int64_t now) {
  size_t size = (size_t)opt.size;
  for (long i = 0; i < t->nconns; i++) {
    struct conn *c = &t->conns[i];
    if (c->fd < 0 || !c->busy || now - c->sent_at < UDP_RESEND_NS) continue;
    c->sent_at = now;
    c->sent = 0;
    t->st.resends++;
    (void)conn_send(t, c, size);
  }
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
  if ((re & (POLLIN | POLLHUP | POLLERR)) &&
      (opt.udp ? conn_receive_udp(t, c) : conn_receive(t, c))) {
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
    if (opt.cec) conn_park(c);
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
int epoll_setup(struct client_thread *t) {
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

void *client_main(void *arg) {
  struct client_thread *t = arg;
  uint64_t acked = UINT64_MAX;   /* the state last acknowledged */
  uint64_t started = UINT64_MAX; /* the state idle connections started in */
  int done = 0;                  /* --messages share completed */
  int64_t last_resend_check = 0; /* --mode udp */

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
        if ((c->fd >= 0 || c->parked) && !c->busy &&
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
    if (opt.udp && t->in_flight > 0) {
      int64_t now = now_ns();
      if (now - last_resend_check >= UDP_RESEND_NS / 4) {
        last_resend_check = now;
        udp_resend(t, now);
      }
    }
  }
  return NULL;
}
