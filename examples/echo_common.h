/* SPDX-License-Identifier: Apache-2.0 */
/*
 * echo_common.h - the small amount of socket and command-line plumbing the
 * echo examples share.
 *
 * taxi watches handles; it does not open, read or write them.  Everything
 * that touches the socket API directly lives in echo_common.c, so that the
 * example programs themselves contain only portable C and taxi calls, and
 * porting them to another socket API (Winsock) means porting one file.
 *
 * Sockets are named by taxi_handle_t (an int on POSIX, a SOCKET on Windows)
 * and are non-blocking once these helpers return them.
 */
#ifndef ECHO_COMMON_H
#define ECHO_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <taxi/taxi.h>

/* The outcome of a non-blocking socket operation. */
typedef enum echo_io {
  ECHO_IO_OK,    /* done: *count bytes moved, or a connection accepted */
  ECHO_IO_AGAIN, /* it would block: wait for readiness and try again */
  ECHO_IO_EOF,   /* (receive only) the peer closed its side */
  ECHO_IO_ERROR  /* failed: echo_last_error() says why */
} echo_io_t;

/*
 * echo_net_init - once per process, before any other helper: starts Winsock
 * on Windows; on POSIX makes writing to a connection the peer has closed
 * fail with an error instead of killing the process with SIGPIPE.
 * Returns 0, or -1 (with echo_last_error() set).
 */
int echo_net_init(void);

/* echo_net_cleanup - undo echo_net_init() before exiting. */
void echo_net_cleanup(void);

/*
 * echo_last_error - what the most recent failing helper in this thread met,
 * e.g. "connect 127.0.0.1:7: Connection refused".  Valid until the next
 * helper call in this thread.
 */
const char *echo_last_error(void);

/*
 * echo_option - command-line matching for "--name value" and "--name=value".
 * If argv[*i] is the option `name`, stores its value in *value, advances *i
 * past what it consumed and returns 1.  Returns 0 if argv[*i] is another
 * argument, and -1 (after printing a message) if the value is missing.
 */
int echo_option(int argc, char **argv, int *i, const char *name,
                const char **value);

/*
 * echo_parse_port - parse a TCP port number, 0 to 65535.
 * Returns 0, or -1 if `text` is not such a number.
 */
int echo_parse_port(const char *text, unsigned *port);

/*
 * echo_parse_count - parse a decimal count between `min` and `max`.
 * Returns 0, or -1 if `text` is not such a number.
 */
int echo_parse_count(const char *text, unsigned long min, unsigned long max,
                     unsigned long *value);

/*
 * echo_parse_args - parse a program's whole command line against a table
 * of options: flags ("--keep-going"), texts ("--host H"), ports (1 to
 * 65535) and counts (min to max), each "--name value" or "--name=value".
 * A value out of range, an unknown argument or a missing value prints what
 * is wrong (prefixed with `prog`) and then usage(stderr); "--help" and "-h"
 * print usage(stdout).  Returns 0 when every argument was taken, 1 after
 * --help, -1 after a mistake.
 */
enum echo_arg_kind {
  ECHO_ARG_FLAG,
  ECHO_ARG_TEXT,
  ECHO_ARG_PORT,
  ECHO_ARG_COUNT
};
struct echo_arg {
  const char *name; /* "--port" */
  enum echo_arg_kind kind;
  void *out; /* int (a flag: set to 1), const char *, unsigned (a port),
                unsigned long (a count) */
  unsigned long min, max; /* a count's range */
  int *given;             /* if not NULL, set to 1 when the option is given */
};
int echo_parse_args(const char *prog, int argc, char **argv,
                    const struct echo_arg *args, size_t nargs,
                    void (*usage)(FILE *out));

/*
 * echo_listen - open a non-blocking TCP socket listening on host:port.
 * `host` is a numeric address or a name; port 0 asks the system to choose.
 * On success stores the socket in *out and the address actually bound, as
 * "HOST:PORT" ("[HOST]:PORT" for IPv6), in `bound` (`bound_size` bytes,
 * 64 is plenty), and the port number in *bound_port; returns 0.
 * Returns -1 on failure, with echo_last_error() set.
 */
