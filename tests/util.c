/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/util.c - helpers for taxi's tests; see util.h.
 */
#define _GNU_SOURCE 1

#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
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

#if !defined(_WIN32)
#include <spawn.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#endif

int util_reactor_create(taxi_reactor_t **out, const char *backend) {
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  o.backend = backend;
  return taxi_reactor_create(out, &o);
}

unsigned util_proactor_flags;

int util_proactor_create(taxi_proactor_t **out, const char *backend) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = backend;
  o.flags = util_proactor_flags;
  return taxi_proactor_create(out, &o);
}

int util_set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  return 0;
}

static int set_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFD);
  if (fl < 0) return -1;
  return fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0 ? -1 : 0;
}

#if defined(_WIN32)
/* Windows has no socketpair(): a loopback TCP pair serves, both ends
 * non-blocking. */
int util_socketpair(int sv[2]) { return util_tcp_pair(sv); }
#else
int util_socketpair(int sv[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    if (util_set_nonblock(sv[i]) != 0 || set_cloexec(sv[i]) != 0) {
      int e = errno;
      close(sv[0]);
      close(sv[1]);
      errno = e;
      return -1;
    }
  }
  return 0;
}
#endif

static struct sockaddr_in loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

int util_tcp_listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int one = 1;
  struct sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
      util_set_nonblock(fd) != 0 || set_cloexec(fd) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  if (port) *port = ntohs(a.sin_port);
  return fd;
}

int util_tcp_connect_nb(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (util_set_nonblock(fd) != 0 || set_cloexec(fd) != 0) goto fail;
  struct sockaddr_in a = loopback(port);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS)
    goto fail;
  return fd;
fail:;
  int e = errno;
  close(fd);
  errno = e;
  return -1;
}

int util_tcp_pair(int fds[2]) {
  int port = 0;
  int lfd = util_tcp_listener(&port);
  if (lfd < 0) return -1;
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0) goto fail_l;
  struct sockaddr_in a = loopback(port);
  /* Blocking connect: over loopback it completes at once. */
  if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) goto fail_c;
  /* The connection accepted must be c's: another process that connects to
   * a port it believes closed (a test of refused connections) may reach
   * this listener, which took the port meanwhile.  Such a stranger is
   * closed and the accept goes on. */
  struct sockaddr_in mine;
  socklen_t mine_len = sizeof mine;
  if (getsockname(c, (struct sockaddr *)&mine, &mine_len) != 0) goto fail_c;
  int s = -1;
  for (int i = 0; i < 2000 && s < 0; i++) {
    struct sockaddr_in peer;
    socklen_t peer_len = sizeof peer;
    s = accept(lfd, (struct sockaddr *)&peer, &peer_len);
    if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      goto fail_c;
    if (s >= 0 && (peer.sin_port != mine.sin_port ||
                   peer.sin_addr.s_addr != mine.sin_addr.s_addr)) {
      close(s);
      s = -1;
      continue;
    }
    if (s < 0) util_sleep_ms(1);
  }
  if (s < 0) goto fail_c;
  if (util_set_nonblock(s) != 0 || util_set_nonblock(c) != 0 ||
      set_cloexec(s) != 0 || set_cloexec(c) != 0) {
    close(s);
    goto fail_c;
  }
  close(lfd);
  fds[0] = s;
  fds[1] = c;
  return 0;
fail_c:;
  int e = errno;
  close(c);
  errno = e;
fail_l:
  e = errno;
  close(lfd);
  errno = e;
  return -1;
}

long util_write_byte(int fd) {
  char c = 'x';
  ssize_t n;
  do n = write(fd, &c, 1);
  while (n < 0 && errno == EINTR);
  return (long)n;
}

long util_read_byte(int fd) {
  char c;
  ssize_t n;
  do n = read(fd, &c, 1);
  while (n < 0 && errno == EINTR);
  return (long)n;
}

long util_drain(int fd) {
  char buf[4096];
  long total = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      total += n;
      continue;
    }
    if (n == 0) return total;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return total;
    return -1;
  }
}

/* ---- the counting allocator -------------------------------------------- */

