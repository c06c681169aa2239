/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws.c - a JAWS-like static-file HTTP server on taxi: the
 * command line, the strategy table, and the parts of the server every
 * strategy shares (admission, the listening line).
 *
 *   jaws --root DIR [--port P] [--host H] [--strategy S] [--backend B]
 *        [--threads N] [--max-connections N] [--header-timeout MS]
 *        [--idle-timeout MS] [--send-timeout MS] [--cache-bytes N]
 *        [--memory-max BYTES] [--access-log FILE] [--dotfiles deny|allow]
 *        [--adapt-policy measure|threshold] [--adapt-large BYTES]
 *        [--adapt-connections H[:L]] [--defer-accept S]
 *        [--tls-cert FILE --tls-key FILE (--tls-port P | --tls-only)]
 *
 * Strategies: reactive, lf, hsha, proactive (strategy_io.c),
 * thread-per-connection, thread-per-request, thread-pool
 * (strategy_threads.c), adaptive (strategy_adaptive.c, the default: in the
 * WebSTONE experiment of docs/bench/README.md it is ahead of the best fixed
 * strategy or level with it on every workload; a host whose Proactor
 * cannot start at all gets reactive, the single-threaded Reactor).  It
 * prints "jaws: strategy=S backend=B threads=N listening on HOST:PORT"
 * once ready (threads=0: a thread per connection or per request), serves
 * until SIGINT or SIGTERM, then prints "jaws: stopped after N requests".
 * Exit status: 0, 1 (an error: a missing root, a port in use), 2 (bad
 * command line, a backend that does not exist here).
 */
#include "jaws.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../echo_common.h"
#include "access_log.h"
#include "jaws_tls.h"
#include "vfs.h"

/* --cache-bytes, --memory-max and --adapt-large: up to 1 TiB, or what an
 * unsigned long holds where it has 32 bits (Windows). */
#if ULONG_MAX > 0xffffffffu
#define CACHE_BYTES_MAX (1ul << 40)
#else
#define CACHE_BYTES_MAX ULONG_MAX
#endif

#define MAX_ENTRIES 512

const char jaws_busy_response[] =
    "HTTP/1.1 503 Service Unavailable\r\nServer: jaws\r\n"
    "Content-Type: text/plain\r\nContent-Length: 20\r\n"
    "Connection: close\r\n\r\nToo many connections";

static const struct jaws_strategy strategies[] = {
    {"reactive", jaws_run_io, TAXI_IO_REACTOR},
    {"lf", jaws_run_io, TAXI_IO_LF},
    {"hsha", jaws_run_io, TAXI_IO_HSHA},
    {"proactive", jaws_run_io, TAXI_IO_PROACTOR},
    {"thread-per-connection", jaws_run_threads, 0},
    {"thread-per-request", jaws_run_threads, 1},
    {"thread-pool", jaws_run_threads, 2},
    {"adaptive", jaws_run_adaptive, 0},
};

const struct jaws_strategy *jaws_strategy_find(const char *name) {
  for (size_t i = 0; i < sizeof strategies / sizeof *strategies; i++)
    if (strcmp(name, strategies[i].name) == 0) return &strategies[i];
  return NULL;
}

bool jaws_admit(struct jaws_server *srv) {
  unsigned n = atomic_fetch_add(&srv->connections, 1);
  if (n < srv->cfg.max_connections) return true;
  atomic_fetch_sub(&srv->connections, 1);
  return false;
}

void jaws_leave(struct jaws_server *srv) {
  atomic_fetch_sub(&srv->connections, 1);
}

void jaws_print_listening(struct jaws_server *srv, const char *backend,
                          unsigned threads, const char *bound,
                          const char *tls_bound) {
  printf("jaws: strategy=%s backend=%s threads=%u listening on %s%s%s%s\n",
         srv->cfg.strategy, backend ? backend : "-", threads, bound,
         srv->cfg.tls_only ? " (tls)" : "", tls_bound ? ", tls on " : "",
         tls_bound ? tls_bound : "");
  fflush(stdout); /* scripts wait for this line */
  srv->started = true;
}

