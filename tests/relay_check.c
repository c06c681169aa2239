/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/relay_check.c - the relay example (examples/relay) checked where a
 * load of echo clients cannot look, for tests/relay.sh:
 *
 *   relay_check RELAY DISPATCHER [BACKEND]
 *
 * It runs an upstream server of its own, starts RELAY in front of it (with
 * --stats 5, its output read here), and as a client of the relay checks:
 *
 *   - a slow reader: it asks the upstream for a big transfer and reads
 *     nothing until the relay reports that it stopped reading the
 *     upstream for lack of room (pauses >= 1); the bytes the relay held
 *     then, from its streams' counters, are within its bound (the
 *     destination's high watermark and one read buffer).  Then it reads
 *     every byte, checked, and the end of the stream: the upstream's
 *     half-close passed on;
 *   - half-close the other way: it sends a message and shuts its sending
 *     down; the upstream reads every byte and the end, then answers with
 *     the count, which must come back through the relay, then the end;
 *   - the relay stops cleanly on SIGTERM, its last line saying that the
 *     most it held stayed within the bound.
 *
 * It prints "ok: ..." and "FAIL: ..." lines, and exits 0 when every check
 * passed, 1 otherwise, 77 when the relay refuses the dispatcher here (its
 * exit status 3).  Every wait is bounded (TAXI_TEST_TIMEOUT_SCALE scales
 * the bounds).  Plain sockets and threads: it needs nothing of taxi.
 */
#define _GNU_SOURCE 1

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net_helpers.h"

static int scale = 1;
static int failures, passes;

static void ok(const char *what) {
  printf("ok: %s\n", what);
  passes++;
}

static void bad(const char *what) {
  printf("FAIL: %s\n", what);
  failures++;
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The byte at position i of the sequence `seed`. */
static unsigned char seq(unsigned seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (unsigned char)(x >> 56);
}

/* A blocking connection to 127.0.0.1:port, with a receive buffer of
 * rcvbuf bytes if not 0, and 10 s (scaled) send and receive timeouts. */
static int connect_to(int port, int rcvbuf) {
  return net_connect_loopback(port, rcvbuf, 10 * scale, 0);
}

static void put64(unsigned char *b, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) b[i] = (unsigned char)v;
}

static uint64_t get64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | b[i];
  return v;
}

/* ---- the upstream server ------------------------------------------------
 *
 * A connection's first byte says what to do:
 *   'B' N (8 bytes): send N bytes of sequence 77, shut the sending down,
 *       read to the end, close;
 *   'H': read to the end, checking sequence 88, then answer with the count
 *       (8 bytes) and 0 if every byte was right, else 1; close.
 */

static void *upstream_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  unsigned char op, buf[65536];
  if (net_recv_all(fd, &op, 1) == 0 && op == 'B' &&
      net_recv_all(fd, buf, 8) == 0) {
    uint64_t n = get64(buf), sent = 0;
    while (sent < n) {
      size_t k = n - sent < sizeof buf ? (size_t)(n - sent) : sizeof buf;
      for (size_t i = 0; i < k; i++) buf[i] = seq(77, sent + i);
      if (net_send_all(fd, buf, k) < 0) break;
      sent += k;
    }
    shutdown(fd, SHUT_WR);
    while (recv(fd, buf, sizeof buf, 0) > 0) {
    }
  } else if (op == 'H') {
    uint64_t got = 0;
    unsigned char wrong = 0, reply[9];
    for (;;) {
      ssize_t k = recv(fd, buf, sizeof buf, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        wrong |= k < 0; /* a timeout or an error: not the end */
        break;
      }
      for (ssize_t i = 0; i < k; i++)
        if (buf[i] != seq(88, got + (uint64_t)i)) wrong = 1;
      got += (uint64_t)k;
    }
    put64(reply, got);
    reply[8] = wrong;
    net_send_all(fd, reply, sizeof reply);
  }
  close(fd);
  return NULL;
}

