/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/bad_input.c - what the stream layer refuses, and that it
 * refuses it with a code: address strings of every malformed kind, bad
 * watermarks and options, NULL arguments, calls on a closed stream.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_address_strings(void) {
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  static const char *const bad[] = {
      "",                /* empty */
      "127.0.0.1",       /* no port */
      "127.0.0.1:",      /* empty port */
      "127.0.0.1:8o",    /* port not a number */
      "127.0.0.1:65536", /* port too big */
      "127.0.0.1:-1",    /* sign */
      "127.0.0.1: 80",   /* blank */
      "1.2.3:80",        /* short IPv4 */
      "256.1.1.1:80",    /* octet too big */
      "localhost:80",    /* names are not resolved */
      ":::80",           /* IPv6 without brackets */
      "::1:80",          /* IPv6 without brackets */
      "[::1:80",         /* unbalanced bracket */
      "[::1]80",         /* no colon after the bracket */
      "[::1]:",          /* no port */
      "[zz::1]:80",      /* not IPv6 */
      "[]:80",           /* empty IPv6 */
      "[127.0.0.1]:80",  /* IPv4 in brackets */
      "*:99999",         /* wildcard, port too big */
      ":",               /* nothing */
      "unix:",           /* empty path */
      "unix:@",          /* empty abstract name */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = taxi_addr_parse(&a, bad[i]);
    if (rc != TAXI_EBADADDR)
      printf("(\"%s\": %s) ", bad[i], taxi_error_name(rc));
    CU_ASSERT_EQUAL(rc, TAXI_EBADADDR);
  }
  char longpath[300] = "unix:/";
  memset(longpath + 6, 'x', 200);
  longpath[206] = '\0';
  CU_ASSERT_EQUAL(taxi_addr_parse(&a, longpath), TAXI_EBADADDR);
  CU_ASSERT_EQUAL(taxi_addr_parse(NULL, "127.0.0.1:80"), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_addr_parse(&a, NULL), TAXI_EINVAL);

  /* Good ones, read back as written (the wildcard as IPv6's). */
  static const char *const good[][2] = {
      {"127.0.0.1:80", "127.0.0.1:80"},
      {"[::1]:8080", "[::1]:8080"},
      {"*:80", "[::]:80"},
      {":0", "[::]:0"},
      {"0.0.0.0:65535", "0.0.0.0:65535"},
      {"unix:/tmp/x.sock", "unix:/tmp/x.sock"},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    CU_ASSERT_EQUAL(taxi_addr_parse(&a, good[i][0]), 0);
    CU_ASSERT(taxi_addr_format(&a, text, sizeof text) > 0);
    CU_ASSERT_STRING_EQUAL(text, good[i][1]);
  }
  CU_ASSERT_EQUAL(taxi_addr_parse(&a, "[::1]:443"), 0);
  CU_ASSERT_EQUAL(taxi_addr_port(&a), 443);
  CU_ASSERT_EQUAL(a.family, TAXI_ADDR_IPV6);
  CU_ASSERT_EQUAL(taxi_addr_format(&a, text, 4), TAXI_EINVAL); /* too small */
  CU_ASSERT_EQUAL(taxi_addr_format(NULL, text, sizeof text), TAXI_EINVAL);
#if defined(__linux__)
  CU_ASSERT_EQUAL(taxi_addr_parse(&a, "unix:@name"), 0);
  CU_ASSERT(taxi_addr_format(&a, text, sizeof text) > 0);
  CU_ASSERT_STRING_EQUAL(text, "unix:@name");
#endif
}

