/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/helpers.c - fixtures shared by the proactor suites; see
 * helpers.h.
 */
#define _GNU_SOURCE 1

#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

const char *pt_backend;

int pt_wait_ms(void) {
  const char *s = getenv("TAXI_TEST_TIMEOUT_SCALE");
  double k = 1.0;
  if (s && *s) {
    char *end;
    double v = strtod(s, &end);
    if (end != s && v >= 1.0) k = v;
  }
  return (int)(PT_WAIT_MS * k);
}

int pt_small(void) {
  const char *s = getenv("TAXI_TEST_SMALL");
  return s && *s && strcmp(s, "0") != 0;
}

int pt_backend_is(const char *name) {
  size_t n = strlen(name);
  return strncmp(pt_backend, name, n) == 0 &&
         (pt_backend[n] == '\0' || pt_backend[n] == ':');
}

const char *pt_reactor_variant(void) {
  const char *colon = strchr(pt_backend, ':');
  return colon ? colon + 1 : NULL;
}

unsigned pt_max_handles(void) {
  const char *variant = pt_reactor_variant();
  if (!variant) return 0;
  for (size_t i = 0; i < taxi_backend_count(); i++) {
    taxi_backend_info_t info;
    if (taxi_backend_info(&info, i) == 0 && info.name &&
        strcmp(info.name, variant) == 0)
      return (unsigned)info.max_handles;
  }
  return 0;
}

int pt_skip_one_thread(void) {
  if (!(util_proactor_flags & TAXI_PROACTOR_ONE_THREAD)) return 0;
  printf("(skipped: one dispatching thread per proactor in this mode) ");
  return 1;
}

taxi_proactor_t *pt_proactor(void) {
  taxi_proactor_t *p = NULL;
  int rc = util_proactor_create(&p, pt_backend);
  if (rc != 0 || !p)
    printf("\n    taxi_proactor_create(\"%s\") = %d (%s)\n", pt_backend, rc,
           taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  const char *name = taxi_proactor_backend(p);
  CU_ASSERT_PTR_NOT_NULL(name);
  /* The full name: "emulated:poll" asked for is "emulated:poll";
   * "emulated" is "emulated:" and the reactor backend it chose. */
  if (name) {
    size_t n = strlen(pt_backend);
    CU_ASSERT(
        strncmp(name, pt_backend, n) == 0 &&
        (name[n] == '\0' || (name[n] == ':' && !strchr(pt_backend, ':'))));
  }
  return p;
}

void pt_destroy(taxi_proactor_t *p) {
  int rc = taxi_proactor_destroy(p);
  if (rc != 0)
    printf("\n    taxi_proactor_destroy = %d (%s)\n", rc, taxi_error_name(rc));
  CU_ASSERT_EQUAL(rc, 0);
}

/* ---- recording completions ---------------------------------------------- */

static atomic_uint pt_seq;

unsigned pt_next_seq(void) { return atomic_fetch_add(&pt_seq, 1) + 1; }

unsigned pt_seq_now(void) { return atomic_load(&pt_seq); }

void pt_done_init(pt_done_t *d) {
  memset(d, 0, sizeof *d);
  atomic_init(&d->calls, 0);
  atomic_init(&d->more_calls, 0);
  d->handle = TAXI_INVALID_HANDLE;
  d->accepted = TAXI_INVALID_HANDLE;
}

void pt_on_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  pt_done_t *d = act;
  d->status = status;
  d->bytes = bytes;
  d->kind = op->kind;
  d->handle = op->handle;
  d->accepted = op->accepted;
  d->more = op->more;
  d->in_flight = taxi_op_in_flight(op);
  d->thread = pthread_self();
  d->seq = pt_next_seq();
  if (op->more) atomic_fetch_add(&d->more_calls, 1);
  atomic_fetch_add(&d->calls, 1);
}

/* ---- dispatching -------------------------------------------------------- */

int pt_run_until(taxi_proactor_t *p, int (*pred)(void *), void *arg,
                 int max_ms) {
  taxi_time_t start = taxi_now();
  for (;;) {
    if (pred(arg)) return 1;
    int64_t left = (int64_t)max_ms - util_elapsed_ms(start);
    if (left <= 0) return pred(arg) ? 1 : 0;
    int rc = taxi_proactor_handle_events(p, left < 50 ? (int)left : 50);
    if (rc < 0) {
      printf("\n    taxi_proactor_handle_events = %d (%s)\n", rc,
             taxi_error_name(rc));
      return rc;
    }
  }
}

typedef struct pt_goal {
  atomic_int *counter;
  int goal;
} pt_goal_t;

static int pt_goal_reached(void *arg) {
  pt_goal_t *g = arg;
  return atomic_load(g->counter) >= g->goal;
}

int pt_run_count(taxi_proactor_t *p, atomic_int *counter, int goal) {
  pt_goal_t g = {counter, goal};
  return pt_run_until(p, pt_goal_reached, &g, pt_wait_ms()) == 1;
}

int pt_run_done(taxi_proactor_t *p, pt_done_t *d, int n) {
  return pt_run_count(p, &d->calls, n);
}

int pt_settle(taxi_proactor_t *p, int ms) {
  taxi_time_t start = taxi_now();
  int sum = 0;
  for (;;) {
    int64_t left = (int64_t)ms - util_elapsed_ms(start);
    if (left <= 0) return sum;
    int rc = taxi_proactor_handle_events(p, left < 10 ? (int)left : 10);
    if (rc < 0) return rc;
    sum += rc;
  }
}

/* ---- descriptors -------------------------------------------------------- */