static int usage(FILE *to, int status) {
  fprintf(to,
          "usage: jaws --root DIR [--port P] [--host H] [--strategy S]\n"
          "            [--backend B] [--threads N] [--max-connections N]\n"
          "            [--header-timeout MS] [--idle-timeout MS]\n"
          "            [--send-timeout MS] [--cache-bytes N]\n"
          "            [--memory-max BYTES] [--access-log FILE]\n"
          "            [--dotfiles deny|allow]\n"
          "            [--adapt-policy measure|threshold]\n"
          "            [--adapt-large BYTES] [--adapt-connections H[:L]]\n"
          "            [--defer-accept S]\n"
          "            [--tls-cert FILE --tls-key FILE\n"
          "             (--tls-port P | --tls-only)]\n"
          "strategies: adaptive (default), reactive, lf, hsha, proactive,\n"
          "            thread-per-connection, thread-per-request,\n"
          "            thread-pool\n"
          "defaults: --strategy adaptive --threads half the processors,\n"
          "          at least 1 (each of its sides; reactive where no\n"
          "          Proactor starts)\n"
          "          --backend uring, else the default completion backend\n"
          "          (adaptive; the others: taxi's default for them)\n"
          "          --host 127.0.0.1 --port 8080 --max-connections 10000\n"
          "          --header-timeout 10000 --idle-timeout 30000\n"
          "          --send-timeout 5000 (the blocking strategies)\n"
          "          --cache-bytes 67108864 --dotfiles deny\n"
          "          --memory-max 8388608 (a file that size or less, and an\n"
          "          eighth of --cache-bytes or less, is held in memory)\n"
          "          --adapt-policy measure --adapt-large 262144\n"
          "          --adapt-connections 64:32 (threshold policy only)\n"
          "          --defer-accept 1 (adaptive on Linux; 0: off)\n"
          "a cached file is checked against the disk 1 s after its last\n"
          "check: a change is served at most 1 s after it is made\n"
          "HTTPS: --tls-cert (PEM chain, the server's first) and --tls-key\n"
          "  (PEM) with --tls-port P (a TLS listener beside the plain one\n"
          "  on --port) or --tls-only (the listener on --port is TLS);\n"
          "  strategies adaptive (TLS connections served by its proactor\n"
          "  side), reactive, lf, hsha, proactive; SIGHUP reloads the two\n"
          "  files for new connections; ALPN http/1.1\n");
  return status;
}

/* --adapt-connections H[:L], 1 <= L <= H: 0, or -1. */
static int parse_marks(const char *val, struct jaws_config *cfg) {
  char high[32];
  const char *colon = strchr(val, ':');
  unsigned long h, l = 0;
  size_t n = colon ? (size_t)(colon - val) : strlen(val);
  if (n == 0 || n >= sizeof high) return -1;
  memcpy(high, val, n);
  high[n] = '\0';
  if (echo_parse_count(high, 1, 1000000, &h) != 0) return -1;
  if (colon && echo_parse_count(colon + 1, 1, h, &l) != 0) return -1;
  cfg->adapt_high = (unsigned)h;
  cfg->adapt_low = (unsigned)l;
  return 0;
}

/* The TLS options together: 0, or the exit status after a message. */
static int check_tls_args(const struct jaws_config *cfg) {
  const char *why = NULL;
  bool any =
      cfg->tls_cert || cfg->tls_key || cfg->tls_port_given || cfg->tls_only;
  if (!any) return 0;
  if (!cfg->tls_cert || !cfg->tls_key)
    why = "--tls-cert and --tls-key go together";
  else if (cfg->tls_port_given == cfg->tls_only)
    why =
        "TLS takes one of --tls-port P (beside the plain listener) or "
        "--tls-only";
  else if (cfg->tls_port_given && cfg->tls_port != 0 &&
           cfg->tls_port == cfg->port)
    why = "--tls-port must differ from --port";
  else if (jaws_strategy_find(cfg->strategy)->run == jaws_run_threads)
    why =
        "the thread-per-X strategies serve plain HTTP only; TLS with "
        "adaptive, reactive, lf, hsha or proactive";
  if (why == NULL) return 0;
  fprintf(stderr, "jaws: %s\n", why);
  return usage(stderr, 2);
}