/* Every bad options structure is refused by each maker of streams. */
static void test_bad_watermarks_and_options(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  taxi_stream_options_t o;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &o;
  for (int k = 0; k < 13; k++) {
    taxi_stream_options_init(&o);
    switch (k) {
      case 0:
        o.high_watermark = 0;
        break;
      case 1:
        o.high_watermark = -1;
        break;
      case 2:
        o.low_watermark = -1;
        break;
      case 3:
        o.low_watermark = o.high_watermark;
        break;
      case 4:
        o.low_watermark = o.high_watermark + 1;
        break;
      case 5: /* pausing needs room for one read above the low mark */
        o.flags = TAXI_STREAM_PAUSE_READING;
        o.read_buffer = 30000;
        break;
      case 6:
        o.read_buffer = 0;
        break;
      case 7:
        o.max_writes = 0;
        break;
      case 8:
        o.size = 0;
        break;
      case 9:
        o.flags = 0x80u;
        break;
      case 10:
        o.idle_timeout = -1;
        break;
      case 11:
        o.write_timeout = TAXI_TIME_SPAN_MAX + 1;
        break;
      case 12:
        o.connect_timeout = -5;
        break;
    }
    taxi_stream_t *s = NULL;
    taxi_listener_t *l = NULL;
    CU_ASSERT_EQUAL(taxi_stream_open(&s, c.io, sv[0], &o), TAXI_EINVAL);
    CU_ASSERT_EQUAL(
        taxi_stream_connect(&s, c.io, "127.0.0.1:9", &o, NULL, NULL),
        TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_listener_create(&l, c.io, "127.0.0.1:0", &lo,
                                         st_echo_accept, NULL),
                    TAXI_EINVAL);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NULL(l);
  }
  /* Listener options of their own. */
  taxi_listener_t *l = NULL;
  taxi_listener_options_init(&lo);
  lo.flags = 0x100u;
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, "127.0.0.1:0", &lo, st_echo_accept, NULL),
      TAXI_EINVAL);
  lo.flags = 0;
  lo.size = 1;
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, "127.0.0.1:0", &lo, st_echo_accept, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, "127.0.0.1:", NULL, st_echo_accept, NULL),
      TAXI_EBADADDR);
  /* The address is taken. */
  int port = st_listen(&c, NULL, st_echo_accept, NULL, NULL);
  char address[64];
  taxi_listener_options_init(&lo);
  lo.flags = TAXI_LISTEN_NO_REUSEADDR;
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, address, &lo, st_echo_accept, NULL),
      TAXI_EADDRINUSE);
  close(sv[0]);
  close(sv[1]);
  st_io_destroy(&c);
}

#if !defined(_WIN32)
static void ignore_signal(taxi_io_t *io, int signo, void *arg) {
  (void)io;
  (void)signo;
  (void)arg;
}
#endif

static void test_bad_context_options(void) {
  taxi_io_t *io = NULL;
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = (taxi_io_dispatcher_t)99;
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  taxi_io_options_init(&o);
  o.threads = 2; /* the reactor dispatcher is one thread */
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  taxi_io_options_init(&o);
  o.backend = "no-such-backend";
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_ENOBACKEND);
  o.dispatcher = TAXI_IO_PROACTOR;
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_ENOBACKEND);
  taxi_io_options_init(&o);
  o.size = 4;
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  taxi_io_options_init(&o);
  o.threads = TAXI_LF_MAX_THREADS + 1;
  o.dispatcher = TAXI_IO_LF;
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  /* Several leaders where the backend cannot have them: refused when the
   * context is made, not later when it runs. */
  taxi_io_options_init(&o);
  o.dispatcher = TAXI_IO_LF;
  o.backend = "poll";
  taxi_lf_options_t lo = TAXI_LF_OPTIONS_INIT;
  lo.leaders = TAXI_LEADERS_MANY;
  o.lf = &lo;
  int rc = taxi_io_create(&io, &o);
  CU_ASSERT(rc == TAXI_ENOTSUP || rc == TAXI_ENOBACKEND);
  /* A supplied object of the wrong kind. */
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, NULL), 0);
  taxi_io_options_init(&o);
  o.dispatcher = TAXI_IO_PROACTOR;
  o.reactor = r;
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(io);
  /* The right kind: used, not destroyed with the context. */
  o.dispatcher = TAXI_IO_REACTOR;
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_PTR_EQUAL(taxi_io_reactor(io), r);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
#if !defined(_WIN32)
  /* A context that took a signal leaves nothing of its own attached to
   * the reactor it was given (the reactor's destroy would touch it: a
   * use after free, which the sanitizer builds see). */
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_EQUAL(taxi_io_on_signal(io, SIGUSR1, ignore_signal, NULL), 0);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
#endif
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  taxi_io_dispatcher_t d;
  CU_ASSERT_EQUAL(taxi_io_dispatcher_parse("reactors", &d), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_dispatcher_parse(NULL, &d), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_dispatcher_parse("hsha", &d), 0);
  CU_ASSERT_EQUAL(d, TAXI_IO_HSHA);
  CU_ASSERT_PTR_NULL(taxi_io_dispatcher_name((taxi_io_dispatcher_t)7));
}