static atomic_ullong n_mallocs, n_reallocs, n_frees, n_failed;
static atomic_llong n_live, n_live_here;
static atomic_long fail_countdown = -1;
/* Set by util_alloc_fail_after_here: only the arming thread counts down. */
static atomic_int fail_one_thread;
static _Thread_local int fail_armed_here;

/* 1 when this allocation must fail. */
static int should_fail(void) {
  if (atomic_load(&fail_one_thread) && !fail_armed_here) return 0;
  long v = atomic_load(&fail_countdown);
  while (v >= 0) {
    if (v == 0) return 1;
    if (atomic_compare_exchange_weak(&fail_countdown, &v, v - 1)) return 0;
  }
  return 0;
}

/* Every block carries a header saying whether an armed thread allocated
 * it (live_here); max_align_t keeps the caller's pointer aligned. */
typedef union block_head {
  int here;
  max_align_t align;
} block_head_t;

/* A new block, tagged with the calling thread's arming; NULL when the
 * failure countdown says so. */
static void *new_block(size_t size) {
  if (should_fail() || size > SIZE_MAX - sizeof(block_head_t)) {
    atomic_fetch_add(&n_failed, 1);
    return NULL;
  }
  block_head_t *h = malloc(sizeof *h + size);
  if (!h) return NULL;
  h->here = fail_armed_here;
  atomic_fetch_add(&n_live, 1);
  if (h->here) atomic_fetch_add(&n_live_here, 1);
  return h + 1;
}

static void *count_malloc(size_t size) {
  atomic_fetch_add(&n_mallocs, 1);
  return new_block(size);
}

static void *count_realloc(void *ptr, size_t size) {
  atomic_fetch_add(&n_reallocs, 1);
  if (!ptr) return new_block(size);
  if (should_fail() || size > SIZE_MAX - sizeof(block_head_t)) {
    atomic_fetch_add(&n_failed, 1);
    return NULL;
  }
  block_head_t *h = realloc((block_head_t *)ptr - 1, sizeof *h + size);
  return h ? h + 1 : NULL;
}

static void count_free(void *ptr) {
  if (!ptr) return;
  block_head_t *h = (block_head_t *)ptr - 1;
  atomic_fetch_add(&n_frees, 1);
  atomic_fetch_sub(&n_live, 1);
  if (h->here) atomic_fetch_sub(&n_live_here, 1);
  free(h);
}

/* TAXI_EBUSY while a resolver thread of an earlier test's context still
 * ends its lookup: wait for it (bounded). */
int util_set_allocator(taxi_malloc_fn m, taxi_realloc_fn r, taxi_free_fn f) {
  int rc;
  for (int i = 0; (rc = taxi_set_allocator(m, r, f)) == TAXI_EBUSY && i < 1000;
       i++)
    util_sleep_ms(10);
  return rc;
}

int util_alloc_install(void) {
  return util_set_allocator(count_malloc, count_realloc, count_free);
}

int util_alloc_uninstall(void) { return util_set_allocator(NULL, NULL, NULL); }

util_alloc_counts_t util_alloc_counts(void) {
  util_alloc_counts_t c;
  c.mallocs = atomic_load(&n_mallocs);
  c.reallocs = atomic_load(&n_reallocs);
  c.frees = atomic_load(&n_frees);
  c.live = atomic_load(&n_live);
  c.live_here = atomic_load(&n_live_here);
  c.failed = atomic_load(&n_failed);
  return c;
}

void util_alloc_reset(void) {
  atomic_store(&n_mallocs, 0);
  atomic_store(&n_reallocs, 0);
  atomic_store(&n_frees, 0);
  atomic_store(&n_live, 0);
  atomic_store(&n_live_here, 0);
  atomic_store(&n_failed, 0);
}

