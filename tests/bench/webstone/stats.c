/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.c - the web load generator's numbers: latency histograms (the
 * log-linear kind tests/bench/loadgen.c uses: fixed size, no allocation per
 * request), merging the threads' counts and the report, a human line and,
 * with --json, one JSON line.
 *
 * Throughput is the paper's client-side one: bits received per second,
 * counting the status line and headers as well as the body, every byte
 * received while measuring, over the measurement window.  The per-request
 * figure (bits of one response over the time from the start of its request
 * - connect included when it opens a connection - until the connection is
 * closed or ready for the next request) is its average, as WebSTONE's.
 */
#include "webstone.h"

#include "../json.h"

#include <string.h>

const char *const ws_error_names[WS_ERR_COUNT] = {
    "connect refused", "reset",       "timeout",    "bad status",
    "short body",      "wrong bytes", "other error"};

static const char *const json_names[WS_ERR_COUNT] = {
    "refused",    "reset",       "timeout", "bad_status",
    "short_body", "wrong_bytes", "other"};

void ws_stats_merge(struct ws_stats *into, const struct ws_stats *s) {
  size_t i;
  into->requests += s->requests;
  into->bytes += s->bytes;
  into->body_bytes += s->body_bytes;
  into->connects += s->connects;
  into->warmup_requests += s->warmup_requests;
  into->reconnects += s->reconnects;
  into->handshakes += s->handshakes;
  into->resumed += s->resumed;
  into->rate_sum += s->rate_sum;
  into->unfinished += s->unfinished;
  if (s->last_done > into->last_done) into->last_done = s->last_done;
  if (s->unfinished_max_ns > into->unfinished_max_ns)
    into->unfinished_max_ns = s->unfinished_max_ns;
  for (i = 0; i < WS_ERR_COUNT; i++) into->errors[i] += s->errors[i];
  hist_merge(&into->first_byte, &s->first_byte);
  hist_merge(&into->last_byte, &s->last_byte);
}

uint64_t ws_stats_errors(const struct ws_stats *s) {
  uint64_t n = 0;
  size_t i;
  for (i = 0; i < WS_ERR_COUNT; i++) n += s->errors[i];
  return n;
}

void ws_report(FILE *human, const struct ws_stats *s, double seconds,
               int failed) {
  double bps = seconds > 0 ? (double)s->bytes * 8.0 / seconds : 0;
  double rps = seconds > 0 ? (double)s->requests / seconds : 0;
  double per_req = s->requests ? s->rate_sum / (double)s->requests : 0;
  const struct histogram *fb = &s->first_byte, *lb = &s->last_byte;
  char what[32];
  uint64_t errors = ws_stats_errors(s);
  size_t i;

  if (ws_opt.size > 0)
    snprintf(what, sizeof what, "%ld B", ws_opt.size);
  else
    snprintf(what, sizeof what, "mix");
  fprintf(human,
          "webstone: %s, %ld clients, %ld threads, %s: %.2f s, %llu requests, "
          "%.0f req/s, %.2f Mbit/s received (headers+body), %.3f Mbit/s per "
          "request; first byte ms mean %.3f p50 %.3f p99 %.3f; last byte ms "
          "mean %.3f p50 %.3f p99 %.3f; unfinished %llu (oldest %.0f ms); "
          "errors %llu\n",
          what, ws_opt.clients, ws_opt.threads,
          ws_opt.keep_alive ? "keep-alive" : "close", seconds,
          (unsigned long long)s->requests, rps, bps / 1e6, per_req / 1e6,
          hist_mean(fb) / 1e6, hist_quantile(fb, 0.5) / 1e6,
          hist_quantile(fb, 0.99) / 1e6, hist_mean(lb) / 1e6,
          hist_quantile(lb, 0.5) / 1e6, hist_quantile(lb, 0.99) / 1e6,
          (unsigned long long)s->unfinished, (double)s->unfinished_max_ns / 1e6,
          (unsigned long long)errors);
  if (ws_opt.tls)
    fprintf(human,
            "webstone: TLS: %llu handshakes (%.0f/s), %llu of them resumed\n",
            (unsigned long long)s->handshakes,
            seconds > 0 ? (double)s->handshakes / seconds : 0,
            (unsigned long long)s->resumed);
  if (errors) {
    fprintf(human, "webstone: errors:");
    for (i = 0; i < WS_ERR_COUNT; i++)
      if (s->errors[i])
        fprintf(human, " %s %llu", ws_error_names[i],
                (unsigned long long)s->errors[i]);
    fputc('\n', human);
  }
  if (!ws_opt.json) return;
  printf("{\"host\":");
  json_string(stdout, ws_opt.host);
  printf(",\"port\":%s,\"clients\":%ld,\"threads\":%ld,\"file\":", ws_opt.port,
         ws_opt.clients, ws_opt.threads);
  json_string(stdout, what);
  printf(
      ",\"keep_alive\":%s,\"warmup_s\":%.3f,"
      "\"duration_s\":%.6f,\"requests\":%llu,\"warmup_requests\":%llu,"
      "\"connects\":%llu,\"reconnects\":%llu,\"bytes\":%llu,"
      "\"body_bytes\":%llu,\"reqs_per_s\":%.1f,\"bits_per_s\":%.0f,"
      "\"per_request_bits_per_s\":%.0f,"
      "\"first_byte_mean_ms\":%.4f,\"first_byte_p50_ms\":%.4f,"
      "\"first_byte_p99_ms\":%.4f,\"last_byte_mean_ms\":%.4f,"
      "\"last_byte_p50_ms\":%.4f,\"last_byte_p99_ms\":%.4f,"
      "\"last_byte_max_ms\":%.4f,\"unfinished\":%llu,"
      "\"unfinished_oldest_ms\":%.1f,\"errors\":%llu",
      ws_opt.keep_alive ? "true" : "false", ws_opt.warmup, seconds,
      (unsigned long long)s->requests, (unsigned long long)s->warmup_requests,
      (unsigned long long)s->connects, (unsigned long long)s->reconnects,
      (unsigned long long)s->bytes, (unsigned long long)s->body_bytes, rps, bps,
      per_req, hist_mean(fb) / 1e6, hist_quantile(fb, 0.5) / 1e6,
      hist_quantile(fb, 0.99) / 1e6, hist_mean(lb) / 1e6,
      hist_quantile(lb, 0.5) / 1e6, hist_quantile(lb, 0.99) / 1e6,
      (double)lb->max / 1e6, (unsigned long long)s->unfinished,
      (double)s->unfinished_max_ns / 1e6, (unsigned long long)errors);
  for (i = 0; i < WS_ERR_COUNT; i++)
    printf(",\"%s\":%llu", json_names[i], (unsigned long long)s->errors[i]);
  printf(",\"tls\":%s,\"handshakes\":%llu,\"resumed\":%llu",
         ws_opt.tls ? "true" : "false", (unsigned long long)s->handshakes,
         (unsigned long long)s->resumed);
  printf(",\"ok\":%s}\n", failed ? "false" : "true");
  fflush(stdout);
}
