/* SPDX-License-Identifier: Apache-2.0 */
/*
 * echo_common.c - socket and command-line helpers for the echo examples.
 *
 * This is the only file of the examples that includes operating-system
 * headers.  The differences between BSD sockets and Winsock are confined to
 * the block of definitions just below; the functions after it are written
 * once for both.
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include "echo_common.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <winsock2.h>
#include <ws2tcpip.h>

typedef int io_size_t; /* recv/send take and return an int */
#define IO_MAX INT_MAX
#define sock_errno() WSAGetLastError()
#define sock_close(s) closesocket(s)
#define SOCK_WOULD_BLOCK(e) ((e) == WSAEWOULDBLOCK)
#define SOCK_INTERRUPTED(e) ((e) == WSAEINTR)
#define SOCK_ACCEPT_RETRY(e) ((e) == WSAECONNRESET)
#define SEND_FLAGS 0
/* Windows' SO_REUSEADDR lets another process steal a port in use; the
 * exclusive option is what POSIX SO_REUSEADDR users actually want there. */
#define REUSE_OPTION SO_EXCLUSIVEADDRUSE

#else /* POSIX */
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

typedef size_t io_size_t;
#define IO_MAX SSIZE_MAX
#define sock_errno() errno
#define sock_close(s) close(s)
#define SOCK_WOULD_BLOCK(e) ((e) == EAGAIN || (e) == EWOULDBLOCK)
#define SOCK_INTERRUPTED(e) ((e) == EINTR)
/* A connection that was reset while queued is the client's problem, not the
 * listener's; Linux also reports some network errors of the new connection
 * through accept (see accept(2)), which likewise concern only that one. */
#define SOCK_ACCEPT_RETRY(e) ((e) == ECONNABORTED || (e) == EPROTO)
#ifdef MSG_NOSIGNAL
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0
#endif
#define REUSE_OPTION SO_REUSEADDR
#endif

/* The message for echo_last_error(); per thread, so that dispatchers running
 * the examples' hooks in several threads do not garble it. */
#if defined(_MSC_VER)
static __declspec(thread) char last_error[256];
#else
static _Thread_local char last_error[256];
#endif

/* Record "what: <description of OS error code err>". */
static void set_os_error(const char *what, int err) {
#if defined(_WIN32)
  char text[160];
  if (!FormatMessageA(
          FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
          (DWORD)err, 0, text, sizeof text, NULL))
    snprintf(text, sizeof text, "Winsock error %d", err);
  text[strcspn(text, "\r\n")] = '\0';
  snprintf(last_error, sizeof last_error, "%s: %s", what, text);
#else
  snprintf(last_error, sizeof last_error, "%s: %s", what, strerror(err));
#endif
}

const char *echo_last_error(void) {
  return last_error[0] ? last_error : "no error";
}

