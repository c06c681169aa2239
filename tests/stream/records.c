/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/records.c - the write queue's records and ring over many
 * rounds: a queue that empties starts again where it likes (stream.c keeps
 * it beside the stream's other hot bytes), and must still hold exactly
 * max_writes records, wrap in order, and tell each write's callback once,
 * in order, with its length.  And a write into an empty queue, which a
 * readiness driver sends at once (stream_write.c), where the socket takes
 * only part of it: the rest queued, and every byte out in order.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Rounds of the conversation, and the records of the stream (the queue is
 * filled to exactly that many each round). */
#define REC_ROUNDS 40
#define REC_MAX 3
#define REC_LEN 4 /* bytes of each write: "A07;" */

struct records {
  atomic_int round;      /* rounds the server has answered */
  atomic_int done;       /* write callbacks run */
  atomic_int out_of_seq; /* a callback out of order, or its length wrong */
  atomic_int bad_status; /* a callback told a failure */
  atomic_int refused;    /* writes past the records refused (TAXI_ENOBUFS) */
  atomic_int wrong_rc;   /* a write that should have been queued was not */
  atomic_int counted;    /* writes_no_record as the stream counted them */
  /* The bytes of the zero-copy writes, alive until their callbacks. */
  char ref[REC_ROUNDS][REC_LEN];
};

/* The REC_LEN bytes of write `tag` (A, B, C) of round k (< 100). */
static void rec_text(char *out, char tag, int k) {
  out[0] = tag;
  out[1] = (char)('0' + k / 10);
  out[2] = (char)('0' + k % 10);
  out[3] = ';';
}

static void rec_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct records *r = taxi_stream_data(s);
  int want = (int)(intptr_t)arg;
  if (status != 0) atomic_fetch_add(&r->bad_status, 1);
  if (atomic_fetch_add(&r->done, 1) != want || bytes != REC_LEN)
    atomic_fetch_add(&r->out_of_seq, 1);
}

/* Each byte from the peer is a round: the queue is filled with REC_MAX
 * writes (copy, zero-copy, copy: each with a callback, so none joins
 * another), and one more is refused for want of a record.  All of them
 * are queued here, in the read callback, and sent by the round's write
 * step: the queue holds REC_MAX records at once every round. */
static void rec_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  struct records *r = taxi_stream_data(s);
  (void)data;
  if (status < 0) {
    taxi_stream_close(s);
    return;
  }
  for (size_t i = 0; i < len; i++) {
    int k = atomic_load(&r->round);
    if (k >= REC_ROUNDS) break;
    char text[REC_LEN];
    int base = k * REC_MAX;
    rec_text(text, 'A', k);
    if (taxi_stream_write(s, text, REC_LEN, rec_done, (void *)(intptr_t)base))
      atomic_fetch_add(&r->wrong_rc, 1);
    rec_text(r->ref[k], 'B', k);
    if (taxi_stream_write_ref(s, r->ref[k], REC_LEN, rec_done,
                              (void *)(intptr_t)(base + 1)))
      atomic_fetch_add(&r->wrong_rc, 1);
    rec_text(text, 'C', k);
    if (taxi_stream_write(s, text, REC_LEN, rec_done,
                          (void *)(intptr_t)(base + 2)))
      atomic_fetch_add(&r->wrong_rc, 1);
    if (taxi_stream_write(s, "X", 1, rec_done, NULL) == TAXI_ENOBUFS)
      atomic_fetch_add(&r->refused, 1);
    taxi_stream_counters_t sc;
    if (taxi_stream_counters(s, &sc) == 0)
      atomic_store(&r->counted, (int)sc.writes_no_record);
    atomic_fetch_add(&r->round, 1);
  }
}

static void rec_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  taxi_stream_set_data(s, arg);
  taxi_stream_read_start(s, rec_read);
}

