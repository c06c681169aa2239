/* SPDX-License-Identifier: Apache-2.0 */
/*
 * echo_server.c - a TCP echo server on the stream layer, written once for
 * every dispatcher: the Reactor (one thread), a Leader/Followers or a
 * half-sync/half-async pool, or the Proactor over any completion backend
 * (--dispatcher; see echo_common.c for the command line).
 *
 * It prints one line once it is ready,
 *
 *     echo_server: backend=B dispatcher=D threads=N listening on HOST:PORT
 *
 * with the port actually bound (so --port 0 works), echoes whatever each
 * client sends until SIGINT or SIGTERM, then prints how much it did.
 */
#include <signal.h>
#include <stdio.h>

#include <taxi/taxi.h>

#include "echo_common.h"

/* Data arrived: send it back.  At the end of the stream (or if the echo
 * cannot be queued), send what is queued, then close. */
static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  if (status < 0 || taxi_stream_write(s, data, len, NULL, NULL) < 0)
    taxi_stream_end(s);
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  taxi_stream_read_start(s, on_read);
}

/* Runs in a dispatching thread, not in the signal handler. */
static void on_signal(taxi_io_t *io, int signo, void *arg) {
  (void)signo;
  (void)arg;
  taxi_io_stop(io);
}

#ifdef SIGUSR2
/* --counters: what the dispatcher did so far, on stderr; in a dispatching
 * thread, like every signal callback of the context.  (Windows has no
 * SIGUSR2, and the option does nothing there.) */
static void on_counters(taxi_io_t *io, int signo, void *arg) {
  taxi_io_stats_t st;
  (void)signo;
  (void)arg;
  if (taxi_io_stats(io, &st) == 0)
    fprintf(stderr, "echo_server: counters: connections=%llu bytes=%llu\n",
            (unsigned long long)st.accepts, (unsigned long long)st.bytes_out);
  /* A proactor's, or each of a group's (--dispatcher proactors). */
  taxi_proactor_group_t *g = taxi_io_proactor_group(io);
  unsigned n = g ? taxi_proactor_group_count(g) : 1;
  for (unsigned i = 0; i < n; i++) {
    taxi_proactor_stats_t ps;
    taxi_proactor_t *p =
        g ? taxi_proactor_group_at(g, i) : taxi_io_proactor(io);
    if (p && taxi_proactor_stats(p, &ps) == 0)
      fprintf(stderr,
              "echo_server: counters: proactor=%u completed=%llu "
              "syscalls=%llu waits=%llu io_uring_enter=%llu sqes=%llu "
              "cqes=%llu registered=%llu register_failures=%llu "
              "buffer_waits=%llu buffer_grows=%llu read_throttles=%llu\n",
              i, (unsigned long long)ps.completed,
              (unsigned long long)ps.syscalls, (unsigned long long)ps.waits,
              (unsigned long long)ps.ring_enters, (unsigned long long)ps.sqes,
              (unsigned long long)ps.cqes,
              (unsigned long long)ps.registered_handles,
              (unsigned long long)ps.register_failures,
              (unsigned long long)ps.buffer_waits,
              (unsigned long long)ps.buffer_grows,
              (unsigned long long)ps.read_throttles);
  }
}
#endif

int main(int argc, char **argv) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  struct echo_server_config cfg;
  taxi_io_t *io;
  taxi_listener_t *l;
  taxi_addr_t bound;
  taxi_io_stats_t st;
  char text[TAXI_ADDR_STRLEN];
  int rc = echo_server_args(argc, argv, &cfg);
  if (rc >= 0) return rc;

  rc = taxi_io_create(&io, &cfg.io);
  if (rc < 0)
    return echo_server_done(&cfg, echo_server_failed(&cfg, "cannot start", rc),
                            NULL);
  rc = taxi_listener_create(&l, io, cfg.address, &cfg.listen, on_accept, NULL);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot listen on %s: %s\n", cfg.address,
            taxi_strerror(rc));
    taxi_io_destroy(io);
    return echo_server_done(&cfg, ECHO_EXIT_ERROR, NULL);
  }
  /* Before taxi_io_run starts other threads (see taxi_io_on_signal). */
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++)
    if ((rc = taxi_io_on_signal(io, stop_signals[i], on_signal, NULL)) < 0)
      fprintf(stderr, "echo_server: no orderly stop on signal %d: %s\n",
              stop_signals[i], taxi_strerror(rc));

#ifdef SIGUSR2
  if (cfg.counters &&
      (rc = taxi_io_on_signal(io, SIGUSR2, on_counters, NULL)) < 0)
    fprintf(stderr, "echo_server: no counters on SIGUSR2: %s\n",
            taxi_strerror(rc));
#endif
  taxi_listener_address(l, &bound);
  taxi_addr_format(&bound, text, sizeof text);
  printf("echo_server: backend=%s dispatcher=%s threads=%u listening on %s\n",
         taxi_io_backend(io), taxi_io_dispatcher_name(cfg.io.dispatcher),
         taxi_io_threads(io), text);
  fflush(stdout); /* scripts wait for this line */

  rc = taxi_io_run(io); /* until on_signal stops it: TAXI_ESTOPPED */
  if (rc == TAXI_ESTOPPED) rc = 0;
  taxi_io_stats(io, &st);
  /* Why it stopped, said before the context goes: once it has, SIGINT and
   * SIGTERM are no longer caught, and one that comes then ends the
   * process at once. */
  int failed = rc < 0 ? echo_server_failed(&cfg, "stopped", rc) : 0;
  taxi_io_destroy(io); /* closes the listener and the connections */
  if (rc < 0) return echo_server_done(&cfg, failed, &st);
  printf("echo_server: stopped after %llu connections, %llu bytes echoed\n",
         (unsigned long long)st.accepts, (unsigned long long)st.bytes_out);
  echo_net_cleanup();
  return echo_server_done(&cfg, ECHO_EXIT_OK, &st);
}