int echo_net_init(void) {
#if defined(_WIN32)
  WSADATA wsa;
  int err = WSAStartup(MAKEWORD(2, 2), &wsa);
  if (err != 0) {
    set_os_error("WSAStartup", err);
    return -1;
  }
#else
  /* Without this, a send to a peer that has gone away raises SIGPIPE, whose
   * default action ends the process: one misbehaving client must not be able
   * to kill a server.  MSG_NOSIGNAL covers the same where it exists. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPIPE, &sa, NULL) != 0) {
    set_os_error("sigaction(SIGPIPE)", errno);
    return -1;
  }
#endif
  return 0;
}

void echo_net_cleanup(void) {
#if defined(_WIN32)
  WSACleanup();
#endif
}

int echo_set_nonblocking(taxi_handle_t s) {
#if defined(_WIN32)
  u_long on = 1;
  if (ioctlsocket(s, FIONBIO, &on) != 0) {
    set_os_error("ioctlsocket(FIONBIO)", sock_errno());
    return -1;
  }
#else
  int flags = fcntl(s, F_GETFL);
  if (flags == -1 || fcntl(s, F_SETFL, flags | O_NONBLOCK) == -1) {
    set_os_error("fcntl(O_NONBLOCK)", errno);
    return -1;
  }
#endif
  return 0;
}

/* Keep our sockets out of programs we might exec (POSIX only; Windows
 * sockets are not inherited unless asked for). */
static int set_cloexec(taxi_handle_t s) {
#if !defined(_WIN32)
  int flags = fcntl(s, F_GETFD);
  if (flags == -1 || fcntl(s, F_SETFD, flags | FD_CLOEXEC) == -1) {
    set_os_error("fcntl(FD_CLOEXEC)", errno);
    return -1;
  }
#else
  (void)s;
#endif
  return 0;
}

/* Echo traffic is small request/response exchanges: send each at once
 * rather than waiting to coalesce it with data that will never come. */
void echo_nodelay(taxi_handle_t s) {
  int on = 1;
  /* Failure only costs latency, so it is not an error. */
  (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, (const char *)&on, sizeof on);
}

void echo_close(taxi_handle_t s) {
  if (s != TAXI_INVALID_HANDLE) sock_close(s);
}

/* ---- command line -------------------------------------------------------- */

int echo_option(int argc, char **argv, int *i, const char *name,
                const char **value) {
  const char *arg = argv[*i];
  size_t n = strlen(name);

  if (strncmp(arg, name, n) != 0) return 0;
  if (arg[n] == '=') {
    *value = arg + n + 1;
    *i += 1;
    return 1;
  }
  if (arg[n] != '\0')
    return 0; /* a longer option that merely starts with `name` */
  if (*i + 1 >= argc) {
    /* Name the program as its own messages do: without its directory. */
    const char *prog = argv[0], *p;
    for (p = prog; *p; p++)
      if (*p == '/' || *p == '\\') prog = p + 1;
    fprintf(stderr, "%s: option %s needs a value\n", prog, name);
    return -1;
  }
  *value = argv[*i + 1];
  *i += 2;
  return 1;
}

int echo_parse_count(const char *text, unsigned long min, unsigned long max,
                     unsigned long *value) {
  char *end;
  unsigned long v;

  /* strtoul accepts leading blanks and a minus sign; a count has neither. */
  if (text[0] < '0' || text[0] > '9') return -1;
  errno = 0;
  v = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return -1;
  *value = v;
  return 0;
}

/* Take argv[*i] if it is args[k]: 1 taken, 0 not this option, -1 wrong. */
static int take_arg(const char *prog, int argc, char **argv, int *i,
                    const struct echo_arg *a) {
  const char *value;
  int m;
  if (a->kind == ECHO_ARG_FLAG) {
    if (strcmp(argv[*i], a->name) != 0) return 0;
    *(int *)a->out = 1;
    ++*i;
  } else {
    if ((m = echo_option(argc, argv, i, a->name, &value)) <= 0) return m;
    if (a->kind == ECHO_ARG_TEXT) {
      *(const char **)a->out = value;
    } else if (a->kind == ECHO_ARG_PORT) {
      unsigned port;
      if (echo_parse_port(value, &port) != 0 || port == 0) {
        fprintf(stderr, "%s: %s wants a port from 1 to 65535, not '%s'\n", prog,
                a->name, value);
        return -1;
      }
      *(unsigned *)a->out = port;
    } else if (echo_parse_count(value, a->min, a->max,
                                (unsigned long *)a->out) != 0) {
      fprintf(stderr, "%s: %s must be %lu to %lu, not '%s'\n", prog, a->name,
              a->min, a->max, value);
      return -1;
    }
  }
  if (a->given) *a->given = 1;
  return 1;
}

int echo_parse_args(const char *prog, int argc, char **argv,
                    const struct echo_arg *args, size_t nargs,
                    void (*usage)(FILE *out)) {
  int i = 1;
  while (i < argc) {
    int m = 0;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 1;
    }
    for (size_t k = 0; k < nargs && m == 0; k++)
      m = take_arg(prog, argc, argv, &i, &args[k]);
    if (m == 0) fprintf(stderr, "%s: unknown argument '%s'\n", prog, argv[i]);
    if (m <= 0) {
      usage(stderr);
      return -1;
    }
  }
  return 0;
}

