/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen_connect.c - the load generator's connections: the descriptor
 * limit, and opening them in batches the server has accepted (see
 * open_connections()).
 */
#include "loadgen.h"

/* Make room for `want` descriptors: raise the soft limit, up to the hard
 * one, if it is lower.  Returns -1 with a message if that is not enough. */
int raise_fd_limit(long want) {
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
int open_connections(const struct addrinfo *ai, struct conn *conns) {
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
