/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_impl.h - a stream's state: its write records, flags,
 * pending events, and the stream itself, laid out for the data path.
 * Included by core/stream/io_impl.h, whose head says how the wing's files
 * call one another; include that one.
 */
#ifndef TAXI_CORE_STREAM_IMPL_H
#define TAXI_CORE_STREAM_IMPL_H

#include "core/stream/io_impl.h"

/* One queued write. */
enum { TAXI__W_COPY = 1, TAXI__W_REF = 2, TAXI__W_FILE = 3 };
typedef struct taxi__wrec {
  int kind;
  taxi_handle_t file;       /* FILE (beside kind: 64 bytes, not 72) */
  size_t off;               /* COPY: offset of its first byte in the ring */
  size_t len, done;         /* bytes in all, bytes sent */
  const unsigned char *ptr; /* REF */
  int64_t foff;             /* FILE: offset of its first byte */
  taxi_stream_done_fn fn;
  void *arg;
} taxi__wrec_t;

/* The longest file a stream sends corked (see cork_locked in stream.c). */
#define TAXI__CORK_MAX ((size_t)1 << 20)

/* Arrivals of a pooled read a stream keeps without allocating; more
 * (the reads of a stream that fell behind, before its multishot read
 * stops) grow its ring. */
#define TAXI__RQ_INLINE 8

/* Stream flags (s->flags). */
#define TAXI__S_BUSY 0x0001u       /* a thread processes the stream */
#define TAXI__S_KICKED 0x0002u     /* a kick is on its way */
#define TAXI__S_CONNECTING 0x0004u /* connect not over */
#define TAXI__S_READING 0x0008u    /* read_start active */
#define TAXI__S_READ_INTO 0x0010u  /* a read_into pending */
#define TAXI__S_PAUSED 0x0020u     /* reading paused for backpressure */
#define TAXI__S_EOF 0x0040u        /* the socket reported end of stream */
#define TAXI__S_EOF_TOLD 0x0080u   /* read_fn was told */
#define TAXI__S_SHUT_REQ 0x0100u   /* shutdown asked for */
#define TAXI__S_SHUT_DONE 0x0200u
#define TAXI__S_CLOSE_REQ 0x0400u    /* close asked for (or an error) */
#define TAXI__S_CLOSING 0x0800u      /* torn down; waiting for release */
#define TAXI__S_RELEASED 0x1000u     /* no dispatcher event can come */
#define TAXI__S_DEAD 0x2000u         /* the close callback has run */
#define TAXI__S_NEED_DRAIN 0x4000u   /* tell drain_fn at the low watermark */
#define TAXI__S_WFAIL 0x8000u        /* the head write failed (its error) */
#define TAXI__S_END_REQ 0x10000u     /* close once flushed and shut down */
#define TAXI__S_DETACH 0x20000u      /* closing by taxi_stream_detach */
#define TAXI__S_OWE_WRITES 0x40000u  /* write callbacks told at the release */
#define TAXI__S_CORKED 0x80000u      /* corked while a file is queued */
#define TAXI__S_NOCORK 0x100000u     /* the socket takes no cork */
#define TAXI__S_PIPE_DRAIN 0x200000u /* tell pipe_dst at the low watermark */
/* Connecting to a host name (core/stream/stream_dial.c): no socket yet
 * (fd is TAXI_INVALID_HANDLE, keep_handle set), the driver has nothing
 * to watch but its kicks and deadline; s->dial races the addresses. */
#define TAXI__S_DIALING 0x400000u
#define TAXI__S_UNLINKED 0x800000u /* off the context's list already */
/* A TLS stream's filter (core/stream/stream_tls.c) needs bytes from the
 * socket whether the application reads or not (a handshake), or has
 * ciphertext to send whether writes are queued or not: the driver
 * watches for them as it does for reads and queued writes. */
#define TAXI__S_TLS_IN 0x1000000u
#define TAXI__S_TLS_OUT 0x2000000u
/* A read callback of the stream is running (deliver_locked in stream.c):
 * a write into an empty queue meanwhile is sent at once (stream_write.c,
 * send_now_locked). */