void util_alloc_fail_after(long n) {
  atomic_store(&fail_one_thread, 0);
  fail_armed_here = 0;
  atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

void util_alloc_fail_after_here(long n) {
  fail_armed_here = n >= 0;
  atomic_store(&fail_one_thread, n >= 0);
  atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

/* ---- resources ---------------------------------------------------------- */

#if defined(_WIN32)
/* Windows sets no per-process limit on sockets below what memory allows. */
int util_raise_nofile(unsigned long n) {
  (void)n;
  return 1;
}
#else
int util_raise_nofile(unsigned long n) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= n) return 1;
  if (rl.rlim_cur == RLIM_INFINITY) return 1;
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= n) {
    rl.rlim_cur = (rl.rlim_max == RLIM_INFINITY) ? n : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) return 1;
    rl.rlim_cur = n;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
  }
  /* The hard limit is too low: only a privileged process may raise it. */
  rl.rlim_cur = n;
  rl.rlim_max = n;
  return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}
#endif

int util_test_small(void) {
  const char *s = getenv("TAXI_TEST_SMALL");
  return s && *s && strcmp(s, "0") != 0;
}

int util_under_wine(void) {
#if defined(_WIN32)
  HMODULE ntdll = GetModuleHandleA("ntdll.dll");
  return ntdll && GetProcAddress(ntdll, "wine_get_version") != NULL;
#else
  return 0;
#endif
}

void util_sleep_ms(long ms) {
#if defined(_WIN32)
  Sleep((DWORD)ms);
#else
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
#endif
}

int util_wait_flag(atomic_int *flag, int value, int max_ms) {
  taxi_time_t start = taxi_now();
  while (atomic_load(flag) < value) {
    if (util_elapsed_ms(start) > max_ms) return atomic_load(flag) >= value;
    util_sleep_ms(1);
  }
  return 1;
}

int64_t util_elapsed_ms(taxi_time_t start) {
  return (int64_t)((taxi_now() - start) / TAXI_NSEC_PER_MSEC);
}

int run_until(taxi_reactor_t *r, int (*pred)(void *), void *arg, int max_ms) {
  taxi_time_t start = taxi_now();
  for (;;) {
    if (pred(arg)) return 1;
    int64_t left = (int64_t)max_ms - util_elapsed_ms(start);
    if (left <= 0) return pred(arg) ? 1 : 0;
    int rc = taxi_reactor_handle_events(r, left < 50 ? (int)left : 50);
    if (rc < 0) return rc;
  }
}

int run_for(taxi_reactor_t *r, int ms) {
  taxi_time_t start = taxi_now();
  int sum = 0;
  for (;;) {
    int64_t left = (int64_t)ms - util_elapsed_ms(start);
    if (left <= 0) return sum;
    int rc = taxi_reactor_handle_events(r, left < 50 ? (int)left : 50);
    if (rc < 0) return rc;
    sum += rc;
  }
}

