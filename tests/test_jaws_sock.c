/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_jaws_sock.c - the JAWS example's blocking socket calls
 * (examples/jaws/jaws_os.h), which its thread strategies are built on:
 * accepts on a plain and on a prepared listener (with and without a
 * connection waiting; with a wait the kernel rounds, the connections still
 * inherit the listener's options), the accept queue's length, receives
 * that do not wait, the gathered send of a head and a body, the send of a
 * file's range (its head, its bytes, and ranges past the end), and closed or
 * invalid handles, and the sends that never wait (a client that does not
 * read: what fits goes, the rest is left, in order, from memory and from
 * a file).  The client side is echo_common.c's loopback sockets,
 * read in a thread of their own so that a send bigger than the loopback
 * buffers cannot block the test.
 *
 * On Windows too, over jaws_os_win32.c.  What is system-specific
 * is asserted per system: jaws_sock_accept_waits prepares a listener only
 * on Linux (elsewhere it says 0 and the accept is polled for), and
 * jaws_sock_backlog counts the queue only on Linux (elsewhere it says 0).
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <fcntl.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#endif

#include "examples/echo_common.h"
#include "examples/jaws/jaws_os.h"
#include "runner.h"

/* Sends give up after this long: a test whose reader failed ends instead
 * of blocking. */
#define SEND_TIMEOUT_MS 10000u
/* The longest any wait of the test lasts (connections, reads). */
#define BOUND_MS 10000
/* A receive timeout longer than any suite's time limit, even scaled: a
 * receive that waited for it would be reported as a hang. */
#define NEVER_MS (60 * 60 * 1000)

static const char *const loopback = "127.0.0.1";

/* ---- helpers -------------------------------------------------------- */

static taxi_handle_t listener(unsigned *port) {
  taxi_handle_t l = TAXI_INVALID_HANDLE;
  char bound[64];
  CU_ASSERT_EQUAL_FATAL(echo_listen(loopback, 0, &l, bound, sizeof bound, port),
                        0);
  CU_ASSERT_FATAL(*port > 0);
  return l;
}

/* Accept one connection from l, which has one waiting (or about to): a
 * prepared listener's accept waits itself, a plain one's is polled for. */
static int accept_one(taxi_handle_t l, bool prepared, taxi_handle_t *s,
                      char *peer, size_t cap, int wait_ms) {
  if (!prepared && jaws_sock_wait(l, BOUND_MS) != 1) return -1;
  return jaws_sock_accept(l, prepared, s, peer, cap, SEND_TIMEOUT_MS, wait_ms);
}

/* A client connected to l's port and the server's socket for it. */
static void connect_pair(taxi_handle_t l, unsigned port, taxi_handle_t *s,
                         taxi_handle_t *c, int wait_ms) {
  char peer[64];
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, c), 0);
  CU_ASSERT_EQUAL_FATAL(accept_one(l, false, s, peer, sizeof peer, wait_ms), 1);
}

/* A client reading until the end of the stream (or cap bytes, or
 * BOUND_MS), in a thread: no CUnit assertions in here. */
struct reader {
  taxi_handle_t c;
  unsigned char *buf;
  size_t cap, got;
  bool eof;
  pthread_t thread;
};

static void *read_all(void *arg) {
  struct reader *r = arg;
  int64_t end = jaws_now_ms() + BOUND_MS;
  while (r->got < r->cap && jaws_now_ms() < end) {
    size_t n = 0;
    if (jaws_sock_wait(r->c, 100) < 0) break;
    echo_io_t io = echo_recv(r->c, r->buf + r->got, r->cap - r->got, &n);
    if (io == ECHO_IO_OK) {
      r->got += n;
    } else if (io != ECHO_IO_AGAIN) {
      r->eof = io == ECHO_IO_EOF;
      break;
    }
  }
  return NULL;
}

/* Start reading from c up to cap bytes (one more than expected shows
 * extra bytes). */
static void start_reader(struct reader *r, taxi_handle_t c, size_t cap) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->cap = cap;
  r->buf = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->buf);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&r->thread, NULL, read_all, r), 0);
}