/* 0 and cfg filled, or the exit status. */
static int parse_args(int argc, char **argv, struct jaws_config *cfg) {
  unsigned long v;
  cfg->host = "127.0.0.1";
  cfg->port = 8080;
  /* The best over the whole WebSTONE matrix (docs/bench/README.md). */
  cfg->strategy = "adaptive";
  cfg->max_connections = 10000;
  cfg->header_timeout_ms = 10000;
  cfg->idle_timeout_ms = 30000;
  cfg->send_timeout_ms = 5000;
  cfg->cache_bytes = 64u << 20;
  /* A file sent from memory costs a loopback client a third less CPU
   * than one sent from the page cache (README.md, "Files in memory"). */
  cfg->memory_max = 8u << 20;
  cfg->adapt_high = 64;
  cfg->adapt_low = 0; /* 0: half the high mark */
  cfg->adapt_large = 256u << 10;
  cfg->defer_accept_s = 1;
  for (int i = 1; i < argc;) {
    const char *val, *name = argv[i];
    int rc;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return usage(stdout, 0) + 100;
#define OPT(name) ((rc = echo_option(argc, argv, &i, name, &val)) != 0)
    if (OPT("--root")) {
      cfg->root = val;
    } else if (OPT("--host")) {
      cfg->host = val;
    } else if (OPT("--port")) {
      if (rc > 0 && echo_parse_port(val, &cfg->port) != 0) rc = -1;
    } else if (OPT("--strategy")) {
      cfg->strategy = val;
      cfg->strategy_given = true;
      if (rc > 0 && jaws_strategy_find(val) == NULL) {
        fprintf(stderr, "jaws: unknown strategy %s\n", val);
        rc = -1;
      }
    } else if (OPT("--backend")) {
      cfg->backend = val;
    } else if (OPT("--threads")) {
      if (rc > 0 && echo_parse_count(val, 1, 1024, &v) != 0) rc = -1;
      cfg->threads = (unsigned)v;
    } else if (OPT("--max-connections")) {
      if (rc > 0 && echo_parse_count(val, 1, 1000000, &v) != 0) rc = -1;
      cfg->max_connections = (unsigned)v;
    } else if (OPT("--header-timeout")) {
      if (rc > 0 && echo_parse_count(val, 1, 3600000, &v) != 0) rc = -1;
      cfg->header_timeout_ms = (unsigned)v;
    } else if (OPT("--idle-timeout")) {
      if (rc > 0 && echo_parse_count(val, 1, 3600000, &v) != 0) rc = -1;
      cfg->idle_timeout_ms = (unsigned)v;
    } else if (OPT("--send-timeout")) {
      if (rc > 0 && echo_parse_count(val, 1, 3600000, &v) != 0) rc = -1;
      cfg->send_timeout_ms = (unsigned)v;
    } else if (OPT("--dotfiles")) {
      if (rc > 0 && strcmp(val, "allow") == 0)
        cfg->dotfiles = true;
      else if (rc > 0 && strcmp(val, "deny") == 0)
        cfg->dotfiles = false;
      else if (rc > 0)
        rc = -1;
    } else if (OPT("--cache-bytes")) {
      if (rc > 0 && echo_parse_count(val, 0, CACHE_BYTES_MAX, &v) != 0) rc = -1;
      cfg->cache_bytes = (size_t)v;
    } else if (OPT("--memory-max")) {
      if (rc > 0 && echo_parse_count(val, 0, CACHE_BYTES_MAX, &v) != 0) rc = -1;
      cfg->memory_max = (uint64_t)v;
    } else if (OPT("--access-log")) {
      cfg->access_log = val;
    } else if (OPT("--adapt-policy")) {
      if (rc > 0 && strcmp(val, "measure") == 0)
        cfg->adapt_threshold = false;
      else if (rc > 0 && strcmp(val, "threshold") == 0)
        cfg->adapt_threshold = true;
      else if (rc > 0)
        rc = -1;
    } else if (OPT("--adapt-connections")) {
      if (rc > 0 && parse_marks(val, cfg) != 0) rc = -1;
    } else if (OPT("--defer-accept")) {
      if (rc > 0 && echo_parse_count(val, 0, 3600, &v) != 0) rc = -1;
      cfg->defer_accept_s = (unsigned)v;
    } else if (OPT("--tls-cert")) {
      cfg->tls_cert = val;
    } else if (OPT("--tls-key")) {
      cfg->tls_key = val;
    } else if (OPT("--tls-port")) {
      if (rc > 0 && echo_parse_port(val, &cfg->tls_port) != 0) rc = -1;
      cfg->tls_port_given = true;
    } else if (strcmp(argv[i], "--tls-only") == 0) {
      cfg->tls_only = true;
      i++;
      rc = 1;
    } else if (OPT("--adapt-large")) {
      if (rc > 0 && echo_parse_count(val, 1, CACHE_BYTES_MAX, &v) != 0) rc = -1;
      cfg->adapt_large = v;
    } else {
      fprintf(stderr, "jaws: unknown argument %s\n", argv[i]);
      return usage(stderr, 2);
    }
#undef OPT
    if (rc < 0) {
      fprintf(stderr, "jaws: bad value for %s\n", name);
      return usage(stderr, 2);
    }
  }
  if (cfg->adapt_low == 0) cfg->adapt_low = (cfg->adapt_high + 1) / 2;
  if (cfg->backend && jaws_strategy_find(cfg->strategy)->run != jaws_run_io &&
      jaws_strategy_find(cfg->strategy)->run != jaws_run_adaptive) {
    fprintf(stderr, "jaws: --backend applies to the taxi strategies only\n");
    return usage(stderr, 2);
  }
  if (cfg->root == NULL) {
    fprintf(stderr, "jaws: --root is required\n");
    return usage(stderr, 2);
  }
  return check_tls_args(cfg);
}