static void test_null_arguments(void) {
  taxi_addr_t a;
  char buf[8];
  CU_ASSERT_EQUAL(taxi_io_create(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_run(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_wait(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_on_signal(NULL, 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_stats(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_timer_create(NULL, NULL, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_timer_start(NULL, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_timer_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_timer_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(taxi_io_backend(NULL));
  CU_ASSERT_PTR_NULL(taxi_io_reactor(NULL));
  CU_ASSERT_EQUAL(taxi_io_threads(NULL), 0);
  CU_ASSERT_EQUAL(taxi_listener_create(NULL, NULL, NULL, NULL, NULL, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_address(NULL, &a), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_close(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_connect(NULL, NULL, NULL, NULL, NULL, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_open(NULL, NULL, 0, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_write(NULL, buf, 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_write_ref(NULL, buf, 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_sendfile(NULL, 0, 0, 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_read_start(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_read_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_read_into(NULL, buf, 1, 0, NULL, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_shutdown(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_end(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_close(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_ref(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_unref(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_on_close(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_on_drain(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_set_data(NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(taxi_stream_data(NULL));
  CU_ASSERT_EQUAL(taxi_stream_set_timeouts(NULL, 0, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_set_nodelay(NULL, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_set_keepalive(NULL, 1, 0, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_peer(NULL, &a), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_local(NULL, &a), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_write_queued(NULL), 0);
  CU_ASSERT_PTR_NULL(taxi_stream_io(NULL));
  CU_ASSERT_EQUAL(taxi_stream_handle(NULL), TAXI_INVALID_HANDLE);
}

static atomic_int closed_once;

static void ignore_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  (void)s;
  (void)status;
  (void)d;
  (void)n;
}

static void count_close(taxi_stream_t *s, int reason) {
  (void)s;
  (void)reason;
  atomic_fetch_add(&closed_once, 1);
}

/* Calls on a closed (and still referenced) stream: errors, never a crash;
 * and calls with bad arguments on an open one. */
static void test_use_after_close(void) {
  st_io_t c;
  atomic_store(&closed_once, 0);
  if (st_io_create(&c) < 0) return;
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  taxi_stream_t *s;
  CU_ASSERT_EQUAL_FATAL(taxi_stream_open(&s, c.io, sv[0], NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_on_close(s, count_close), 0);
  char buf[64];
  int file = open("/dev/null", 0);
  CU_ASSERT_EQUAL(taxi_stream_write(s, buf, 0, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_write(s, NULL, 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_write(s, buf, 1u << 20, NULL, NULL),
                  TAXI_EINVAL); /* above the high watermark: never fits */
  CU_ASSERT_EQUAL(taxi_stream_write_ref(s, buf, 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_sendfile(s, file, 0, 1, NULL, NULL),
                  TAXI_EINVAL); /* not a regular file */
  CU_ASSERT_EQUAL(taxi_stream_sendfile(s, sv[1], 0, 1, NULL, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_stream_sendfile(s, TAXI_INVALID_HANDLE, 0, 1, NULL, NULL),
      TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_read_into(s, buf, 0, 0, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_read_into(s, buf, 1, 0x8u, NULL, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_set_timeouts(s, -1, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_set_nodelay(s, 1), TAXI_ENOTSUP); /* AF_UNIX */
  CU_ASSERT_EQUAL(taxi_stream_unref(s), TAXI_EINVAL); /* no reference held */
  CU_ASSERT_EQUAL(taxi_stream_ref(s), 0);
  st_io_run(&c);
  CU_ASSERT_EQUAL(taxi_stream_write(s, "x", 1, NULL, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_close(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_close(s), TAXI_EBADF);
  CU_ASSERT(util_wait_flag(&closed_once, 1, 10000));
  CU_ASSERT_EQUAL(taxi_stream_write(s, "x", 1, NULL, NULL), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_write_ref(s, "x", 1, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_read_start(s, ignore_read), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_read_stop(s), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_shutdown(s), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_end(s), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_close(s), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_on_close(s, count_close), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_set_nodelay(s, 1), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_local(s, &(taxi_addr_t){0}), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_write_queued(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_unref(s), 0); /* released now */
  CU_ASSERT_EQUAL(atomic_load(&closed_once), 1);
  close(file);
  close(sv[1]);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_bad_input[] = {
    {"bad address strings, each kind", test_address_strings},
    {"bad watermarks and options", test_bad_watermarks_and_options},
    {"bad context options", test_bad_context_options},
    {"NULL arguments", test_null_arguments},
    {"calls after close: errors, no crash", test_use_after_close},
    CU_TEST_INFO_NULL,
};