/* Close the server's side s (the end of the stream the reader waits for)
 * and wait for the reader. */
static void finish_reader(struct reader *r, taxi_handle_t s) {
  echo_close(s);
  pthread_join(r->thread, NULL);
  CU_ASSERT(r->eof);
  echo_close(r->c);
}

/* Bytes no offset error can reproduce: 251 is prime, so a shift by a
 * multiple of 256 (or most other amounts) shows. */
static unsigned char pattern(size_t i) { return (unsigned char)(i % 251); }

static bool is_pattern(const unsigned char *p, size_t len, size_t from) {
  for (size_t i = 0; i < len; i++)
    if (p[i] != pattern(from + i)) return false;
  return true;
}

/* ---- accepts -------------------------------------------------------- */

/* s is client c's connection: a byte sent on s reaches c. */
static void check_pair(taxi_handle_t s, taxi_handle_t c, char byte) {
  char buf[8];
  size_t n = 0;
  CU_ASSERT_EQUAL(jaws_sock_send(s, &byte, 1), 0);
  CU_ASSERT_EQUAL(jaws_sock_wait(c, BOUND_MS), 1);
  CU_ASSERT_EQUAL(echo_recv(c, buf, sizeof buf, &n), ECHO_IO_OK);
  CU_ASSERT(n == 1 && buf[0] == byte);
}

static void test_accept(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), s = TAXI_INVALID_HANDLE, c, c2;
  char peer[64] = "";
  int prepared;

  /* A plain (non-blocking) listener, polled for. */
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c), 0);
  CU_ASSERT_EQUAL(accept_one(l, false, &s, peer, sizeof peer, BOUND_MS), 1);
  CU_ASSERT_STRING_EQUAL(peer, "127.0.0.1");
  CU_ASSERT_NOT_EQUAL(s, TAXI_INVALID_HANDLE);
  check_pair(s, c, 'x');
  echo_close(s);
  echo_close(c);

  /* Nothing waiting: none accepted, the wait being the listener's own
   * (Linux) or the poll's. */
  prepared = jaws_sock_accept_waits(l, SEND_TIMEOUT_MS, 20);
#if defined(__linux__)
  CU_ASSERT_EQUAL(prepared, 1);
#else
  CU_ASSERT_EQUAL(prepared, 0);
#endif
  if (!prepared) CU_ASSERT_EQUAL(jaws_sock_wait(l, 20), 0);
  s = TAXI_INVALID_HANDLE;
  CU_ASSERT_EQUAL(jaws_sock_accept(l, prepared == 1, &s, peer, sizeof peer,
                                   SEND_TIMEOUT_MS, 20),
                  0);
  CU_ASSERT_EQUAL(s, TAXI_INVALID_HANDLE);

  /* One waiting: accepted from the prepared listener. */
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c2), 0);
  strcpy(peer, "");
  CU_ASSERT_EQUAL(accept_one(l, prepared == 1, &s, peer, sizeof peer, 20), 1);
  CU_ASSERT_STRING_EQUAL(peer, "127.0.0.1");
  check_pair(s, c2, 'y');
  echo_close(s);
  echo_close(c2);
  echo_close(l);
}

#if defined(__linux__)
/* The socket's send timeout as the kernel reads it back, in ms. */
static long send_timeout_of(taxi_handle_t s) {
  struct timeval tv;
  socklen_t len = sizeof tv;
  if (getsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0) return -1;
  return (long)tv.tv_sec * 1000 + (long)tv.tv_usec / 1000;
}
#endif

/* A prepared listener whose wait the kernel keeps rounded to its clock
 * tick (5 ms): its connections still start with its options, and the
 * accept does not set them again.  Shown by asking the accept for another
 * send timeout than the listener's: the socket keeps the listener's.  The
 * first accept of the process (its suite's own), as the answer is kept. */