static void test_records_reused_in_order(void) {
  st_io_t c;
  static struct records r;
  memset(&r, 0, sizeof r);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.max_writes = REC_MAX;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, rec_accept, &r, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  int bad_rounds = 0;
  for (int k = 0; k < REC_ROUNDS; k++) {
    /* One round at a time: the next byte goes once the last round's
     * callbacks have run, so the queue is empty when the round begins
     * (under a Proactor the bytes may arrive before the stream has taken
     * the completion of their send). */
    if (!util_wait_flag(&r.done, k * REC_MAX, 10000)) {
      bad_rounds++;
      break;
    }
    char want[REC_MAX * REC_LEN], got[REC_MAX * REC_LEN];
    rec_text(want, 'A', k);
    rec_text(want + REC_LEN, 'B', k);
    rec_text(want + 2 * REC_LEN, 'C', k);
    if (net_send_all(fd, "g", 1) != 0 ||
        net_recv_all(fd, got, sizeof got) != 0 ||
        memcmp(got, want, sizeof got) != 0) {
      bad_rounds++;
      break;
    }
  }
  CU_ASSERT_EQUAL(bad_rounds, 0);
  CU_ASSERT(util_wait_flag(&r.done, REC_ROUNDS * REC_MAX, 10000));
  CU_ASSERT_EQUAL(atomic_load(&r.round), REC_ROUNDS);
  CU_ASSERT_EQUAL(atomic_load(&r.done), REC_ROUNDS * REC_MAX);
  CU_ASSERT_EQUAL(atomic_load(&r.out_of_seq), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.bad_status), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.wrong_rc), 0);
  /* Every round, the write past REC_MAX records was refused, and counted
   * as such: the queue holds max_writes records wherever it starts. */
  CU_ASSERT_EQUAL(atomic_load(&r.refused), REC_ROUNDS);
  CU_ASSERT_EQUAL(atomic_load(&r.counted), REC_ROUNDS);
  close(fd);
  st_io_destroy(&c);
}

/* ---- a write the socket takes only part of --------------------------------
 */

#define PART_LEN 20000
#define PART_N 3

struct part {
  atomic_int ready;    /* the writes were made */
  atomic_int wrong_rc; /* a write refused */
  unsigned char data[PART_N * PART_LEN];
};

/* Small send buffer, a peer that is not reading: the first write of the
 * read callback, into an empty queue, is sent at once and the socket
 * takes only part of it; the rest and the next two writes are queued
 * behind it.  Then the stream ends once they are out. */
static void part_read(taxi_stream_t *s, int status, const void *data,
                      size_t len) {
  struct part *p = taxi_stream_data(s);
  (void)data;
  (void)len;
  if (status < 0 || atomic_load(&p->ready)) return;
  for (int i = 0; i < PART_N; i++)
    if (taxi_stream_write(s, p->data + i * PART_LEN, PART_LEN, NULL, NULL))
      atomic_fetch_add(&p->wrong_rc, 1);
  taxi_stream_end(s);
  atomic_store(&p->ready, 1);
}

static void part_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct part *p = arg;
  (void)l;
  int small = 4096;
  int fd = (int)taxi_stream_handle(s);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) != 0)
    atomic_fetch_add(&p->wrong_rc, 1);
  taxi_stream_set_data(s, p);
  taxi_stream_read_start(s, part_read);
}

static void test_write_partly_sent_rest_queued(void) {
  st_io_t c;
  static struct part p;
  memset(&p, 0, sizeof p);
  for (size_t i = 0; i < sizeof p.data; i++) p.data[i] = st_byte(11, i);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = PART_N * PART_LEN; /* the ring holds all of them */
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, part_accept, &p, NULL);
  st_io_run(&c);
  /* A small receive window too, so that the bytes stay in the server's
   * socket until this side reads. */
  int fd = st_connect_rcvbuf(port, 4096);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(net_send_all(fd, "g", 1), 0);
  CU_ASSERT(util_wait_flag(&p.ready, 1, 10000));
  static unsigned char got[PART_N * PART_LEN + 1];
  long n = st_recv_to_eof(fd, got, sizeof got);
  CU_ASSERT_EQUAL(n, (long)sizeof p.data);
  CU_ASSERT(n == (long)sizeof p.data &&
            memcmp(got, p.data, sizeof p.data) == 0);
  CU_ASSERT_EQUAL(atomic_load(&p.wrong_rc), 0);
  close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_records[] = {
    {"write records: a full queue every round, in order, max_writes exact",
     test_records_reused_in_order},
    {"a write the socket takes only part of: the rest queued, all in order",
     test_write_partly_sent_rest_queued},
    CU_TEST_INFO_NULL,
};
