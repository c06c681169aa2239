/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oltp.h - what the three OLTP programs share: the wire format of
 * requests and replies, the back end's table of accounts, and the
 * command-line plumbing.
 *
 * The tiers are those of the Leader/Followers paper's example: clients
 * send transactions to a front-end communication server, which forwards
 * each to a back-end database server over a few multiplexed connections
 * and relays the reply.  Clients may also talk to the back end directly.
 *
 * Every message is one fixed-size frame of OLTP_FRAME bytes, integers in
 * network (big-endian) order:
 *
 *   request  id:u64  op:u32  from:u32  to:u32  pad:u32  amount:i64  (32)
 *   reply    id:u64  op:u32  status:u32  a:i64  b:i64               (32)
 *
 * `id` is the sender's and comes back in the reply unchanged (the front
 * end puts its own on the back-end connection and restores the client's).
 * Operations:
 *
 *   OLTP_READ      balance of account `from`:         a = balance
 *   OLTP_TRANSFER  move `amount` from `from` to `to`: a, b = the two new
 *                  balances; status OLTP_INSUFFICIENT (nothing moved)
 *                  when `from` holds less than `amount`
 *   OLTP_AUDIT     the sum of all balances:           a = sum, b = count
 *
 * A frame that is not a valid request gets status OLTP_BAD_REQUEST (bad
 * operation, account out of range, negative amount, pad not zero) and the
 * connection stays usable: framing cannot be lost with fixed-size frames.
 */
#ifndef OLTP_H
#define OLTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OLTP_FRAME 32

enum oltp_op { OLTP_READ = 1, OLTP_TRANSFER = 2, OLTP_AUDIT = 3 };

enum oltp_status {
  OLTP_OK = 0,
  OLTP_INSUFFICIENT = 1,
  OLTP_BAD_REQUEST = 2,
  OLTP_UNAVAILABLE = 3 /* the front end lost its back end */
};

struct oltp_request {
  uint64_t id;
  uint32_t op, from, to, pad;
  int64_t amount;
};

struct oltp_reply {
  uint64_t id;
  uint32_t op, status;
  int64_t a, b;
};

void oltp_request_encode(const struct oltp_request *r,
                         unsigned char out[OLTP_FRAME]);
void oltp_request_decode(const unsigned char in[OLTP_FRAME],
                         struct oltp_request *r);
void oltp_reply_encode(const struct oltp_reply *r,
                       unsigned char out[OLTP_FRAME]);
void oltp_reply_decode(const unsigned char in[OLTP_FRAME],
                       struct oltp_reply *r);

/* ---- framing ------------------------------------------------------------ */

/* The frame a connection is receiving: reads end anywhere. */
struct oltp_framer {
  unsigned char frame[OLTP_FRAME];
  size_t have;
};

/* Feed `len` bytes of a connection to its framer, calling fn(arg, frame)
 * for each complete frame, in order, until fn returns non-zero (returned
 * then; the bytes after that frame are dropped).  Returns 0 when every
 * byte was taken. */
int oltp_framer_feed(struct oltp_framer *f, const void *data, size_t len,
                     int (*fn)(void *arg, const unsigned char *frame),
                     void *arg);

/* ---- the table of accounts (the back end's database) -------------------- */

struct oltp_table;

/* A table of `count` accounts holding `initial` each, and `work` units of
 * computation per transaction (the database's own cost: a checksum loop
 * over the account records, 0 for none).  NULL when out of memory. */
struct oltp_table *oltp_table_create(uint32_t count, int64_t initial,
                                     unsigned work);
void oltp_table_destroy(struct oltp_table *t);

/* Run one request against the table; any thread (the accounts locked by
 * stripe, a transfer's two stripes in order, so transfers never
 * deadlock). */
void oltp_table_execute(struct oltp_table *t, const struct oltp_request *req,
                        struct oltp_reply *rep);

/* Transactions executed so far. */
uint64_t oltp_table_transactions(struct oltp_table *t);

/* ---- command lines ------------------------------------------------------ */

struct taxi_io;
struct taxi_stream;

/* What a server does with one complete frame from a connection; a
 * negative return closes the connection. */
typedef int (*oltp_frame_fn)(struct taxi_stream *s, const unsigned char *frame);

/*
 * oltp_serve - listen on host:port (port 0: any) in io and hand every
 * frame of every connection, in order, to fn.  Reading pauses while a
 * read's worth of replies would not fit the connection's output, so a
 * reply as long as its request always finds room.  On success writes the
 * address bound ("H:P") to bound[0..size) and returns 0; else prints why,
 * as `prog`, and returns the taxi error.  One such server per program.
 */
int oltp_serve(struct taxi_io *io, const char *host, unsigned port,
               oltp_frame_fn fn, const char *prog, char *bound, size_t size);

/* Stop io (taxi_io_stop) on SIGINT and SIGTERM - on Windows, on the
 * console's Ctrl-C and Ctrl-Break events - saying on stderr, as `prog`,
 * what cannot be had.  Call before taxi_io_run. */
void oltp_stop_on_signals(struct taxi_io *io, const char *prog);

/* Exit statuses: 2 a bad command line, 3 a configuration the library
 * refuses (as echo_server). */
#define OLTP_EXIT_OK 0
#define OLTP_EXIT_ERROR 1
#define OLTP_EXIT_USAGE 2
#define OLTP_EXIT_REFUSED 3

#endif /* OLTP_H */