static void test_inherit(void) {
#if defined(__linux__)
  unsigned port;
  taxi_handle_t l = listener(&port), s = TAXI_INVALID_HANDLE, c;
  char peer[64];
  CU_ASSERT_EQUAL_FATAL(jaws_sock_accept_waits(l, 3000, 5), 1);
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c), 0);
  CU_ASSERT_EQUAL(accept_one(l, true, &s, peer, sizeof peer, 5), 1);
  CU_ASSERT_EQUAL(send_timeout_of(s), send_timeout_of(l));
  CU_ASSERT_NOT_EQUAL(send_timeout_of(s), (long)SEND_TIMEOUT_MS);
  check_pair(s, c, 'z');
  echo_close(s);
  echo_close(c);
  echo_close(l);
#endif
}

#if defined(__linux__)
/* Poll the backlog for up to BOUND_MS until it is `want`; what it was. */
static unsigned backlog_reaches(taxi_handle_t l, unsigned want) {
  unsigned n = jaws_sock_backlog(l);
  for (int64_t end = jaws_now_ms() + BOUND_MS; n != want && jaws_now_ms() < end;
       n = jaws_sock_backlog(l))
    jaws_sock_wait(TAXI_INVALID_HANDLE, 10); /* a nap */
  return n;
}
#endif

static void test_backlog(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), c[3], s = TAXI_INVALID_HANDLE;
  char peer[64];
  CU_ASSERT_EQUAL(jaws_sock_backlog(l), 0);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c[i]), 0);
#if defined(__linux__)
  CU_ASSERT_EQUAL(backlog_reaches(l, 3), 3);
#else
  CU_ASSERT_EQUAL(jaws_sock_backlog(l), 0); /* the system does not say */
#endif
  CU_ASSERT_EQUAL(accept_one(l, false, &s, peer, sizeof peer, BOUND_MS), 1);
#if defined(__linux__)
  CU_ASSERT_EQUAL(backlog_reaches(l, 2), 2);
#else
  CU_ASSERT_EQUAL(jaws_sock_backlog(l), 0);
#endif
  echo_close(s);
  for (int i = 0; i < 3; i++) echo_close(c[i]);
  echo_close(l);
}

/* ---- receives ------------------------------------------------------- */

/* With wait_ms 0 nothing is waited for, although the socket's receive
 * timeout (Linux: the accept's wait_ms) is longer than the suite's time
 * limit: a receive that waited would be reported as a hang. */
static void test_recv_timed(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), s = TAXI_INVALID_HANDLE, c,
                s2 = TAXI_INVALID_HANDLE, c2;
  char peer[64], buf[16];
  size_t n = 0;
  int prepared = jaws_sock_accept_waits(l, SEND_TIMEOUT_MS, NEVER_MS);

  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c), 0);
  CU_ASSERT_EQUAL_FATAL(
      accept_one(l, prepared == 1, &s, peer, sizeof peer, NEVER_MS), 1);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s, buf, sizeof buf, 0),
                  JAWS_SOCK_TIMEOUT);
  CU_ASSERT_EQUAL(echo_send(c, "abc", 3, &n), ECHO_IO_OK);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT_EQUAL(jaws_sock_wait(s, BOUND_MS), 1);
  memset(buf, 0, sizeof buf);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s, buf, sizeof buf, 0), 3);
  CU_ASSERT_STRING_EQUAL(buf, "abc");
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s, buf, sizeof buf, 0),
                  JAWS_SOCK_TIMEOUT);
  echo_close(c);
  CU_ASSERT_EQUAL(jaws_sock_wait(s, BOUND_MS), 1);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s, buf, sizeof buf, 0), 0);
  echo_close(s);

  /* A short wait, the one the accept was given: nothing came, then the
   * end of the stream. */
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c2), 0);
  CU_ASSERT_EQUAL_FATAL(accept_one(l, false, &s2, peer, sizeof peer, 50), 1);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s2, buf, sizeof buf, 50),
                  JAWS_SOCK_TIMEOUT);
  echo_close(c2);
  CU_ASSERT_EQUAL(jaws_sock_wait(s2, BOUND_MS), 1);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s2, buf, sizeof buf, 50), 0);
  echo_close(s2);
  echo_close(l);
}

