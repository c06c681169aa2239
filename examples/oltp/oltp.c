/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oltp.c - the OLTP programs' wire format and the back end's table of
 * accounts (see oltp.h).
 */
#include "oltp.h"

#include <taxi/taxi.h>

#ifdef _WIN32
#include <windows.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static void put64(unsigned char *p, uint64_t v) {
  put32(p, (uint32_t)(v >> 32));
  put32(p + 4, (uint32_t)v);
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static uint64_t get64(const unsigned char *p) {
  return (uint64_t)get32(p) << 32 | get32(p + 4);
}

void oltp_request_encode(const struct oltp_request *r,
                         unsigned char out[OLTP_FRAME]) {
  put64(out, r->id);
  put32(out + 8, r->op);
  put32(out + 12, r->from);
  put32(out + 16, r->to);
  put32(out + 20, r->pad);
  put64(out + 24, (uint64_t)r->amount);
}

void oltp_request_decode(const unsigned char in[OLTP_FRAME],
                         struct oltp_request *r) {
  r->id = get64(in);
  r->op = get32(in + 8);
  r->from = get32(in + 12);
  r->to = get32(in + 16);
  r->pad = get32(in + 20);
  r->amount = (int64_t)get64(in + 24);
}

void oltp_reply_encode(const struct oltp_reply *r,
                       unsigned char out[OLTP_FRAME]) {
  put64(out, r->id);
  put32(out + 8, r->op);
  put32(out + 12, r->status);
  put64(out + 16, (uint64_t)r->a);
  put64(out + 24, (uint64_t)r->b);
}

void oltp_reply_decode(const unsigned char in[OLTP_FRAME],
                       struct oltp_reply *r) {
  r->id = get64(in);
  r->op = get32(in + 8);
  r->status = get32(in + 12);
  r->a = (int64_t)get64(in + 16);
  r->b = (int64_t)get64(in + 24);
}

int oltp_framer_feed(struct oltp_framer *f, const void *data, size_t len,
                     int (*fn)(void *arg, const unsigned char *frame),
                     void *arg) {
  const unsigned char *p = data;
  while (len > 0) {
    size_t take = OLTP_FRAME - f->have;
    if (take > len) take = len;
    memcpy(f->frame + f->have, p, take);
    f->have += take;
    p += take;
    len -= take;
    if (f->have < OLTP_FRAME) break;
    f->have = 0;
    int rc = fn(arg, f->frame);
    if (rc != 0) return rc;
  }
  return 0;
}

/* ---- the table ---------------------------------------------------------- */

/* Accounts are locked by stripe: account i by stripe i % OLTP_STRIPES.
 * Transfers of different stripes never meet, and an audit holds a bounded
 * number of locks however many accounts there are (a thread holding
 * thousands of mutexes is more than lock checkers follow). */
#define OLTP_STRIPES 32

struct account {
  int64_t balance;
};

struct oltp_table {
  struct account *accounts;
  uint32_t count;
  unsigned work;
  pthread_mutex_t stripes[OLTP_STRIPES];
  atomic_ullong transactions; /* no shared lock per transaction */
};

static pthread_mutex_t *stripe_of(struct oltp_table *t, uint32_t account) {
  return &t->stripes[account % OLTP_STRIPES];
}

struct oltp_table *oltp_table_create(uint32_t count, int64_t initial,
                                     unsigned work) {
  struct oltp_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->accounts = calloc(count ? count : 1, sizeof *t->accounts);
  if (!t->accounts) {
    free(t);
    return NULL;
  }
  t->count = count;
  t->work = work;
  for (uint32_t i = 0; i < OLTP_STRIPES; i++)
    pthread_mutex_init(&t->stripes[i], NULL);
  for (uint32_t i = 0; i < count; i++) t->accounts[i].balance = initial;
  return t;
}

void oltp_table_destroy(struct oltp_table *t) {
  if (!t) return;
  for (uint32_t i = 0; i < OLTP_STRIPES; i++)
    pthread_mutex_destroy(&t->stripes[i]);
  free(t->accounts);
  free(t);
}

/* The database's own cost of a transaction: a checksum over the record,
 * kept from the optimiser by its use in the reply's padding check. */
static uint32_t busy_work(unsigned work, uint64_t seed) {
  uint32_t h = (uint32_t)seed | 1u;
  for (unsigned i = 0; i < work * 64u; i++) h = h * 2654435761u + (h >> 13);
  return h;
}

static int64_t audit(struct oltp_table *t) {
  int64_t sum = 0;
  /* Every stripe, in order: the sum is of one moment, with no transfer
   * half done. */
  for (uint32_t i = 0; i < OLTP_STRIPES; i++)
    pthread_mutex_lock(&t->stripes[i]);
  for (uint32_t i = 0; i < t->count; i++) sum += t->accounts[i].balance;
  for (uint32_t i = OLTP_STRIPES; i-- > 0;)
    pthread_mutex_unlock(&t->stripes[i]);
  return sum;
}

