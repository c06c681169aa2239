/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen_report.c - the load generator's result: the counts of every
 * thread summed, the rate over the measured window, the latencies, one
 * human line and with --json one JSON object (see loadgen.c).
 */
#include "loadgen.h"

int report(struct client_thread *threads, struct conn *conns,
           struct histogram *total, const struct run_times *rt, int failed) {
  struct thread_stats sum;
  double seconds, rate;
  unsigned long long errors;
  FILE *human;
  long i;

  memset(&sum, 0, sizeof sum);
  for (i = 0; i < opt.threads; i++) {
    struct client_thread *t = &threads[i];
    if (t->hist) hist_merge(total, t->hist);
    sum.messages += t->st.messages;
    sum.in_window += t->st.in_window;
    sum.warmup_messages += t->st.warmup_messages;
    sum.mismatches += t->st.mismatches;
    sum.resets += t->st.resets;
    sum.io_errors += t->st.io_errors;
    sum.resends += t->st.resends;
    sum.stale += t->st.stale;
    free(t->pfds);
    free(t->hist);
#if HAVE_EPOLL
    if (t->epfd >= 0) close(t->epfd);
    free(t->events);
#endif
  }
  for (i = 0; i < opt.connections; i++)
    if (conns[i].fd >= 0) close(conns[i].fd);

  if (opt.messages > 0 || rt->stop == 0) {
    seconds = rt->end > rt->start ? (double)(rt->end - rt->start) / 1e9 : 0;
    rate = seconds > 0 ? (double)sum.messages / seconds : 0;
  } else {
    seconds = (double)(rt->stop - rt->start) / 1e9;
    rate = seconds > 0 ? (double)sum.in_window / seconds : 0;
  }
  errors = (unsigned long long)(sum.mismatches + sum.resets + sum.io_errors +
                                (unsigned)failed);
  if (errors) failed = 1;

  human = opt.json ? stderr : stdout;
  fprintf(human,
          "loadgen: %ld conns x %ld B, %ld threads: %.2f s, %llu msgs, "
          "%.0f msgs/s; latency us p50 %.1f p99 %.1f p999 %.1f max %.1f; "
          "errors %llu\n",
          opt.connections, opt.size, opt.threads, seconds,
          (unsigned long long)sum.messages, rate,
          hist_quantile(total, 0.50) / 1e3, hist_quantile(total, 0.99) / 1e3,
          hist_quantile(total, 0.999) / 1e3, (double)total->max / 1e3, errors);
  if (opt.udp)
    fprintf(human,
            "loadgen: udp: %llu datagrams sent again, %llu late echoes\n",
            (unsigned long long)sum.resends, (unsigned long long)sum.stale);
  if (opt.json) {
    printf("{\"host\":");
    json_string(stdout, opt.host);
    printf(
        ",\"port\":%s,\"connections\":%ld,\"threads\":%ld,\"size\":%ld,"
        "\"connect_s\":%.3f,\"warmup_s\":%.3f,\"duration_s\":%.6f,"
        "\"messages\":%llu,"
        "\"window_messages\":%llu,"
        "\"warmup_messages\":%llu,\"msgs_per_s\":%.1f,"
        "\"mean_us\":%.2f,\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,"
        "\"p999_us\":%.2f,\"max_us\":%.2f,\"errors\":%llu,"
        "\"mismatches\":%llu,\"resets\":%llu,\"io_errors\":%llu,"
        "\"resends\":%llu,\"stale\":%llu,\"ok\":%s}\n",
        opt.port, opt.connections, opt.threads, opt.size, rt->connect_seconds,
        opt.warmup, seconds, (unsigned long long)sum.messages,
        (unsigned long long)sum.in_window,
        (unsigned long long)sum.warmup_messages, rate,
        total->total ? (double)total->sum / (double)total->total / 1e3 : 0.0,
        hist_quantile(total, 0.50) / 1e3, hist_quantile(total, 0.90) / 1e3,
        hist_quantile(total, 0.99) / 1e3, hist_quantile(total, 0.999) / 1e3,
        (double)total->max / 1e3, errors, (unsigned long long)sum.mismatches,
        (unsigned long long)sum.resets, (unsigned long long)sum.io_errors,
        (unsigned long long)sum.resends, (unsigned long long)sum.stale,
        failed ? "false" : "true");
  }
  fflush(stdout);
  return failed;
}
