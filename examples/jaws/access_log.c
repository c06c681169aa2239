/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/access_log.c - the buffered access log (access_log.h): two
 * buffers, one filled by the dispatching threads under a lock, the other
 * written by the writer thread without it; they swap when the writer
 * wakes (a line arrived in an empty buffer, or every 200 ms).
 */
#define _POSIX_C_SOURCE 200809L

#include "access_log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jaws_os.h"

#define BUFFER_BYTES (256 * 1024)
/* A line: the peer's address, the date, the request line (its first
 * REQUEST_MAX_BYTES, each byte escaped at worst as four), the status and
 * the bytes. */
#define REQUEST_MAX_BYTES 512
#define HOST_MAX_BYTES 256
#define TAIL_BYTES 40 /* '"', the status, the bytes, the newline */
#define LINE_MAX_BYTES \
  (HOST_MAX_BYTES + 64 + 4 * REQUEST_MAX_BYTES + TAIL_BYTES)

struct access_log {
  FILE *file;
  pthread_t writer;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  char *fill, *drain; /* BUFFER_BYTES each */
  size_t used;
  bool closing;
  uint64_t dropped;
};

static void *writer_main(void *arg) {
  struct access_log *log = arg;
  pthread_mutex_lock(&log->lock);
  for (;;) {
    while (log->used == 0 && !log->closing)
      pthread_cond_wait(&log->wake, &log->lock);
    if (log->used == 0 && log->closing) break;
    char *full = log->fill;
    size_t n = log->used;
    log->fill = log->drain;
    log->drain = full;
    log->used = 0;
    pthread_mutex_unlock(&log->lock);
    fwrite(full, 1, n, log->file);
    fflush(log->file);
    pthread_mutex_lock(&log->lock);
  }
  pthread_mutex_unlock(&log->lock);
  return NULL;
}

struct access_log *access_log_open(const char *path) {
  struct access_log *log = calloc(1, sizeof *log);
  if (log == NULL) return NULL;
  log->fill = malloc(BUFFER_BYTES);
  log->drain = malloc(BUFFER_BYTES);
  log->file = fopen(path, "a");
  if (log->file == NULL) perror(path);
  if (log->file == NULL || log->fill == NULL || log->drain == NULL) goto fail;
  pthread_mutex_init(&log->lock, NULL);
  pthread_cond_init(&log->wake, NULL);
  /* The writer takes no signals (see jaws_thread_start). */
  int rc = jaws_thread_start(&log->writer, writer_main, log);
  if (rc != 0) {
    fprintf(stderr, "jaws: cannot start the access log's writer\n");
    pthread_mutex_destroy(&log->lock);
    pthread_cond_destroy(&log->wake);
    goto fail;
  }
  return log;
fail:
  if (log->file) fclose(log->file);
  free(log->fill);
  free(log->drain);
  free(log);
  return NULL;
}

/* Append src[n] to out[*used..cap), every byte a reader of the log could
 * take for something else as \xHH, as nginx's escape=default does: those
 * below 0x20 (a newline would forge a line), 0x7f and above (a terminal
 * reads C1 bytes such as 0x9b as controls; UTF-8 such as U+202E reverses
 * the text shown), '"' (it would end the field) and '\' (so that an
 * escape is always one).  Stops before a byte whose escape would not fit
 * whole: a cut line is still one a parser reads. */
static void escape(char *out, size_t *used, size_t cap, const char *src,
                   size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  size_t u = *used;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)src[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      if (u + 1 > cap) break;
      out[u++] = (char)c;
    } else {
      if (u + 4 > cap) break;
      out[u++] = '\\';
      out[u++] = 'x';
      out[u++] = hex[c >> 4];
      out[u++] = hex[c & 15];
    }
  }
  *used = u;
}

void access_log_add(struct access_log *log, const char *host,
                    const char *request_line, size_t request_len, int status,
                    uint64_t bytes) {
  static const char *const months[] = {"Jan", "Feb", "Mar", "Apr",
                                       "May", "Jun", "Jul", "Aug",
                                       "Sep", "Oct", "Nov", "Dec"};
  char line[LINE_MAX_BYTES];
  struct tm tm;
  time_t now = time(NULL);
  size_t n = 0;
  gmtime_r(&now, &tm);
  if (request_len > REQUEST_MAX_BYTES) request_len = REQUEST_MAX_BYTES;
  if (request_line == NULL) {
    request_line = "-";
    request_len = 1;
  }
  /* The fields as they go, each bounded: what follows them always fits
   * (TAIL_BYTES). */
  escape(line, &n, HOST_MAX_BYTES, host, strlen(host));
  n += (size_t)snprintf(line + n, sizeof line - n,
                        " - - [%02d/%s/%04d:%02d:%02d:%02d +0000] \"",
                        tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
                        tm.tm_hour, tm.tm_min, tm.tm_sec);
  escape(line, &n, sizeof line - TAIL_BYTES, request_line, request_len);
  n += (size_t)snprintf(line + n, sizeof line - n, "\" %d %llu\n", status,
                        (unsigned long long)bytes);
  pthread_mutex_lock(&log->lock);
  if (log->used + n > BUFFER_BYTES) {
    log->dropped++;
  } else {
    memcpy(log->fill + log->used, line, n);
    if (log->used == 0) pthread_cond_signal(&log->wake);
    log->used += n;
  }
  pthread_mutex_unlock(&log->lock);
}

uint64_t access_log_close(struct access_log *log) {
  uint64_t dropped;
  if (log == NULL) return 0;
  pthread_mutex_lock(&log->lock);
  log->closing = true;
  pthread_cond_signal(&log->wake);
  pthread_mutex_unlock(&log->lock);
  pthread_join(log->writer, NULL);
  dropped = log->dropped;
  fclose(log->file);
  pthread_mutex_destroy(&log->lock);
  pthread_cond_destroy(&log->wake);
  free(log->fill);
  free(log->drain);
  free(log);
  return dropped;
}