static void transfer(struct oltp_table *t, const struct oltp_request *req,
                     struct oltp_reply *rep) {
  struct account *from = &t->accounts[req->from], *to = &t->accounts[req->to];
  /* The two stripes in stripe order, so that transfers never deadlock. */
  uint32_t sf = req->from % OLTP_STRIPES, st = req->to % OLTP_STRIPES;
  pthread_mutex_t *first = stripe_of(t, sf < st ? req->from : req->to);
  pthread_mutex_t *second = stripe_of(t, sf < st ? req->to : req->from);
  pthread_mutex_lock(first);
  if (second != first) pthread_mutex_lock(second);
  if (from->balance < req->amount) {
    rep->status = OLTP_INSUFFICIENT;
  } else {
    from->balance -= req->amount;
    to->balance += req->amount;
  }
  rep->a = from->balance;
  rep->b = to->balance;
  if (second != first) pthread_mutex_unlock(second);
  pthread_mutex_unlock(first);
}

void oltp_table_execute(struct oltp_table *t, const struct oltp_request *req,
                        struct oltp_reply *rep) {
  rep->id = req->id;
  rep->op = req->op;
  rep->status = OLTP_OK;
  rep->a = rep->b = 0;
  bool accounts_ok = req->from < t->count && req->to < t->count;
  if (req->pad != 0 || (req->op != OLTP_AUDIT && !accounts_ok) ||
      (req->op == OLTP_TRANSFER && req->amount < 0)) {
    rep->status = OLTP_BAD_REQUEST;
    return;
  }
  if (t->work && busy_work(t->work, req->id) == 0) rep->b = 1; /* never */
  switch (req->op) {
    case OLTP_READ: {
      pthread_mutex_t *lock = stripe_of(t, req->from);
      pthread_mutex_lock(lock);
      rep->a = t->accounts[req->from].balance;
      pthread_mutex_unlock(lock);
      break;
    }
    case OLTP_TRANSFER:
      transfer(t, req, rep);
      break;
    case OLTP_AUDIT:
      rep->a = audit(t);
      rep->b = t->count;
      break;
    default:
      rep->status = OLTP_BAD_REQUEST;
      return;
  }
  atomic_fetch_add(&t->transactions, 1);
}

uint64_t oltp_table_transactions(struct oltp_table *t) {
  return atomic_load(&t->transactions);
}

/* ---- serving frames ----------------------------------------------------- */

/* Who takes the frames: one server per program. */
static oltp_frame_fn served_fn;

static int served_frame(void *arg, const unsigned char *frame) {
  return served_fn(arg, frame);
}

static void served_read(taxi_stream_t *s, int status, const void *data,
                        size_t len) {
  if (status < 0)
    taxi_stream_end(s);
  else if (oltp_framer_feed(taxi_stream_data(s), data, len, served_frame, s) <
           0)
    taxi_stream_close(s);
}

static void served_close(taxi_stream_t *s, int status) {
  (void)status;
  free(taxi_stream_data(s));
}

static void served_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  struct oltp_framer *f = calloc(1, sizeof *f); /* per connection */
  if (!f) {
    taxi_stream_close(s);
    return;
  }
  taxi_stream_set_data(s, f);
  taxi_stream_on_close(s, served_close);
  taxi_stream_read_start(s, served_read);
}

int oltp_serve(struct taxi_io *io, const char *host, unsigned port,
               oltp_frame_fn fn, const char *prog, char *bound, size_t size) {
  char address[300];
  snprintf(address, sizeof address, strchr(host, ':') ? "[%s]:%u" : "%s:%u",
           host, port);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.flags = TAXI_STREAM_PAUSE_READING | TAXI_STREAM_NODELAY;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  lo.stream = &so;
  taxi_listener_t *l;
  taxi_addr_t a;
  served_fn = fn;
  int rc = taxi_listener_create(&l, io, address, &lo, served_accept, NULL);
  if (rc == 0) rc = taxi_listener_address(l, &a);
  if (rc == 0) rc = taxi_addr_format(&a, bound, size) < 0 ? TAXI_EINVAL : 0;
  if (rc < 0)
    fprintf(stderr, "%s: cannot listen on %s: %s\n", prog, address,
            taxi_strerror(rc));
  return rc;
}

/* ---- stopping ----------------------------------------------------------- */

#ifdef _WIN32
/* Windows has no SIGINT for taxi to deliver: the console's control
 * events come in a thread of their own, and taxi_io_stop may be called
 * from any thread. */
static taxi_io_t *stop_io;

static BOOL WINAPI on_console(DWORD type) {
  (void)type;
  if (stop_io) taxi_io_stop(stop_io);
  return TRUE; /* handled: the process is not ended for us */
}

void oltp_stop_on_signals(struct taxi_io *io, const char *prog) {
  stop_io = io;
  if (!SetConsoleCtrlHandler(on_console, TRUE))
    fprintf(stderr, "%s: no orderly stop on Ctrl-C\n", prog);
}
#else
static void on_signal(taxi_io_t *io, int signo, void *arg) {
  (void)signo;
  (void)arg;
  taxi_io_stop(io);
}

void oltp_stop_on_signals(struct taxi_io *io, const char *prog) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++) {
    int rc = taxi_io_on_signal(io, stop_signals[i], on_signal, NULL);
    if (rc < 0)
      fprintf(stderr, "%s: no orderly stop on signal %d: %s\n", prog,
              stop_signals[i], taxi_strerror(rc));
  }
}
#endif