int echo_listen(const char *host, unsigned port, taxi_handle_t *out,
                char *bound, size_t bound_size, unsigned *bound_port);

/*
 * echo_accept - accept one connection from a non-blocking listening socket.
 * On ECHO_IO_OK stores the new, non-blocking socket in *out.  ECHO_IO_AGAIN
 * means no connection is waiting, or one was aborted before it could be
 * accepted: either way, wait for the listener to become readable again.
 * ECHO_IO_ERROR usually means the process is out of descriptors.
 */
echo_io_t echo_accept(taxi_handle_t listener, taxi_handle_t *out);

/*
 * echo_connect - connect to host:port (blocking, which is fine for a client
 * opening a handful of connections at start-up), then make the socket
 * non-blocking and disable Nagle's algorithm, since request/response
 * traffic should not wait for acknowledgements.
 * Returns 0 and stores the socket in *out, or -1 with echo_last_error() set.
 */
int echo_connect(const char *host, unsigned port, taxi_handle_t *out);

/* echo_set_nonblocking - put a socket in non-blocking mode.  0 or -1. */
int echo_set_nonblocking(taxi_handle_t s);

/*
 * echo_recv / echo_send - one non-blocking receive or send of at most `len`
 * bytes; on ECHO_IO_OK, *count is how many moved (never 0 for a receive:
 * that is ECHO_IO_EOF).  Interrupted calls are retried.
 */
echo_io_t echo_recv(taxi_handle_t s, void *buf, size_t len, size_t *count);
echo_io_t echo_send(taxi_handle_t s, const void *buf, size_t len,
                    size_t *count);

/* echo_close - close a socket; TAXI_INVALID_HANDLE is ignored. */
void echo_close(taxi_handle_t s);

/* echo_nodelay - send small writes at once (TCP_NODELAY); a failure only
 * costs latency and is ignored. */
void echo_nodelay(taxi_handle_t s);

/* ---- the echo server's command line ------------------------------------- */

/* Exit statuses of echo_server: 2 is the customary one for a bad command
 * line; 3 means the library refused the configuration asked for (say,
 * several leaders on a backend that cannot have them), so scripts can
 * tell it from a failure. */
#define ECHO_EXIT_OK 0
#define ECHO_EXIT_ERROR 1
#define ECHO_EXIT_USAGE 2
#define ECHO_EXIT_REFUSED 3

/* What the echo server runs: its I/O context, listener and streams. */
struct echo_server_config {
  taxi_io_options_t io;
  taxi_lf_options_t lf; /* io.lf points here */
  taxi_listener_options_t listen;
  taxi_stream_options_t stream;
  char address[300]; /* "HOST:PORT", "[HOST]:PORT" for IPv6 */
  bool report;       /* --report */
  bool counters;     /* --counters: print them on SIGUSR2 */
};

/*
 * echo_server_args - read echo_server's command line into *cfg (see its
 * usage text), after echo_net_init().  Returns -1 when the server should
 * run; otherwise the program is done (--help, --list-backends, a bad
 * command line, a failed echo_net_init) and this is its exit status.
 */
int echo_server_args(int argc, char **argv, struct echo_server_config *cfg);

/*
 * echo_server_failed - report on stderr that `what` failed with the taxi
 * code rc, and return the exit status: ECHO_EXIT_USAGE for a readiness
 * backend that does not exist here (with the list of those that do),
 * ECHO_EXIT_REFUSED when the library refuses the configuration,
 * ECHO_EXIT_ERROR otherwise.
 */
int echo_server_failed(const struct echo_server_config *cfg, const char *what,
                       int rc);

/*
 * echo_server_done - the exit status, after the --report line if asked
 * for (st: what the server did, NULL if it did not get to serve).
 */
int echo_server_done(const struct echo_server_config *cfg, int status,
                     const taxi_io_stats_t *st);

#endif /* ECHO_COMMON_H */