#define TAXI__S_IN_READ 0x4000000u

/* A private bit of s->oflags: a stream the library makes for itself (an
 * attempt of a dial), not counted in the context's stream and connect
 * counters, which count the application's streams. */
#define TAXI__STREAM_QUIET 0x80000000u

/* Events (s->pending). */
#define TAXI__P_WORK 0x01u     /* the application changed something */
#define TAXI__P_READABLE 0x02u /* reactive: the handle is readable */
#define TAXI__P_WRITABLE 0x04u /* reactive: writable (or connected) */
#define TAXI__P_DEADLINE 0x08u /* the deadline timer fired or ended */
#define TAXI__P_KICK 0x10u     /* a kick arrived */
#define TAXI__P_RELEASED 0x20u /* the dispatcher is done with it */
#define TAXI__P_HUP 0x40u      /* reactive: reported with a hang-up or error */
/* A write was queued (and nothing else changed): the write step of the
 * round in progress sends it if it has not begun yet (see round_locked in
 * stream.c), so a read callback's echo costs no round of its own. */
#define TAXI__P_WROTE 0x80u

struct taxi_stream {
  /* First what the data path does not read: the life of the stream, and
   * what few streams use. */
  size_t block; /* bytes of its block: the stream and its buffers */
  taxi_stream_t *prev, *next; /* in io->streams, under io->lock */
  int reason;                 /* why it closes */
  int conn_err;
  unsigned refs; /* taxi_stream_ref */
  void *data;
  taxi_stream_close_fn close_fn;
  taxi_stream_drain_fn drain_fn;
  taxi_stream_timeout_fn timeout_fn;
  taxi_stream_connect_fn connect_fn;
  void *connect_arg;
  /* taxi_stream_detach: written once, before the teardown, under the lock;
   * keep_handle is read by the drivers' teardown and close hooks. */
  taxi_stream_detach_fn detach_fn;
  void *detach_arg;
  bool keep_handle;
  /* The library made the descriptor (accepted or connected it) and its
   * number was never handed out (taxi_stream_handle clears it): no other
   * descriptor shares its socket, so closing it is the socket's end - the
   * FIN goes out, and every epoll set forgets it.  Under the lock. */
  bool own_fd;
  /* Set under the lock before the teardown (own_fd and not keep_handle),
   * read by the driver's teardown: what the close will end. */
  bool close_ends_socket;
  /* read_into */
  unsigned char *ri_buf;
  size_t ri_len, ri_done;
  unsigned ri_flags;
  taxi_stream_done_fn ri_fn;
  void *ri_arg;
  taxi_time_t connect_to, t_connect;
  taxi_addr_t peer;
  /* Connecting to a host name (S_DIALING): the race of the addresses,
   * and when its next step is due (0: none); under the lock. */
  struct taxi__dial *dial;
  const taxi__dial_ops_t *dial_ops;
  taxi_time_t dial_at;
  /* The pipe that reads this stream, and the one that writes into it
   * (taxi_stream_pipe), under the lock: the reading is the pipe's while
   * it runs. */
  taxi__pipe_t *pipe_src, *pipe_dst;
  const taxi__pipe_ops_t *pipe_ops;