static void *upstream_main(void *arg) {
  int l = (int)(intptr_t)arg;
  for (;;) {
    int fd = accept(l, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return NULL; /* the listener was shut down: done */
    }
    struct timeval tv = {30 * scale, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    pthread_t t;
    if (pthread_create(&t, NULL, upstream_conn, (void *)(intptr_t)fd) == 0)
      pthread_detach(t);
    else
      close(fd);
  }
}

/* ---- the relay's output -------------------------------------------------- */

static atomic_int relay_port, stats_lines, stopped_line;
static atomic_ullong st_held, st_most, st_bound, st_pauses, final_most;
static char last_lines[8][256];
static atomic_int nlines;

static void *relay_output(void *arg) {
  FILE *in = fdopen((int)(intptr_t)arg, "r");
  char line[512];
  while (in && fgets(line, sizeof line, in)) {
    unsigned long long h, m, b, p, pairs;
    const char *at = strstr(line, "listening on ");
    const char *colon = at ? strrchr(at, ':') : NULL;
    if (colon && atomic_load(&relay_port) == 0)
      atomic_store(&relay_port, atoi(colon + 1));
    if (sscanf(line,
               "relay: stats: pairs=%llu held=%llu most=%llu bound=%llu "
               "pauses=%llu",
               &pairs, &h, &m, &b, &p) == 5) {
      atomic_store(&st_held, h);
      atomic_store(&st_most, m);
      atomic_store(&st_bound, b);
      atomic_store(&st_pauses, p);
      atomic_fetch_add(&stats_lines, 1);
      continue;
    }
    at = strstr(line, "most held ");
    if (strncmp(line, "relay: stopped after", 20) == 0 && at) {
      atomic_store(&final_most, strtoull(at + 10, NULL, 10));
      atomic_store(&stopped_line, 1);
    }
    int i = atomic_fetch_add(&nlines, 1) % 8;
    size_t n = strlen(line);
    if (n >= sizeof last_lines[i]) n = sizeof last_lines[i] - 1;
    memcpy(last_lines[i], line, n);
    last_lines[i][n] = '\0';
  }
  if (in) fclose(in);
  return NULL;
}

static void print_relay_lines(void) {
  int n = atomic_load(&nlines);
  for (int i = n > 8 ? n - 8 : 0; i < n; i++)
    printf("  relay said: %s", last_lines[i % 8]);
}

/* Wait (at most ms) for *flag to reach at least v. */
static int wait_at_least(atomic_ullong *flag, unsigned long long v, int ms) {
  int64_t end = now_ms() + ms;
  while (atomic_load(flag) < v) {
    if (now_ms() > end) return 0;
    usleep(1000);
  }
  return 1;
}

/* ---- the checks ---------------------------------------------------------- */

static void check_slow_reader(int port, uint64_t total) {
  char what[256];
  int fd = connect_to(port, 4096);
  if (fd < 0) {
    bad("slow reader: cannot connect to the relay");
    return;
  }
  unsigned char req[9] = {'B'};
  put64(req + 1, total);
  if (net_send_all(fd, req, sizeof req) < 0) {
    bad("slow reader: cannot send its request");
    close(fd);
    return;
  }
  /* Read nothing until the relay says it stopped reading the upstream:
   * the client's receive buffer and the relay's socket full, its
   * stream's output buffer full, the upstream held back. */
  if (!wait_at_least(&st_pauses, 1, 20000 * scale)) {
    bad("slow reader: the relay never stopped reading the upstream");
  } else {
    unsigned long long held = atomic_load(&st_held),
                       bound = atomic_load(&st_bound);
    snprintf(what, sizeof what,
             "slow reader: the relay stopped reading the upstream, holding "
             "%llu bytes (bound %llu)",
             held, bound);
    if (bound > 0 && held <= bound)
      ok(what);
    else
      bad(what);
  }
  /* Now every byte, then the end of the stream (the upstream shut its
   * sending down after the last). */
  unsigned char buf[65536];
  uint64_t got = 0;
  int wrong = 0, eof = 0;
  while (!wrong) {
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      eof = k == 0;
      break;
    }
    for (ssize_t i = 0; i < k; i++)
      if (buf[i] != seq(77, got + (uint64_t)i)) {
        wrong = 1;
        break;
      }
    got += (uint64_t)k;
  }
  snprintf(what, sizeof what,
           "slow reader: %llu of %llu bytes, every one right, then the end "
           "of the stream",
           (unsigned long long)got, (unsigned long long)total);
  if (!wrong && eof && got == total)
    ok(what);
  else
    bad(what);
  close(fd);
}