int echo_parse_port(const char *text, unsigned *port) {
  unsigned long v;
  if (echo_parse_count(text, 0, 65535, &v) != 0) return -1;
  *port = (unsigned)v;
  return 0;
}

/* ---- connections --------------------------------------------------------- */

/* "host:port" for messages, bracketing IPv6 addresses as URLs do. */
static void format_address(char *buf, size_t size, const char *verb,
                           const char *host, unsigned port) {
  if (strchr(host, ':') != NULL)
    snprintf(buf, size, "%s [%s]:%u", verb, host, port);
  else
    snprintf(buf, size, "%s %s:%u", verb, host, port);
}

/* Resolve host:port for a stream socket; *res must be freed with
 * freeaddrinfo().  `passive` asks for an address to bind to. */
static int resolve(const char *host, unsigned port, int passive,
                   struct addrinfo **res) {
  struct addrinfo hints;
  char service[8];
  int err;

  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  snprintf(service, sizeof service, "%u", port);
  err = getaddrinfo(host, service, &hints, res);
  if (err != 0) {
    snprintf(last_error, sizeof last_error, "cannot resolve %s: %s", host,
             gai_strerror(err));
    return -1;
  }
  return 0;
}

/* Open a socket for one resolved address; TAXI_INVALID_HANDLE on failure. */
static taxi_handle_t open_socket(const struct addrinfo *ai) {
  taxi_handle_t s =
      (taxi_handle_t)socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (s == TAXI_INVALID_HANDLE) {
    set_os_error("socket", sock_errno());
    return TAXI_INVALID_HANDLE;
  }
  if (set_cloexec(s) != 0) {
    sock_close(s);
    return TAXI_INVALID_HANDLE;
  }
  return s;
}

int echo_listen(const char *host, unsigned port, taxi_handle_t *out,
                char *bound, size_t bound_size, unsigned *bound_port) {
  struct addrinfo *res, *ai;
  struct sockaddr_storage addr;
  socklen_t addr_len = sizeof addr;
  char addr_host[128], addr_port[16], what[128]; /* numeric forms: ample */
  taxi_handle_t s = TAXI_INVALID_HANDLE;
  int on = 1, err;

  if (resolve(host, port, 1, &res) != 0) return -1;
  /* A name may resolve to several addresses (IPv6 and IPv4, say): listen
   * on the first one that works, as most servers given one name do. */
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    s = open_socket(ai);
    if (s == TAXI_INVALID_HANDLE) continue;
    /* Lets a restarted server bind again at once, instead of failing while
     * the previous instance's connections sit in TIME_WAIT. */
    (void)setsockopt(s, SOL_SOCKET, REUSE_OPTION, (const char *)&on, sizeof on);
    if (bind(s, ai->ai_addr, (socklen_t)ai->ai_addrlen) == 0 &&
        listen(s, SOMAXCONN) == 0 && echo_set_nonblocking(s) == 0)
      break;
    format_address(what, sizeof what, "listen on", host, port);
    set_os_error(what, sock_errno());
    sock_close(s);
    s = TAXI_INVALID_HANDLE;
  }
  freeaddrinfo(res);
  if (s == TAXI_INVALID_HANDLE) return -1;

  /* Report the address the system actually gave us: with port 0 that is
   * the only way to learn which port to connect to. */
  if (getsockname(s, (struct sockaddr *)&addr, &addr_len) != 0) {
    set_os_error("getsockname", sock_errno());
    sock_close(s);
    return -1;
  }
  err = getnameinfo((struct sockaddr *)&addr, addr_len, addr_host,
                    sizeof addr_host, addr_port, sizeof addr_port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
  if (err != 0) {
    snprintf(last_error, sizeof last_error, "getnameinfo: %s",
             gai_strerror(err));
    sock_close(s);
    return -1;
  }
  if (addr.ss_family == AF_INET6)
    snprintf(bound, bound_size, "[%s]:%s", addr_host, addr_port);
  else
    snprintf(bound, bound_size, "%s:%s", addr_host, addr_port);
  *bound_port = (unsigned)strtoul(addr_port, NULL, 10);
  *out = s;
  return 0;
}