/* ---- sends ---------------------------------------------------------- */

#define BODY_LEN 100000

static void test_send2(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), s, c;
  unsigned char *body = malloc(BODY_LEN);
  struct reader r;
  CU_ASSERT_PTR_NOT_NULL_FATAL(body);
  for (size_t i = 0; i < BODY_LEN; i++) body[i] = pattern(i);
  connect_pair(l, port, &s, &c, BOUND_MS);
  start_reader(&r, c, 4 + BODY_LEN + 1);
  CU_ASSERT_EQUAL(jaws_sock_send2(s, "head", 4, body, BODY_LEN), 0);
  finish_reader(&r, s);
  CU_ASSERT_EQUAL(r.got, 4 + BODY_LEN);
  CU_ASSERT(r.got >= 4 && memcmp(r.buf, "head", 4) == 0);
  CU_ASSERT(r.got == 4 + BODY_LEN && is_pattern(r.buf + 4, BODY_LEN, 0));
  free(r.buf);
  free(body);
  echo_close(l);
}

/* The file the file sends serve from, made and removed by each test:
 * FILE_LEN bytes, or BIG_FILE_LEN for a send that must outgrow every
 * buffer between a server and a client that does not read (Linux's
 * loopback autotuning tops out near 4 MB sending and 6 MB receiving). */
#define FILE_LEN 300000
#define BIG_FILE_LEN (32u << 20)
static char file_path[300];

static void make_file(size_t len) {
  unsigned char *data = malloc(FILE_LEN);
  FILE *f;
  CU_ASSERT_PTR_NOT_NULL_FATAL(data);
  for (size_t i = 0; i < FILE_LEN; i++) data[i] = pattern(i);
#if defined(_WIN32)
  static unsigned serial;
  char tmp[MAX_PATH];
  DWORD n = GetTempPathA(sizeof tmp, tmp);
  CU_ASSERT_FATAL(n > 0 && n < sizeof tmp);
  snprintf(file_path, sizeof file_path, "%staxi-sock.%lu.%u", tmp,
           (unsigned long)GetCurrentProcessId(), serial++);
  f = fopen(file_path, "wb");
#else
  int fd;
  snprintf(file_path, sizeof file_path, "%s/taxi-sock.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  fd = mkstemp(file_path);
  CU_ASSERT_FATAL(fd >= 0);
  f = fdopen(fd, "wb");
  if (f == NULL) close(fd);
#endif
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  for (size_t done = 0; done < len; done += FILE_LEN) {
    size_t chunk = len - done < FILE_LEN ? len - done : FILE_LEN;
    CU_ASSERT_EQUAL(fwrite(data, 1, chunk, f), chunk);
  }
  CU_ASSERT_EQUAL(fclose(f), 0);
  free(data);
}

/* Send head "H\r\n" and the range off, len of file f over a new
 * connection of l; what send_file returned, what the client got in *r
 * (its buffer to be freed). */
static int send_range(taxi_handle_t l, unsigned port, taxi_handle_t f,
                      uint64_t off, uint64_t len, struct reader *r) {
  taxi_handle_t s, c;
  int rc;
  connect_pair(l, port, &s, &c, BOUND_MS);
  start_reader(r, c, 3 + (size_t)len + 1);
  rc = jaws_sock_send_file(s, "H\r\n", 3, f, off, len);
#if defined(__linux__)
  /* A file goes corked (full segments); once it is sent the socket is
   * uncorked, or its last bytes would wait for the kernel's 200 ms. */
  if (rc == 0) {
    int corked = -1;
    socklen_t optlen = sizeof corked;
    CU_ASSERT_EQUAL(getsockopt(s, IPPROTO_TCP, TCP_CORK, &corked, &optlen), 0);
    CU_ASSERT_EQUAL(corked, 0);
  }
#endif
  finish_reader(r, s);
  return rc;
}

static void test_send_file(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), f = TAXI_INVALID_HANDLE;
  struct jaws_stat st;
  struct reader r;
  make_file(FILE_LEN);
  CU_ASSERT_EQUAL_FATAL(jaws_open(file_path, &f, &st), JAWS_OS_OK);
  CU_ASSERT_EQUAL(st.size, FILE_LEN);

  /* The head, then bytes 1000 .. 200999. */
  CU_ASSERT_EQUAL(send_range(l, port, f, 1000, 200000, &r), 0);
  CU_ASSERT_EQUAL(r.got, 3 + 200000);
  CU_ASSERT(r.got >= 3 && memcmp(r.buf, "H\r\n", 3) == 0);
  CU_ASSERT(r.got == 3 + 200000 && is_pattern(r.buf + 3, 200000, 1000));
  free(r.buf);

  /* A length of 0: the head alone. */
  CU_ASSERT_EQUAL(send_range(l, port, f, 0, 0, &r), 0);
  CU_ASSERT_EQUAL(r.got, 3);
  CU_ASSERT(r.got == 3 && memcmp(r.buf, "H\r\n", 3) == 0);
  free(r.buf);

  /* The whole file. */
  CU_ASSERT_EQUAL(send_range(l, port, f, 0, FILE_LEN, &r), 0);
  CU_ASSERT(r.got == 3 + FILE_LEN && is_pattern(r.buf + 3, FILE_LEN, 0));
  free(r.buf);

  /* A range starting past the end, and one running past it: -1 (the file
   * is shorter than the response promised; the caller closes the
   * connection).  The head and the bytes before the end may have gone
   * out, and nothing else. */
  CU_ASSERT_EQUAL(send_range(l, port, f, FILE_LEN + 1000, 10, &r), -1);
  CU_ASSERT(r.got <= 3);
  CU_ASSERT(memcmp(r.buf, "H\r\n", r.got) == 0);
  free(r.buf);
  CU_ASSERT_EQUAL(send_range(l, port, f, FILE_LEN - 50000, 100000, &r), -1);
  CU_ASSERT(r.got <= 3 + 50000);
  CU_ASSERT(r.got < 3 || (memcmp(r.buf, "H\r\n", 3) == 0 &&
                          is_pattern(r.buf + 3, r.got - 3, FILE_LEN - 50000)));
  free(r.buf);

  /* An invalid file handle: -1. */
  CU_ASSERT_EQUAL(send_range(l, port, TAXI_INVALID_HANDLE, 0, 10, &r), -1);
  CU_ASSERT(r.got <= 3);
  free(r.buf);

  jaws_close(f);
  CU_ASSERT_EQUAL(remove(file_path), 0);
  echo_close(l);
}