static void check_half_close(int port, uint64_t total) {
  char what[256];
  int fd = connect_to(port, 0);
  if (fd < 0) {
    bad("half-close: cannot connect to the relay");
    return;
  }
  unsigned char buf[65536];
  buf[0] = 'H';
  int rc = net_send_all(fd, buf, 1);
  for (uint64_t sent = 0; rc == 0 && sent < total;) {
    size_t k = total - sent < sizeof buf ? (size_t)(total - sent) : sizeof buf;
    for (size_t i = 0; i < k; i++) buf[i] = seq(88, sent + i);
    rc = net_send_all(fd, buf, k);
    sent += k;
  }
  /* The end of our sending: the relay must pass it on, and the answer,
   * sent by the upstream only after it, must still come back. */
  shutdown(fd, SHUT_WR);
  unsigned char reply[9];
  int got = rc == 0 && net_recv_all(fd, reply, sizeof reply) == 0;
  ssize_t more = got ? recv(fd, buf, 1, 0) : -1;
  snprintf(what, sizeof what,
           "half-close: the upstream read %llu bytes (every one right) and "
           "the end, and its answer came back, then the end",
           got ? (unsigned long long)get64(reply) : 0ull);
  if (got && get64(reply) == total && reply[8] == 0 && more == 0)
    ok(what);
  else
    bad(what);
  close(fd);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: relay_check RELAY DISPATCHER [BACKEND]\n");
    return 2;
  }
  const char *env = getenv("TAXI_TEST_TIMEOUT_SCALE");
  if (env && atoi(env) > 0) scale = atoi(env);
  env = getenv("TAXI_TEST_SMALL");
  int small = env && *env && strcmp(env, "0") != 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);

  /* The upstream. */
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(l, 64) != 0 || getsockname(l, (struct sockaddr *)&a, &alen)) {
    perror("relay_check: upstream");
    return 1;
  }
  pthread_t up;
  if (pthread_create(&up, NULL, upstream_main, (void *)(intptr_t)l) != 0) {
    perror("relay_check: thread");
    return 1;
  }

  /* The relay, its output read by a thread of ours. */
  char upstream[64];
  snprintf(upstream, sizeof upstream, "127.0.0.1:%u", ntohs(a.sin_port));
  const char *args[16] = {argv[1],      "--port",  "0",
                          "--upstream", upstream,  "--dispatcher",
                          argv[2],      "--stats", "5"};
  int na = 9;
  if (argc > 3) {
    args[na++] = "--backend";
    args[na++] = argv[3];
  }
  args[na] = NULL;
  int out[2];
  if (pipe(out) != 0) return 1;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execv(args[0], (char *const *)args);
    _exit(127);
  }
  close(out[1]);
  pthread_t reader;
  pthread_create(&reader, NULL, relay_output, (void *)(intptr_t)out[0]);
  int64_t end = now_ms() + 10000 * scale;
  int status = 0, exited = 0;
  while (atomic_load(&relay_port) == 0 && now_ms() < end && !exited) {
    if (waitpid(pid, &status, WNOHANG) == pid) exited = 1;
    usleep(1000);
  }
  if (atomic_load(&relay_port) == 0) {
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    pthread_join(reader, NULL);
    if (exited && WIFEXITED(status) && WEXITSTATUS(status) == 3) {
      printf("relay_check: SKIP: the relay refuses --dispatcher %s here\n",
             argv[2]);
      return 77;
    }
    bad("the relay did not start");
    print_relay_lines();
    return 1;
  }
  int port = atomic_load(&relay_port);

  check_slow_reader(port, (small ? 16 : 32) << 20);
  check_half_close(port, 1 << 20);

  /* The stop: SIGTERM, exit status 0, the closing line. */
  kill(pid, SIGTERM);
  end = now_ms() + 10000 * scale;
  exited = 0;
  while (now_ms() < end && !(exited = waitpid(pid, &status, WNOHANG) == pid))
    usleep(1000);
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  pthread_join(reader, NULL);
  shutdown(l, SHUT_RDWR); /* ends the upstream's accept */
  pthread_join(up, NULL);
  close(l);
  char what[256];
  snprintf(what, sizeof what,
           "the relay stopped on SIGTERM with status 0, having held at most "
           "%llu bytes for a direction (bound %llu)",
           atomic_load(&final_most), atomic_load(&st_bound));
  if (exited && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      atomic_load(&stopped_line) &&
      atomic_load(&final_most) <= atomic_load(&st_bound))
    ok(what);
  else
    bad(what);
  if (failures) print_relay_lines();
  printf("%d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
