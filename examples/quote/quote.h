/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote.h - the stock quote service of Schmidt and Vinoski's thread-pool
 * column, written once: its wire format, its quote table, and the one
 * function every concurrency model of quote_server calls to answer a
 * request.  Nothing here knows about sockets or threads, so each model
 * serves the same protocol byte for byte, and quote_client computes the
 * answer it expects with the same function.
 *
 * The column's C servers exchange a struct Quote_Request (recv_request)
 * and a long stock value (send_response) without printing their layout;
 * here they are fixed-size records in network byte order:
 *
 *   request, QUOTE_REQUEST_SIZE (36) bytes:
 *     0..3   symbol length L, unsigned 32-bit big-endian, 1 to 32
 *     4..35  the symbol: L bytes of A-Z 0-9 '.' '-', then zero bytes
 *
 *   reply, QUOTE_REPLY_SIZE (8) bytes:
 *     0..3   status, unsigned 32-bit big-endian (QUOTE_OK, ...)
 *     4..7   price in cents, signed 32-bit big-endian; -1 unless QUOTE_OK
 *            (the column's lookup_stock_price returns -1 for "no such
 *            stock")
 *
 * Every request gets exactly one reply, in order.  A request that breaks
 * the format (L out of range, a byte outside the alphabet, padding that is
 * not zero) gets QUOTE_MALFORMED; since requests have a fixed size, the
 * next one is still found and the connection stays usable.  A connection
 * that ends inside a request gets no reply for it.
 *
 * The quote table is read from a text file (examples/quote/quotes.txt):
 * one "SYMBOL PRICE" per line, PRICE a decimal with at most two digits
 * after the point (0 to 21474836.47); blank lines and lines starting with
 * '#' are skipped; a symbol appears once.  After loading, the table is
 * only read, so the pool threads look it up without a lock (the column's
 * database takes a readers/writer lock because it may change).
 */
#ifndef QUOTE_H
#define QUOTE_H

#include <stddef.h>
#include <stdint.h>

#define QUOTE_REQUEST_SIZE 36
#define QUOTE_REPLY_SIZE 8
#define QUOTE_SYMBOL_MAX 32

/* Reply statuses. */
#define QUOTE_OK 0        /* the price follows */
#define QUOTE_UNKNOWN 1   /* well-formed, but not in the table */
#define QUOTE_MALFORMED 2 /* the request breaks the format */

/* Most symbols a table holds. */
#define QUOTE_TABLE_MAX 100000

struct quote_entry {
  char symbol[QUOTE_SYMBOL_MAX + 1];
  int32_t cents;
};

/* The table, sorted by symbol. */
struct quote_table {
  struct quote_entry *entries;
  size_t count;
};

/*
 * quote_table_load - read `path` into *t (the only allocation of this
 * module).  Returns 0, or -1 after writing why ("quotes.txt:12: bad
 * price") into err (err_size bytes).
 */
int quote_table_load(struct quote_table *t, const char *path, char *err,
                     size_t err_size);

/* quote_table_free - release what quote_table_load took. */
void quote_table_free(struct quote_table *t);

/* quote_lookup - the price of `symbol` (len bytes) in cents, or -1. */
int32_t quote_lookup(const struct quote_table *t, const char *symbol,
                     size_t len);

/*
 * quote_answer - write into reply the answer to the complete request in
 * req (QUOTE_REQUEST_SIZE bytes).  Returns the status it wrote.
 */
unsigned quote_answer(const struct quote_table *t, const unsigned char *req,
                      unsigned char *reply);

/*
 * quote_answer_all - answer every complete request in in[0 .. len) into
 * out (room for len / QUOTE_REQUEST_SIZE replies).  Returns the number of
 * requests answered; the len % QUOTE_REQUEST_SIZE bytes left over are the
 * start of the next request (need more).
 */
size_t quote_answer_all(const struct quote_table *t, const unsigned char *in,
                        size_t len, unsigned char *out);

/* quote_request_make - encode a well-formed request for symbol (len
 * bytes; more than QUOTE_SYMBOL_MAX are cut). */
void quote_request_make(unsigned char *req, const char *symbol, size_t len);

/* quote_request_raw - a request with length field `length` and the given
 * symbol bytes, valid or not (for testing the error reply). */
void quote_request_raw(unsigned char *req, uint32_t length, const char *bytes,
                       size_t len);

#endif /* QUOTE_H */
