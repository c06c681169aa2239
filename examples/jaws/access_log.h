/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/access_log.h - the access log in Common Log Format,
 * buffered in memory and written by a thread of its own, so a dispatching
 * thread never waits for the disk: it copies one line under a short lock,
 * and when the buffer is full the line is dropped (and counted).
 */
#ifndef JAWS_ACCESS_LOG_H
#define JAWS_ACCESS_LOG_H

#include <stddef.h>
#include <stdint.h>

struct access_log;

/* Open (append to) `path` and start the writer.  NULL on failure (the
 * reason on stderr). */
struct access_log *access_log_open(const char *path);

/* One request: host - - [date] "request line" status bytes, one line
 * whatever the request held: in host and the request line (its first 512
 * bytes) every byte below 0x20, from 0x7f, '"' and '\' is written as
 * \xHH (nginx's escape=default). */
void access_log_add(struct access_log *log, const char *host,
                    const char *request_line, size_t request_len, int status,
                    uint64_t bytes);

/* Write what is buffered, stop the writer, close the file.  Returns how
 * many lines were dropped. */
uint64_t access_log_close(struct access_log *log);

#endif /* JAWS_ACCESS_LOG_H */
