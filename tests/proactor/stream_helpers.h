/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/stream_helpers.h - what the stream suite's files share:
 * the peers that read or write in a helper thread while the test thread
 * dispatches, and the tests the suite's table (stream.c) lists.
 */
#ifndef TAXI_TESTS_PROACTOR_STREAM_HELPERS_H
#define TAXI_TESTS_PROACTOR_STREAM_HELPERS_H

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Reads `len` bytes from fd and compares them with `expect`, slowly when
 * asked (a short pause every few reads), after `go` is set. */
typedef struct st_reader {
  int fd;
  const unsigned char *expect;
  size_t len;
  size_t chunk;
  int slow;
  atomic_int go;
  atomic_long got; /* bytes read so far */
  long first_bad;  /* index of the first wrong byte, or -1 */
  int failed;      /* error, EOF or time-out before len */
} st_reader_t;

/* Writes `len` bytes of `data` to fd in pieces of 1..max_piece bytes
 * (from `seed`), pausing now and then, so that the other end sees many
 * small segments. */
typedef struct st_writer {
  int fd;
  const unsigned char *data;
  size_t len;
  size_t max_piece;
  uint64_t seed;
  unsigned pause_every; /* pause 1 ms after this many pieces (0: never) */
  int failed;
} st_writer_t;

/* Defined in one of the files, used in others. */
void test_read_some_returns_what_arrived(void);
void test_read_some_pieces(void);
void test_read_exact_byte_at_a_time(void);
void test_read_exact_random_segments(void);
void test_read_exact_random_segments_tcp(void);
void test_reads_in_issue_order(void);
void test_read_some_in_issue_order(void);
void test_read_pending_write_proceeds(void);
void test_handler_restarts_record(void);
void test_big_write(void);
void test_big_write_tcp(void);
void test_gather_write_with_empty_buffers(void);
void test_writes_in_issue_order(void);
void test_eof_read_some(void);
void test_eof_cuts_exact_read(void);
void test_reset_on_read(void);
void test_reset_on_write(void);
void test_write_peer_closed(void);

#endif /* TAXI_TESTS_PROACTOR_STREAM_HELPERS_H */
