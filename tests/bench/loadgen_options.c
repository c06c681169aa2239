/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen_options.c - the load generator's command line (see loadgen.c for
 * what each option does), parsed with the load generators' cmdline.h.
 */
#include "loadgen.h"

void usage(FILE *out) {
  fprintf(out,
          "usage: loadgen --port P [--host ADDR] [--connections C] "
          "[--threads T]\n"
          "               [--size S] [--duration SEC | --messages M] "
          "[--warmup SEC]\n"
          "               [--time-limit SEC] [--on-measure-start CMD]\n"
          "               [--on-measure-end CMD] [--poller epoll|poll] "
          "[--json]\n"
          "  --port P              the echo server's TCP port\n"
          "  --host ADDR           its address (default 127.0.0.1)\n"
          "  --connections C       concurrent connections (default 64)\n"
          "  --threads T           client threads (default 2)\n"
          "  --size S              bytes per message (default 64)\n"
          "  --duration SEC        measure for SEC seconds (default 5)\n"
          "  --messages M          or measure M round trips in all\n"
          "  --warmup SEC          unmeasured warm-up first (default 1)\n"
          "  --time-limit SEC      give up after SEC seconds in all\n"
          "                        (default: warm-up + duration + 30, or\n"
          "                        warm-up + 300 with --messages)\n"
          "  --on-measure-start CMD  run CMD (sh -c) just before measuring\n"
          "  --on-measure-end CMD    run CMD just after measuring\n"
          "  --poller epoll|poll   how threads wait (default: epoll where it\n"
          "                        exists, else poll)\n"
          "  --json                print the result as one JSON object\n");
}

int parse_args(int argc, char **argv) {
  int i = 1, have_duration = 0, have_limit = 0;
  opt.host = "127.0.0.1";
  opt.port = NULL;
  opt.connections = 64;
  opt.threads = 2;
  opt.size = 64;
  opt.duration = 5;
  opt.warmup = 1;
  opt.messages = 0;
  opt.use_epoll = HAVE_EPOLL;

  while (i < argc) {
    const char *v;
    long n;
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      exit(EXIT_OK);
    }
    if (strcmp(argv[i], "--json") == 0) {
      opt.json = 1;
      i++;
      continue;
    }
    if ((m = cmdline_option("loadgen", argc, argv, &i, "--port", &v)) > 0) {
      if (cmdline_long("loadgen", "--port", v, 1, 65535, &n) < 0) return -1;
      opt.port = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--host", &v)) > 0) {
      opt.host = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--connections", &v)) > 0) {
      if (cmdline_long("loadgen", "--connections", v, 1, MAX_CONNECTIONS,
                       &opt.connections) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--threads", &v)) > 0) {
      if (cmdline_long("loadgen", "--threads", v, 1, MAX_THREADS,
                       &opt.threads) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--size", &v)) > 0) {
      if (cmdline_long("loadgen", "--size", v, 1, MAX_SIZE, &opt.size) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--duration", &v)) > 0) {
      if (cmdline_seconds("loadgen", "--duration", v, 0.001, &opt.duration) < 0)
        return -1;
      have_duration = 1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--messages", &v)) > 0) {
      if (cmdline_long("loadgen", "--messages", v, 1, LONG_MAX, &n) < 0)
        return -1;
      opt.messages = n;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--warmup", &v)) > 0) {
      if (cmdline_seconds("loadgen", "--warmup", v, 0, &opt.warmup) < 0)
        return -1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--time-limit", &v)) > 0) {
      if (cmdline_seconds("loadgen", "--time-limit", v, 0.001,
                          &opt.time_limit) < 0)
        return -1;
      have_limit = 1;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--on-measure-start", &v)) > 0) {
      opt.on_start = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--on-measure-end", &v)) > 0) {
      opt.on_end = v;
    } else if (m == 0 && (m = cmdline_option("loadgen", argc, argv, &i,
                                             "--poller", &v)) > 0) {
      if (strcmp(v, "poll") == 0) {
        opt.use_epoll = 0;
      } else if (strcmp(v, "epoll") == 0 && HAVE_EPOLL) {
        opt.use_epoll = 1;
      } else {
        fprintf(stderr, "loadgen: --poller: '%s' is not available here\n", v);
        return -1;
      }
    } else {
      if (m == 0) fprintf(stderr, "loadgen: unknown argument '%s'\n", argv[i]);
      return -1;
    }
  }
  if (opt.port == NULL) {
    fprintf(stderr, "loadgen: --port is required\n");
    return -1;
  }
  if (have_duration && opt.messages > 0) {
    fprintf(stderr, "loadgen: give --duration or --messages, not both\n");
    return -1;
  }
  if (opt.threads > opt.connections) opt.threads = opt.connections;
  if (!have_limit)
    opt.time_limit =
        opt.warmup + (opt.messages > 0 ? 300.0 : opt.duration) + 30.0;
  return 0;
}