static void pt_attach_end(taxi_proactor_t *p, int sv[2]) {
  if (!p) return;
  int rc = taxi_proactor_attach(p, sv[0]);
  if (rc != 0)
    printf("\n    taxi_proactor_attach = %d (%s)\n", rc, taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
}

void pt_pair(taxi_proactor_t *p, int sv[2]) {
  if (util_socketpair(sv) != 0) {
    printf("\n    socketpair: %s\n", strerror(errno));
    CU_FAIL_FATAL("socketpair failed");
  }
  pt_attach_end(p, sv);
}

void pt_tcp_pair(taxi_proactor_t *p, int sv[2]) {
  if (util_tcp_pair(sv) != 0) {
    printf("\n    tcp pair: %s\n", strerror(errno));
    CU_FAIL_FATAL("tcp pair failed");
  }
  pt_attach_end(p, sv);
}

void pt_close(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* Wait until fd is ready for `events` or the time left from `start` is
 * gone; 1 when ready (or in error/hang-up), 0 on time-out. */
static int pt_poll_one(int fd, short events, taxi_time_t start) {
  for (;;) {
    int64_t left = (int64_t)pt_wait_ms() - util_elapsed_ms(start);
    if (left <= 0) return 0;
    struct pollfd pf = {fd, events, 0};
    int rc = poll(&pf, 1, left < 100 ? (int)left : 100);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return 1; /* let the caller see it */
  }
}

int pt_peer_write(int fd, const void *buf, size_t len) {
  const unsigned char *b = buf;
  taxi_time_t start = taxi_now();
  while (len > 0) {
    ssize_t n = send(fd, b, len, MSG_NOSIGNAL);
    if (n > 0) {
      b += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!pt_poll_one(fd, POLLOUT, start)) return -1;
      continue;
    }
    return -1;
  }
  return 0;
}

int pt_peer_read(int fd, void *buf, size_t len, size_t *got) {
  unsigned char *b = buf;
  size_t have = 0;
  taxi_time_t start = taxi_now();
  int rc = 0;
  while (have < len) {
    ssize_t n = read(fd, b + have, len - have);
    if (n > 0) {
      have += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!pt_poll_one(fd, POLLIN, start)) {
        rc = -1;
        break;
      }
      continue;
    }
    rc = -1; /* EOF or error */
    break;
  }
  if (got) *got = have;
  return rc;
}

long pt_peer_read_to_eof(int fd) {
  char buf[16384];
  long total = 0;
  taxi_time_t start = taxi_now();
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      total += n;
      continue;
    }
    if (n == 0) return total;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!pt_poll_one(fd, POLLIN, start)) return -1;
      continue;
    }
    if (errno == ECONNRESET) return total;
    return -1;
  }
}

void pt_close_reset(int fd) {
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
}

uint64_t pt_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void pt_fill(void *buf, size_t len, uint64_t seed) {
  unsigned char *b = buf;
  uint64_t s = seed;
  while (len >= 8) {
    uint64_t v = pt_rand(&s);
    memcpy(b, &v, 8);
    b += 8;
    len -= 8;
  }
  if (len) {
    uint64_t v = pt_rand(&s);
    memcpy(b, &v, len);
  }
}

long pt_diff(const void *a, const void *b, size_t len) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < len; i++)
    if (x[i] != y[i]) return (long)i;
  return -1;
}

int pt_temp_file(size_t size, uint64_t seed, unsigned char **content) {
#if defined(_WIN32)
  /* A file HANDLE (taxi's file type there), overlapped so that the iocp
   * backend can take it, deleted when closed. */
  char dir[MAX_PATH], path[MAX_PATH];
  if (GetTempPathA(sizeof dir, dir) == 0 ||
      GetTempFileNameA(dir, "txp", 0, path) == 0)
    CU_FAIL_FATAL("cannot name a temporary file");
  HANDLE fh =
      CreateFileA(path, GENERIC_READ | GENERIC_WRITE,
                  FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, CREATE_ALWAYS,
                  FILE_ATTRIBUTE_TEMPORARY | FILE_FLAG_DELETE_ON_CLOSE |
                      FILE_FLAG_OVERLAPPED,
                  NULL);
  if (fh == INVALID_HANDLE_VALUE) CU_FAIL_FATAL("cannot make a temporary file");
  int fd = (int)(intptr_t)fh;
#else
  const char *dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/taxi-proactor-XXXXXX",
           dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) {
    printf("\n    mkstemp(%s): %s\n", path, strerror(errno));
    CU_FAIL_FATAL("cannot make a temporary file");
  }
  unlink(path);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
  unsigned char *data = malloc(size ? size : 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(data);
  pt_fill(data, size, seed);
  size_t off = 0;
  while (off < size) {
    ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      printf("\n    pwrite: %s\n", strerror(errno));
      free(data);
      close(fd);
      CU_FAIL_FATAL("cannot write the temporary file");
    }
    off += (size_t)n;
  }
  if (content)
    *content = data;
  else
    free(data);
  return fd;
}

/* ---- threads ------------------------------------------------------------ */

void pt_thread_start(pt_thread_t *t, void (*fn)(void *), void *arg) {
  CU_ASSERT_FATAL(util_thread_start(t, fn, arg) == 0);
}

void pt_thread_join(pt_thread_t *t, int factor, const char *what) {
  util_thread_join(t, pt_wait_ms() * (factor > 0 ? factor : 1), what);
}

int pt_bounded(int (*fn)(void *), void *arg, const char *what) {
  return util_bounded(fn, arg, pt_wait_ms(), what);
}

void pt_sleep_ms(long ms) { util_sleep_ms(ms); }
