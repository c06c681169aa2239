/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.h - what the peer echo servers of the benchmark share: the command
 * line, the listening socket, the lines the harness reads, stopping on
 * SIGINT/SIGTERM.
 *
 * Every peer server (Boost.Asio, libevent, libuv, and the bare epoll and
 * io_uring loops; the datagram echoes udp_floor and libuv_udp_echo) is
 * started as
 *
 *     NAME --port P [--host ADDR] [--threads N]
 *
 * prints "NAME: listening on HOST:PORT" once it accepts connections (the
 * line taxi's echo_server prints, so the harness treats them alike), echoes
 * until SIGINT or SIGTERM, prints "NAME: stopped after N connections" and
 * exits 0.  They listen with the same options as examples/echo_server
 * (SO_REUSEADDR, a SOMAXCONN backlog, non-blocking) and set TCP_NODELAY on
 * each connection as it does, so that only the event loop differs.
 *
 * Callable from C and C++.  Not thread-safe: call from the main thread
 * before the server starts its threads.
 */
#ifndef TAXI_BENCH_PEER_H
#define TAXI_BENCH_PEER_H

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

struct peer_options {
  const char *name; /* for messages: "epoll_floor", ... */
  const char *host; /* default 127.0.0.1 */
  unsigned port;    /* 0: any free port */
  unsigned threads; /* --threads, where the server takes it */
};

/* Parse the command line into *o.  max_threads 0 means the server takes no
 * --threads; else N must be 1 .. max_threads (default default_threads).
 * Exits 2 with a message on bad usage, 0 after --help. */
void peer_parse(int argc, char **argv, const char *name,
                unsigned default_threads, unsigned max_threads,
                struct peer_options *o);

/* Raise the soft RLIMIT_NOFILE to the hard limit, so that tens of thousands
 * of connections fit. */
void peer_raise_fd_limit(void);

/* Listen on o->host:o->port (non-blocking, close-on-exec) and print the
 * "listening on" line.  Returns the socket; exits 1 with a message on
 * failure. */
int peer_listen(const struct peer_options *o);

/* The same for the datagram peers: a UDP socket bound to o->host:o->port,
 * non-blocking, and the same "listening on" line. */
int peer_udp_bind(const struct peer_options *o);

/* TCP_NODELAY on an accepted connection, as echo_server does. */
void peer_nodelay(int fd);

/* For the single-threaded loops: block SIGINT and SIGTERM and catch them
 * with a handler that sets peer_stopping; *wait_mask receives the mask to
 * wait with (epoll_pwait, io_uring_enter), which lets them in only while
 * the loop waits, so a stop never slips in between a check and a wait. */
void peer_catch_stop_signals(sigset_t *wait_mask);
extern volatile sig_atomic_t peer_stopping;

/* Print "NAME: stopped after N connections". */
void peer_report_stop(const struct peer_options *o,
                      unsigned long long connections);

/* Print "NAME: WHAT: strerror(err)" to stderr. */
void peer_error(const struct peer_options *o, const char *what, int err);

#ifdef __cplusplus
}
#endif

#endif