#if defined(_WIN32)
/* No child processes of this kind on Windows (no fork). */
int util_wait_child(int pid, int max_ms) {
  (void)pid;
  (void)max_ms;
  return -1;
}
#else
int util_wait_child(int pid, int max_ms) {
  taxi_time_t start = taxi_now();
  for (;;) {
    int status = 0;
    pid_t w = waitpid((pid_t)pid, &status, WNOHANG);
    if (w == (pid_t)pid) return status;
    if (w < 0 && errno != EINTR) return -1;
    if (util_elapsed_ms(start) > max_ms) {
      kill((pid_t)pid, SIGKILL);
      while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    util_sleep_ms(2);
  }
}
#endif

/* ---- test threads ------------------------------------------------------- */

static void *util_thread_main(void *arg) {
  util_thread_t *t = arg;
  t->fn(t->arg);
  atomic_store(&t->done, 1);
  return NULL;
}

int util_thread_start(util_thread_t *t, void (*fn)(void *), void *arg) {
  t->fn = fn;
  t->arg = arg;
  atomic_init(&t->done, 0);
  t->started = pthread_create(&t->tid, NULL, util_thread_main, t) == 0;
  return t->started ? 0 : -1;
}

int util_thread_done(util_thread_t *t) { return atomic_load(&t->done); }

#if !defined(_WIN32)
void util_print_stacks(long pid) {
  const char *want = getenv("TAXI_TEST_STACKS");
  if (want && strcmp(want, "0") == 0) return;
  char arg[24];
  snprintf(arg, sizeof arg, "%ld", pid);
  char *argv[] = {
      "gdb", "-batch", "-nx", "-p", arg, "-ex", "thread apply all bt", NULL};
  /* gdb without the fault-injection module and its rules, which a test
   * under fault injection would otherwise pass on to it. */
  char *env[256];
  size_t n = 0;
  for (char **e = environ; *e && n + 1 < sizeof env / sizeof env[0]; e++)
    if (strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
        strncmp(*e, "TAXI_FAULT", 10) != 0)
      env[n++] = *e;
  env[n] = NULL;
  pid_t child;
  fflush(stdout);
  fflush(stderr);
  /* Spawned, not forked: a hung thread may hold a lock (of the allocator,
   * of a sanitizer's runtime) that a forked child would wait for. */
  if (posix_spawnp(&child, "gdb", NULL, NULL, argv, env) != 0) {
    printf("    (no stacks: gdb could not be started)\n");
    fflush(stdout);
    return;
  }
#if defined(PR_SET_PTRACER)
  /* Where Yama lets only ancestors trace, this process lets gdb. */
  if (pid == (long)getpid())
    prctl(PR_SET_PTRACER, (unsigned long)child, 0, 0, 0);
#endif
  if (util_wait_child((int)child, 60000) != 0)
    printf("    (gdb did not print every stack)\n");
  fflush(stdout);
}

void util_allow_stack_printing(void) {
#if defined(PR_SET_PTRACER) && defined(PR_SET_PTRACER_ANY)
  /* EINVAL without Yama, where nothing needs allowing. */
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
}
#endif

void util_hang(const char *what) {
  printf(
      "\n    HANG: %s did not finish within the test's bound; ending the "
      "suite's process\n",
      what);
#if !defined(_WIN32)
  util_print_stacks((long)getpid());
#endif
  fflush(stdout);
  _exit(3);
}

void util_thread_join(util_thread_t *t, int max_ms, const char *what) {
  if (!t->started) return;
  if (!util_wait_flag(&t->done, 1, max_ms)) util_hang(what);
  pthread_join(t->tid, NULL);
  t->started = 0;
}

typedef struct util_call {
  int (*fn)(void *arg);
  void *arg;
  int rc;
} util_call_t;

static void util_call_run(void *arg) {
  util_call_t *c = arg;
  c->rc = c->fn(c->arg);
}

int util_bounded(int (*fn)(void *arg), void *arg, int max_ms,
                 const char *what) {
  util_call_t c = {fn, arg, 0};
  util_thread_t t;
  if (util_thread_start(&t, util_call_run, &c) != 0) return fn(arg);
  util_thread_join(&t, max_ms, what);
  return c.rc;
}

#if !defined(_WIN32)
void util_signal_handle(int signo, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(signo, &sa, NULL);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, signo);
  pthread_sigmask(SIG_UNBLOCK, &m, NULL);
}

void util_signal_default(int signo) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, NULL);
}

static void *signaller_main(void *arg) {
  util_signaller_t *s = arg;
  for (int ms = 0; !atomic_load(&s->done); ms += 20) {
    if (ms > s->max_ms) {
      atomic_store(&s->gave_up, 1);
      s->give_up(s->arg);
      break;
    }
    pthread_kill(s->target, s->signo);
    atomic_fetch_add(&s->sent, 1);
    util_sleep_ms(20);
  }
  return NULL;
}

int util_signaller_start(util_signaller_t *s, int signo, int max_ms,
                         void (*give_up)(void *arg), void *arg) {
  s->target = pthread_self();
  s->signo = signo;
  s->max_ms = max_ms;
  s->give_up = give_up;
  s->arg = arg;
  atomic_init(&s->done, 0);
  atomic_init(&s->sent, 0);
  atomic_init(&s->gave_up, 0);
  return pthread_create(&s->thread, NULL, signaller_main, s) == 0 ? 0 : -1;
}

void util_signaller_finish(util_signaller_t *s) {
  atomic_store(&s->done, 1);
  pthread_join(s->thread, NULL);
}
#endif