echo_io_t echo_accept(taxi_handle_t listener, taxi_handle_t *out) {
  for (;;) {
    taxi_handle_t s = (taxi_handle_t)accept(listener, NULL, NULL);
    if (s == TAXI_INVALID_HANDLE) {
      int err = sock_errno();
      if (SOCK_INTERRUPTED(err)) continue;
      if (SOCK_WOULD_BLOCK(err) || SOCK_ACCEPT_RETRY(err)) return ECHO_IO_AGAIN;
      set_os_error("accept", err);
      return ECHO_IO_ERROR;
    }
    /* Whether an accepted socket inherits O_NONBLOCK differs between
     * systems (Linux: no, BSD: yes), so set it explicitly. */
    if (set_cloexec(s) != 0 || echo_set_nonblocking(s) != 0) {
      sock_close(s);
      return ECHO_IO_ERROR;
    }
    echo_nodelay(s);
    *out = s;
    return ECHO_IO_OK;
  }
}

int echo_connect(const char *host, unsigned port, taxi_handle_t *out) {
  struct addrinfo *res, *ai;
  taxi_handle_t s = TAXI_INVALID_HANDLE;
  char what[128];

  if (resolve(host, port, 0, &res) != 0) return -1;
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    s = open_socket(ai);
    if (s == TAXI_INVALID_HANDLE) continue;
    if (connect(s, ai->ai_addr, (socklen_t)ai->ai_addrlen) == 0 &&
        echo_set_nonblocking(s) == 0)
      break;
    format_address(what, sizeof what, "connect to", host, port);
    set_os_error(what, sock_errno());
    sock_close(s);
    s = TAXI_INVALID_HANDLE;
  }
  freeaddrinfo(res);
  if (s == TAXI_INVALID_HANDLE) return -1;
  echo_nodelay(s);
  *out = s;
  return 0;
}

echo_io_t echo_recv(taxi_handle_t s, void *buf, size_t len, size_t *count) {
  if (len > (size_t)IO_MAX) len = (size_t)IO_MAX;
  for (;;) {
    long n = (long)recv(s, buf, (io_size_t)len, 0);
    if (n > 0) {
      *count = (size_t)n;
      return ECHO_IO_OK;
    }
    if (n == 0) return ECHO_IO_EOF;
    int err = sock_errno();
    if (SOCK_INTERRUPTED(err)) continue;
    if (SOCK_WOULD_BLOCK(err)) return ECHO_IO_AGAIN;
    set_os_error("recv", err);
    return ECHO_IO_ERROR;
  }
}

echo_io_t echo_send(taxi_handle_t s, const void *buf, size_t len,
                    size_t *count) {
  if (len > (size_t)IO_MAX) len = (size_t)IO_MAX;
  for (;;) {
    long n = (long)send(s, buf, (io_size_t)len, SEND_FLAGS);
    if (n >= 0) {
      *count = (size_t)n;
      return ECHO_IO_OK;
    }
    int err = sock_errno();
    if (SOCK_INTERRUPTED(err)) continue;
    if (SOCK_WOULD_BLOCK(err)) return ECHO_IO_AGAIN;
    set_os_error("send", err);
    return ECHO_IO_ERROR;
  }
}

/* ---- the echo server's command line -------------------------------------- */

static const char *const promotion_names[] = {"lifo", "fifo", "priority",
                                              "shared"};
static const char *const leaders_names[] = {"one", "many"};

/* The dispatcher's error callback: one line per failure, so an operator
 * (and the fault tests) see what the library met; transient ones only
 * while there have not been many, so that a failure that repeats cannot
 * flood a log (the last, fatal one is always printed). */
static void print_failure(const taxi_error_report_t *r, void *arg) {
  static atomic_uint printed;
  (void)arg;
  if (!r->fatal && atomic_fetch_add(&printed, 1) >= 20) return;
  fprintf(stderr, "echo_server: %s %s failed: %s (attempt %u)\n",
          r->fatal ? "fatal:" : "retrying:", r->where, taxi_strerror(r->code),
          r->attempt);
}