/* A client that never reads: a file's send gives up once the socket's
 * send timeout has passed without room (-1), instead of blocking its
 * thread for ever (Linux: sendfile's EAGAIN; Windows: the wait for
 * TransmitFile's completion, then its cancellation). */
static void test_send_file_stalled(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), f = TAXI_INVALID_HANDLE, s, c;
  struct jaws_stat st;
  char peer[64];
  make_file(BIG_FILE_LEN);
  CU_ASSERT_EQUAL_FATAL(jaws_open(file_path, &f, &st), JAWS_OS_OK);
  CU_ASSERT_EQUAL(st.size, BIG_FILE_LEN);
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c), 0);
  CU_ASSERT_EQUAL_FATAL(jaws_sock_wait(l, BOUND_MS), 1);
  CU_ASSERT_EQUAL_FATAL(
      jaws_sock_accept(l, false, &s, peer, sizeof peer, 300, BOUND_MS), 1);
  CU_ASSERT_EQUAL(jaws_sock_send_file(s, "H\r\n", 3, f, 0, BIG_FILE_LEN), -1);
  echo_close(s);
  echo_close(c);
  jaws_close(f);
  CU_ASSERT_EQUAL(remove(file_path), 0);
  echo_close(l);
}

/* A client that does not read, a socket whose sends would block for an
 * hour (NEVER_MS, far beyond the suite's time limit): a send that never
 * waits takes what fits and returns, from memory and from a file; once
 * full, another takes little or nothing; what went is the head and the
 * body's first bytes, in order; the socket is left blocking. */
