/*
 * echo_proactor.h - the echo server's completion handlers: the same
 * protocol as the reactor glue in echo_server.c, written once as Proactor
 * completion handlers and run unchanged over every completion backend
 * (io_uring, POSIX aio, the emulated proactor, IOCP) and any number of
 * dispatching threads.
 */
#ifndef ECHO_PROACTOR_H
#define ECHO_PROACTOR_H

#include <stdatomic.h>

#include <taxi/taxi.h>

struct echo_proactor_config {
  const char *backend; /* a completion backend name, NULL: the best */
  unsigned threads;    /* threads dispatching completions (>= 1) */
  /* Called once the server accepts, with the backend in use. */
  void (*announce)(const char *backend, void *arg);
  void *announce_arg;
  /* Runs in the calling thread while the pool serves, and returns (0, or
   * -1 on failure) when the server should end. */
  int (*wait_for_stop)(void *arg);
  void *stop_arg;
  /* Added to as connections come and bytes are echoed. */
  atomic_ullong *connections;
  atomic_ullong *bytes;
};

/*
 * echo_proactor_serve - accept connections on `listener` (non-blocking,
 * listening; closed before this returns) and echo on each, with
 * cfg->threads threads of a Leader/Followers pool dispatching the
 * completions, until cfg->wait_for_stop() returns in the calling thread.
 * Returns 0, 1 on failure, 3 if the library refuses the configuration.
 */
int echo_proactor_serve(const struct echo_proactor_config *cfg,
                        taxi_handle_t listener);

#endif /* ECHO_PROACTOR_H */