static void server_usage(FILE *out) {
  fprintf(
      out,
      "usage: echo_server --port P [--host ADDR] [--backend NAME]\n"
      "                   [--dispatcher reactor|lf|hsha|proactor|proactors]\n"
      "                   [--threads N] [--idle-timeout SECONDS]\n"
      "                   [--promotion lifo|fifo|priority|shared]\n"
      "                   [--leaders one|many] [--handoff-us US]\n"
      "                   [--one-thread] [--report] [--counters]\n"
      "       echo_server --list-backends | --list-proactor-backends\n"
      "  --port P         TCP port to listen on (0: any free port)\n"
      "  --host ADDR      numeric address to listen on (default 127.0.0.1)\n"
      "  --backend NAME   event backend (default: the best available);\n"
      "                   with --dispatcher proactor(s), the completion\n"
      "                   backend (uring, aio, emulated, iocp, ...)\n"
      "  --dispatcher D   who runs the handlers: reactor (this thread,\n"
      "                   the default), lf (a Leader/Followers pool),\n"
      "                   hsha (a half-sync/half-async pool) or proactor\n"
      "                   (completion handlers; a Leader/Followers pool\n"
      "                   when --threads is above 1) or proactors (a\n"
      "                   proactor per thread, connections spread over\n"
      "                   them: on io_uring a ring per thread)\n"
      "  --threads N      threads running handlers (default 4 for lf,\n"
      "                   hsha, proactor(s); reactor: 1 only).  lf and\n"
      "                   proactor: the whole pool, main thread included;\n"
      "                   hsha: the workers, besides its reactor thread\n"
      "  --idle-timeout S close connections idle that long (default 300;\n"
      "                   0: never)\n"
      "  --promotion P    lf, proactor: which follower leads next (default\n"
      "                   lifo)\n"
      "  --leaders L      lf, proactor: one thread waits for events at a\n"
      "                   time, or many at once (epoll, kqueue, iocp;\n"
      "                   default one)\n"
      "  --handoff-us US  lf: the work, in microseconds, a thread keeps\n"
      "                   for itself before it wakes a follower for the\n"
      "                   rest of its batch (default 1000; at most\n"
      "                   10000): larger spends less CPU on wake-ups,\n"
      "                   and adds latency to the messages late in a\n"
      "                   batch\n"
      "  --one-thread     reactor, proactor with one thread: the context\n"
      "                   is TAXI_IO_ONE_THREAD, its streams take no lock\n"
      "  --report         print on stderr, however the server ends, one\n"
      "                   last line: echo_server: report: status=S\n"
      "                   connections=C bytes=B accept_errors=E\n"
      "                   accept_pauses=P\n"
      "  --counters       print the dispatcher's counters on stderr each\n"
      "                   time SIGUSR2 arrives (POSIX)\n"
      "  --list-backends  print the backends that work here, one a line\n"
      "  --list-proactor-backends  the same for completion backends\n"
      "exit status: 0 stopped by SIGINT/SIGTERM, 1 failure, 2 bad usage,\n"
      "             3 configuration refused by the library\n");
}

/* The index of `value` in names[0 .. n), or -1 after a message. */
static int parse_choice(const char *option, const char *value,
                        const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(value, names[i]) == 0) return i;
  fprintf(stderr, "echo_server: invalid %s '%s'; one of:", option, value);
  for (int i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
  fprintf(stderr, "\n");
  return -1;
}

/* Print the readiness backends that work here, each followed by sep but
 * the last, followed by end. */
static void print_backends(FILE *out, const char *sep, const char *end) {
  const char *names[16];
  int n = taxi_backend_names(names, 16);
  if (n > 16) n = 16;
  for (int i = 0; i < n; i++)
    fprintf(out, "%s%s", names[i], i + 1 < n ? sep : end);
}