static void send_now_stalled(taxi_handle_t l, unsigned port, taxi_handle_t f,
                             const unsigned char *data) {
  taxi_handle_t s = TAXI_INVALID_HANDLE, c;
  char peer[64];
  struct reader r;
  int64_t sent, more;
  CU_ASSERT_EQUAL_FATAL(echo_connect(loopback, port, &c), 0);
  CU_ASSERT_EQUAL_FATAL(jaws_sock_wait(l, BOUND_MS), 1);
  CU_ASSERT_EQUAL_FATAL(
      jaws_sock_accept(l, false, &s, peer, sizeof peer, NEVER_MS, BOUND_MS), 1);
  sent = jaws_sock_send_now(s, "H\r\n", 3, data, f, 0, BIG_FILE_LEN);
  CU_ASSERT(sent >= 3 && sent < 3 + (int64_t)BIG_FILE_LEN);
  if (sent < 3) sent = 3;
  /* On from where it stopped (the head went): the buffers are full. */
  more = jaws_sock_send_now(s, NULL, 0, data ? data + sent - 3 : NULL, f,
                            (uint64_t)sent - 3, BIG_FILE_LEN - (sent - 3));
  CU_ASSERT(more >= 0 && more < (int64_t)BIG_FILE_LEN / 2);
  if (more > 0) sent += more;
#if !defined(_WIN32)
  CU_ASSERT_EQUAL(fcntl(s, F_GETFL) & O_NONBLOCK, 0);
#endif
  start_reader(&r, c, (size_t)sent + 1);
  finish_reader(&r, s);
  CU_ASSERT_EQUAL(r.got, (size_t)sent);
  CU_ASSERT(r.got >= 3 && memcmp(r.buf, "H\r\n", 3) == 0);
  /* (make_file's bytes start the pattern again every FILE_LEN) */
  for (size_t i = 3; i < r.got; i += FILE_LEN)
    CU_ASSERT(
        is_pattern(r.buf + i, r.got - i < FILE_LEN ? r.got - i : FILE_LEN, 0));
  free(r.buf);
}

static void test_send_now(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), f = TAXI_INVALID_HANDLE;
  struct jaws_stat st;
  unsigned char *data = malloc(BIG_FILE_LEN);
  struct reader r;
  taxi_handle_t s, c;
  CU_ASSERT_PTR_NOT_NULL_FATAL(data);
  for (size_t i = 0; i < BIG_FILE_LEN; i++) data[i] = pattern(i % FILE_LEN);
  make_file(BIG_FILE_LEN);
  CU_ASSERT_EQUAL_FATAL(jaws_open(file_path, &f, &st), JAWS_OS_OK);
  send_now_stalled(l, port, TAXI_INVALID_HANDLE, data);
  send_now_stalled(l, port, f, NULL);
  /* A reading client gets a small response whole at once: all of it. */
  connect_pair(l, port, &s, &c, BOUND_MS);
  start_reader(&r, c, 3 + 1000 + 1);
  CU_ASSERT_EQUAL(jaws_sock_send_now(s, "H\r\n", 3, NULL, f, 500, 1000),
                  3 + 1000);
  finish_reader(&r, s);
  CU_ASSERT(r.got == 3 + 1000 && is_pattern(r.buf + 3, 1000, 500));
  free(r.buf);
  /* Errors: an invalid socket, a file that ends before the range. */
  CU_ASSERT_EQUAL(jaws_sock_send2_now(TAXI_INVALID_HANDLE, "x", 1, NULL, 0),
                  -1);
  CU_ASSERT_EQUAL(
      jaws_sock_send_now(TAXI_INVALID_HANDLE, "x", 1, NULL, f, 0, 10), -1);
  connect_pair(l, port, &s, &c, BOUND_MS);
  start_reader(&r, c, 3 + 10 + 1);
  CU_ASSERT_EQUAL(
      jaws_sock_send_now(s, "H\r\n", 3, NULL, f, BIG_FILE_LEN + 1000, 10), -1);
  finish_reader(&r, s);
  CU_ASSERT(r.got <= 3);
  free(r.buf);
  jaws_close(f);
  CU_ASSERT_EQUAL(remove(file_path), 0);
  free(data);
  echo_close(l);
}

