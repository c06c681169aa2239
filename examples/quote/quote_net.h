/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_net.h - what quote_server's plain-socket models need beyond
 * examples/echo_common.h: blocking connections, a poll over many
 * sockets, a pair of connected sockets to wake a poller, and an orderly
 * stop on SIGINT/SIGTERM (a console handler on Windows).  The only quote
 * file that includes operating-system headers.
 */
#ifndef QUOTE_NET_H
#define QUOTE_NET_H

#include <stddef.h>

#include <taxi/taxi.h>

/* quote_set_blocking - undo echo_accept's non-blocking mode.  0 or -1. */
int quote_set_blocking(taxi_handle_t s);

/* quote_shutdown - end both directions of s, waking a thread blocked in
 * a receive on it; the socket stays open until echo_close. */
void quote_shutdown(taxi_handle_t s);

/* A poll over up to `capacity` sockets (poll, WSAPoll on Windows). */
struct quote_poll;

/* quote_poll_new - room for `capacity` sockets; NULL when out of memory. */
struct quote_poll *quote_poll_new(size_t capacity);
void quote_poll_free(struct quote_poll *p);

/*
 * quote_poll_wait - wait up to timeout_ms (-1: no limit) until one of
 * fds[0 .. n) (n <= capacity) is readable or has hung up; sets ready[i]
 * to 1 for each such socket, 0 for the others.  Returns how many are
 * ready (0: the time ran out or a signal came), or -1 with
 * echo_last_error()-style text in *what.
 */
int quote_poll_wait(struct quote_poll *p, const taxi_handle_t *fds, size_t n,
                    int timeout_ms, unsigned char *ready, const char **what);

/* quote_wait_readable - quote_poll_wait on one socket, without a set. */
int quote_wait_readable(taxi_handle_t s, int timeout_ms);

/* quote_pair - two connected sockets (socketpair; a loopback TCP pair on
 * Windows), both non-blocking.  0, or -1. */
int quote_pair(taxi_handle_t out[2]);

/* quote_on_stop - call fn on SIGINT and SIGTERM (Windows: Ctrl-C, Ctrl-Break,
 * console close).  fn runs in a signal handler or a system thread: it may
 * only set flags and call async-signal-safe functions (taxi_io_stop is
 * one).  Blocked receives are interrupted rather than restarted.  0 or
 * -1. */
int quote_on_stop(void (*fn)(void));

#endif /* QUOTE_NET_H */