int main(int argc, char **argv) {
  static struct jaws_server srv; /* signal handlers reach it */
  const struct jaws_strategy *strategy;
  int rc = parse_args(argc, argv, &srv.cfg);
  if (rc) return rc >= 100 ? rc - 100 : rc;
  strategy = jaws_strategy_find(srv.cfg.strategy);
  if (echo_net_init() != 0) {
    fprintf(stderr, "jaws: %s\n", echo_last_error());
    return 1;
  }
  if ((rc = vfs_create(&srv.vfs, srv.cfg.root, srv.cfg.cache_bytes,
                       MAX_ENTRIES)) != 0) {
    fprintf(stderr, "jaws: document root %s: %s\n", srv.cfg.root,
            rc == -1 ? "no such directory" : "cannot be opened");
    return 1;
  }
  vfs_set_dotfiles(srv.vfs, srv.cfg.dotfiles);
  vfs_set_memory_max(srv.vfs, srv.cfg.memory_max);
  /* The files are read now: a bad one stops the start, not a handshake. */
  if (srv.cfg.tls_cert && jaws_tls_create(&srv.cfg, &srv.tls) != 0) {
    vfs_destroy(srv.vfs);
    return 1;
  }
  if (srv.cfg.access_log &&
      (srv.log = access_log_open(srv.cfg.access_log)) == NULL) {
    vfs_destroy(srv.vfs);
    if (srv.tls) taxi_tls_context_unref(srv.tls);
    return 1;
  }
  rc = strategy->run(&srv, strategy);
  if (rc != 0 && srv.no_proactor && !srv.started && !srv.cfg.strategy_given) {
    /* The default needs a Proactor; where none starts, the one strategy
     * that needs nothing but the default readiness backend. */
    fprintf(stderr, "jaws: no proactor here: strategy reactive instead\n");
    srv.cfg.strategy = "reactive";
    strategy = jaws_strategy_find(srv.cfg.strategy);
    rc = strategy->run(&srv, strategy);
  }
  if (srv.started)
    printf("jaws: stopped after %llu requests%s\n",
           (unsigned long long)atomic_load(&srv.requests), srv.stop_note);
  if (srv.tls) taxi_tls_context_unref(srv.tls);
  unsigned long long dropped = access_log_close(srv.log);
  if (dropped)
    fprintf(stderr, "jaws: the access log dropped %llu lines (disk too slow)\n",
            dropped);
  vfs_destroy(srv.vfs);
  echo_net_cleanup();
  return rc;
}