/* ---- closed and invalid handles ------------------------------------- */

static void test_bad_handles(void) {
  unsigned port;
  taxi_handle_t l = listener(&port), s, c, peer[2];
  char buf[16];
  static char big[65536];
  int rc = 0;

  /* The invalid handle. */
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(TAXI_INVALID_HANDLE, buf, 1, 0), -1);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(TAXI_INVALID_HANDLE, buf, 1, 20), -1);
  CU_ASSERT_EQUAL(jaws_sock_recv(TAXI_INVALID_HANDLE, buf, 1), -1);
  CU_ASSERT_EQUAL(jaws_sock_send(TAXI_INVALID_HANDLE, "x", 1), -1);
  CU_ASSERT_EQUAL(jaws_sock_send2(TAXI_INVALID_HANDLE, "x", 1, "y", 1), -1);
  CU_ASSERT_EQUAL(jaws_sock_send_file(TAXI_INVALID_HANDLE, "x", 1,
                                      TAXI_INVALID_HANDLE, 0, 1),
                  -1);

  /* A socket just closed (nothing opened since: its number is not
   * reused). */
  connect_pair(l, port, &s, &c, BOUND_MS);
  echo_close(s);
  CU_ASSERT_EQUAL(jaws_sock_recv_timed(s, buf, sizeof buf, 0), -1);
  CU_ASSERT_EQUAL(jaws_sock_send(s, "x", 1), -1);
  CU_ASSERT_EQUAL(jaws_sock_send2(s, "x", 1, "y", 1), -1);
  echo_close(c);

  /* A peer that has gone: a send fails (at the latest once the peer's
   * reset has come back) instead of ending the process or blocking. */
  connect_pair(l, port, &peer[0], &peer[1], BOUND_MS);
  echo_close(peer[1]);
  for (int i = 0; i < 100 && rc == 0; i++) {
    rc = jaws_sock_send(peer[0], big, sizeof big);
    if (rc == 0) jaws_sock_wait(TAXI_INVALID_HANDLE, 10);
  }
  CU_ASSERT_EQUAL(rc, -1);
  echo_close(peer[0]);
  echo_close(l);
}

static CU_TestInfo sock_tests[] = {
    {"accepts: plain and prepared listeners", test_accept},
    {"the accept queue's length", test_backlog},
    {"send2: a head and a body, whole and in order", test_send2},
    {"send_file: head and range, empty, past the end", test_send_file},
    {"send_file: a client that does not read", test_send_file_stalled},
    {"closed, invalid and abandoned sockets", test_bad_handles},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo inherit_tests[] = {
    {"a rounded wait: options inherited, not set again", test_inherit},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo recv_tests[] = {
    {"recv_timed: no wait, a short wait, data, end", test_recv_timed},
    {"send_now: what fits, in order, never waiting", test_send_now},
    CU_TEST_INFO_NULL,
};

/* Its own suite: the first accept of its process. */
static const taxi_test_suite_t inherit_suite = {
    "jaws: accepted sockets inherit", inherit_tests, 30, NULL};
static const taxi_test_suite_t sock_suite = {"jaws: blocking sockets",
                                             sock_tests, 60, NULL};
/* Its own suite, with a time limit far below the socket's receive and
 * send timeouts (NEVER_MS). */
static const taxi_test_suite_t recv_suite = {
    "jaws: receives and sends that do not wait", recv_tests, 30, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {&inherit_suite, &sock_suite,
                                             &recv_suite};
  int rc;
  if (echo_net_init() != 0) {
    fprintf(stderr, "test_jaws_sock: %s\n", echo_last_error());
    return 1;
  }
  rc = taxi_test_run("jaws blocking sockets", suites, 3, argc, argv);
  echo_net_cleanup();
  return rc;
}