  /* What a round of the data path reads and writes (an event, a read
   * delivered, a write queued and sent), in a few cache lines of their
   * own, followed by the driver's part (d), whose fields of every event
   * come first.  With a thousand streams served in turn, each message
   * otherwise costs a cache miss for each line touched, and the kernel's
   * socket data evicts them in between. */
  taxi__mutex_t lock;
  taxi_io_t *io;
  const taxi__stream_ops_t *ops;
  unsigned flags, pending;
  taxi_handle_t fd;
  unsigned oflags; /* options and timeouts */
  /* Its context's TAXI_IO_ONE_THREAD: no lock taken (taxi__stream_lock).
   * Set when it is made, never changed. */
  bool one_thread;
  /* A TLS stream's filter (core/stream/stream_tls.c), NULL for a plain
   * one; under the lock, freed once the close callback has run. */
  struct taxi__tls *tls;
  taxi__post_queue_t posts; /* taxi_stream_post, not yet run */
  taxi_stream_read_fn read_fn;
  /* the read buffer: bytes read and not yet delivered are
   * rdata[rpos .. rpos + rlen), where rdata is rbuf or a buffer the
   * driver lent (io_proactive.c: a buffer of the proactor's pool) */
  unsigned char *rbuf, *rdata;
  size_t rcap, rpos, rlen;
  /* the output ring: bytes queued are wbuf[whead ..) mod wcap, wused */
  unsigned char *wbuf;
  size_t wcap, whead, wused, low;
  /* The write records, a ring of nrecs from rhead.  An empty ring starts
   * again at its last record, which lies next to wbuf's start (see
   * stream.c's consume_locked). */
  taxi__wrec_t *recs;
  unsigned nrecs, rhead, rcount;
  unsigned wfiles; /* FILE records among them, of TAXI__CORK_MAX or less */
  taxi_time_t idle_to, read_to, write_to;
  taxi_time_t t_active, t_read, t_write, armed;
  /* taxi_stream_counters: atomics, read by any thread without the lock,
   * written under it (TAXI__S_COUNT), but for hook_overlaps. */
  struct {
    atomic_ullong bytes_in, bytes_out, reads, writes, writes_refused,
        writes_no_record, read_pauses, hook_overlaps;
  } cnt;

  /* The driver's part, last: a stream's block holds the stream only up to
   * the end of its driver's member (the driver's stream_size), so that a
   * reactive stream does not carry a proactive one's four operations
   * (some 4 KiB) between its fields and its buffers. */
  union {
    struct {
      /* The fields of every event first, the handler and the timers
       * (touched when armed) after them. */
      unsigned interest;
      bool registered, attached, suspended, readable, writable, wblocked;
      /* Edge-triggered (taxi__reactor_drains_edge): the peer hung up or
       * the socket failed, so a short receive does not prove it drained
       * (the end of the stream is still to be read); and the receives
       * made since the socket was last found drained, for the bound on
       * one round's reading (s_read). */
      bool hup;
      unsigned burst;
      /* 1 while a thread runs the stream's reactor hooks: a second
       * entry meanwhile counts in cnt.hook_overlaps (which stays 0). */
      atomic_uint in_hook;
      taxi_handler_t h;
      taxi_timer_t kick, deadline;
    } r;
    struct {
      taxi_proactor_t *px; /* the proactor it is attached to */
      taxi_op_t rop, wop, kop, top;
      unsigned inflight;
      bool attached, r_busy, r_done, w_busy, w_done, k_busy, t_busy;
      int r_status, w_status;
      size_t r_bytes, w_bytes;
      taxi_time_t t_deadline;
      /* Pooled reads (io_proactive.c): rop is one multishot read into
       * the proactor's pool; its arrivals wait in rq (a ring of rq_cap,
       * at first rq_inline) until a round takes them.  r_lent: the
       * buffer rdata points at; r_cancel: a cancel of rop was asked;
       * r_end: rop ended with r_status, told once rq is empty; r_heap:
       * r_lent is a block of the detach's own; r_kept: arrivals copied
       * to the start of rbuf while not reading (io_pooled.c). */
      bool pooled, r_cancel, r_end, r_heap;
      unsigned char *r_lent;
      size_t r_kept;
      struct taxi__pooled_arrival {
        unsigned char *data;
        size_t len;
      } rq_inline[TAXI__RQ_INLINE], *rq;
      unsigned rq_cap, rq_head, rq_count;
    } p;
  } d;
};

/* The bytes of a stream whose driver uses member `m` of its union d (a
 * driver's stream_size). */
#define TAXI__STREAM_SIZE(m) \
  (offsetof(taxi_stream_t, d) + sizeof(((taxi_stream_t *)0)->d.m))

#endif /* TAXI_CORE_STREAM_IMPL_H */