int echo_server_args(int argc, char **argv, struct echo_server_config *cfg) {
  const char *host = "127.0.0.1", *pool_option = NULL;
  unsigned port = 0;
  unsigned long idle = 300;
  int have_port = 0, have_threads = 0, i = 1, k;

  memset(cfg, 0, sizeof *cfg);
  taxi_io_options_init(&cfg->io);
  taxi_lf_options_init(&cfg->lf);
  cfg->io.lf = &cfg->lf;
  taxi_listener_options_init(&cfg->listen);
  taxi_stream_options_init(&cfg->stream);
  while (i < argc) {
    const char *value;
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      server_usage(stdout);
      return ECHO_EXIT_OK;
    }
    if (strcmp(argv[i], "--list-backends") == 0) {
      print_backends(stdout, "\n", "\n");
      return ECHO_EXIT_OK;
    }
    if (strcmp(argv[i], "--list-proactor-backends") == 0) {
      const char *names[16];
      int n = taxi_proactor_backend_names(names, 16);
      for (int j = 0; j < n && j < 16; j++) printf("%s\n", names[j]);
      return ECHO_EXIT_OK;
    }
    if ((m = echo_option(argc, argv, &i, "--port", &value)) > 0) {
      if (echo_parse_port(value, &port) != 0) {
        fprintf(stderr, "echo_server: invalid port '%s'\n", value);
        return ECHO_EXIT_USAGE;
      }
      have_port = 1;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--host", &value)) > 0) {
      host = strcmp(value, "localhost") == 0 ? "127.0.0.1" : value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--backend", &value)) > 0) {
      cfg->io.backend = value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--dispatcher", &value)) > 0) {
      if (taxi_io_dispatcher_parse(value, &cfg->io.dispatcher) != 0) {
        fprintf(stderr,
                "echo_server: invalid dispatcher '%s'; one of: reactor lf "
                "hsha proactor proactors\n",
                value);
        return ECHO_EXIT_USAGE;
      }
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--threads", &value)) > 0) {
      unsigned long n;
      if (echo_parse_count(value, 1, TAXI_LF_MAX_THREADS, &n) != 0) {
        fprintf(stderr, "echo_server: invalid thread count '%s' (1 to %u)\n",
                value, TAXI_LF_MAX_THREADS);
        return ECHO_EXIT_USAGE;
      }
      cfg->io.threads = (unsigned)n;
      have_threads = 1;
    } else if (m == 0 && strcmp(argv[i], "--one-thread") == 0) {
      cfg->io.flags |= TAXI_IO_ONE_THREAD;
      i++;
    } else if (m == 0 && strcmp(argv[i], "--report") == 0) {
      cfg->report = true;
      i++;
    } else if (m == 0 && strcmp(argv[i], "--counters") == 0) {
      cfg->counters = true;
      i++;
    } else if (m == 0 && (m = echo_option(argc, argv, &i, "--idle-timeout",
                                          &value)) > 0) {
      if (echo_parse_count(value, 0, 86400u * 365, &idle) != 0) {
        fprintf(stderr, "echo_server: invalid idle timeout '%s'\n", value);
        return ECHO_EXIT_USAGE;
      }
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--promotion", &value)) > 0) {
      if ((k = parse_choice("promotion", value, promotion_names, 4)) < 0)
        return ECHO_EXIT_USAGE;
      cfg->lf.promotion = (taxi_promotion_t)k;
      pool_option = "--promotion";
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--leaders", &value)) > 0) {
      if ((k = parse_choice("leaders", value, leaders_names, 2)) < 0)
        return ECHO_EXIT_USAGE;
      cfg->lf.leaders = (taxi_leaders_t)k;
      pool_option = "--leaders";
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--handoff-us", &value)) > 0) {
      unsigned long us;
      if (echo_parse_count(value, 1, TAXI_LF_HANDOFF_MAX_NS / 1000, &us) != 0) {
        fprintf(stderr, "echo_server: invalid --handoff-us '%s'\n", value);
        return ECHO_EXIT_USAGE;
      }
      cfg->lf.handoff_ns = (uint64_t)us * 1000;
      pool_option = "--handoff-us";
    } else {
      if (m == 0)
        fprintf(stderr, "echo_server: unknown argument '%s'\n", argv[i]);
      server_usage(stderr);
      return ECHO_EXIT_USAGE;
    }
  }
  if (!have_port) {
    fprintf(stderr, "echo_server: --port is required\n");
    server_usage(stderr);
    return ECHO_EXIT_USAGE;
  }
  taxi_io_dispatcher_t d = cfg->io.dispatcher;
  if (d == TAXI_IO_REACTOR && have_threads && cfg->io.threads != 1) {
    fprintf(stderr,
            "echo_server: --dispatcher reactor runs the handlers in one "
            "thread; --threads must be 1 (use --dispatcher lf or hsha for "
            "more)\n");
    return ECHO_EXIT_USAGE;
  }
  if (d == TAXI_IO_HSHA && cfg->io.threads > TAXI_HSHA_MAX_WORKERS) {
    fprintf(stderr, "echo_server: --dispatcher hsha takes at most %u threads\n",
            TAXI_HSHA_MAX_WORKERS);
    return ECHO_EXIT_USAGE;
  }
  if (pool_option && d != TAXI_IO_LF && d != TAXI_IO_PROACTOR) {
    fprintf(stderr,
            "echo_server: %s applies to --dispatcher lf or proactor only\n",
            pool_option);
    return ECHO_EXIT_USAGE;
  }
  if (!have_threads) cfg->io.threads = d == TAXI_IO_REACTOR ? 1 : 4;
  snprintf(cfg->address, sizeof cfg->address,
           strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
  /* Small buffers (20 KiB a connection); reading pauses while the echo
   * cannot keep up, which is what pushes back on a client that sends
   * faster than it reads. */
  cfg->stream.read_buffer = 4096;
  cfg->stream.high_watermark = 16384;
  cfg->stream.low_watermark = 4096;
  cfg->stream.flags = TAXI_STREAM_PAUSE_READING | TAXI_STREAM_NODELAY;
  cfg->stream.idle_timeout = (taxi_time_t)idle * TAXI_NSEC_PER_SEC;
  cfg->listen.stream = &cfg->stream;
  cfg->io.on_error = print_failure;
  if (echo_net_init() != 0) {
    fprintf(stderr, "echo_server: %s\n", echo_last_error());
    return ECHO_EXIT_ERROR;
  }
  return -1;
}

