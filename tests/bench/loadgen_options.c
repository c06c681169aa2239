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
          "[--mode echo|cec|udp]\n"
          "               [--json]\n"
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
          "  --mode echo|cec|udp   echo: round trips over connections kept\n"
          "                        open (default); cec: each round trip on\n"
          "                        a connection of its own: connect, echo,\n"
          "                        close; udp: each connection a UDP socket\n"
          "                        (--port the server's UDP port), each\n"
          "                        message one datagram\n"
          "  --json                print the result as one JSON object\n");
}

int parse_args(int argc, char **argv) {
  int i = 1, have_duration = 0, have_limit = 0;
  long messages = 0;
  const char *poller = NULL, *mode = NULL;
  const cmdline_spec_t specs[] = {
      {"--port", CMDLINE_PORT, &opt.port, 0, 0, 0, NULL},
      {"--host", CMDLINE_TEXT, &opt.host, 0, 0, 0, NULL},
      {"--connections", CMDLINE_LONG, &opt.connections, 1, MAX_CONNECTIONS, 0,
       NULL},
      {"--threads", CMDLINE_LONG, &opt.threads, 1, MAX_THREADS, 0, NULL},
      {"--size", CMDLINE_LONG, &opt.size, 1, MAX_SIZE, 0, NULL},
      {"--duration", CMDLINE_SECONDS, &opt.duration, 0, 0, 0.001,
       &have_duration},
      {"--messages", CMDLINE_LONG, &messages, 1, LONG_MAX, 0, NULL},
      {"--warmup", CMDLINE_SECONDS, &opt.warmup, 0, 0, 0, NULL},
      {"--time-limit", CMDLINE_SECONDS, &opt.time_limit, 0, 0, 0.001,
       &have_limit},
      {"--on-measure-start", CMDLINE_TEXT, &opt.on_start, 0, 0, 0, NULL},
      {"--on-measure-end", CMDLINE_TEXT, &opt.on_end, 0, 0, 0, NULL},
      {"--poller", CMDLINE_TEXT, &poller, 0, 0, 0, NULL},
      {"--mode", CMDLINE_TEXT, &mode, 0, 0, 0, NULL},
  };
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
    m = cmdline_table("loadgen", argc, argv, &i, specs,
                      sizeof specs / sizeof specs[0]);
    if (m < 0) return -1;
    if (m == 0) {
      fprintf(stderr, "loadgen: unknown argument '%s'\n", argv[i]);
      return -1;
    }
  }
  opt.messages = messages;
  if (poller && strcmp(poller, "poll") == 0) {
    opt.use_epoll = 0;
  } else if (poller && (strcmp(poller, "epoll") != 0 || !HAVE_EPOLL)) {
    fprintf(stderr, "loadgen: --poller: '%s' is not available here\n", poller);
    return -1;
  } else if (poller) {
    opt.use_epoll = 1;
  }
  if (mode && strcmp(mode, "cec") == 0) {
    opt.cec = 1;
  } else if (mode && strcmp(mode, "udp") == 0) {
    opt.udp = 1;
  } else if (mode && strcmp(mode, "echo") != 0) {
    fprintf(stderr, "loadgen: --mode: '%s' is not echo, cec or udp\n", mode);
    return -1;
  }
  /* The largest UDP payload over IPv4. */
  if (opt.udp && opt.size > 65507) {
    fprintf(stderr, "loadgen: --size: at most 65507 with --mode udp\n");
    return -1;
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