int echo_server_failed(const struct echo_server_config *cfg, const char *what,
                       int rc) {
  bool proactor = cfg->io.dispatcher == TAXI_IO_PROACTOR ||
                  cfg->io.dispatcher == TAXI_IO_PROACTORS;
  fprintf(stderr, "echo_server: %s (dispatcher %s, backend %s): %s\n", what,
          taxi_io_dispatcher_name(cfg->io.dispatcher),
          cfg->io.backend ? cfg->io.backend : "automatic", taxi_strerror(rc));
  if (rc == TAXI_ENOBACKEND && cfg->io.backend && !proactor) {
    fprintf(stderr, "echo_server: available: ");
    print_backends(stderr, ", ", "\n");
    return ECHO_EXIT_USAGE;
  }
  if (rc == TAXI_ENOTSUP || rc == TAXI_EPERM ||
      (rc == TAXI_ENOBACKEND && proactor) || rc == TAXI_EINVAL)
    return ECHO_EXIT_REFUSED;
  return ECHO_EXIT_ERROR;
}

int echo_server_done(const struct echo_server_config *cfg, int status,
                     const taxi_io_stats_t *st) {
  if (cfg->report) {
    fflush(stdout);
    fprintf(stderr,
            "echo_server: report: status=%d connections=%llu bytes=%llu "
            "accept_errors=%llu accept_pauses=%llu\n",
            status, st ? (unsigned long long)st->accepts : 0ull,
            st ? (unsigned long long)st->bytes_out : 0ull,
            st ? (unsigned long long)st->accept_errors : 0ull,
            st ? (unsigned long long)st->accept_pauses : 0ull);
  }
  return status;
}
