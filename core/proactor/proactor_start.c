/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_start.c - layer 4, starting operations: validate
 * the call, fill the caller's record, queue it behind the older operations
 * of its handle and direction, and give it to the backend if it is the
 * head (later heads are the loop's to submit).
 *
 * It calls the loop (proactor_dispatch.c: follow-ons, wake-ups), the
 * submission and completion layers and the table (see the layering in
 * core/proactor/proactor_impl.h).
 *
 * Every check that can refuse the call runs before the record is written,
 * so a refused call leaves the record exactly as it was (a record in
 * flight elsewhere must not be disturbed).
 */
#include "config.h"

#include "core/proactor/proactor_groups.h"
#include "core/proactor/proactor_impl.h"
#include "core/proactor/proactor_op.h"
#include "core/common/detail.h"
#include "core/common/time_math.h"

#include <inttypes.h>
#include <string.h>

/* Everything a start needs to know, gathered while validating. */
typedef struct start {
  taxi_op_kind_t kind;
  taxi_handle_t handle;
  unsigned dir; /* TAXI__DIR_* */
  unsigned flags;
  taxi_completion_fn fn;
  void *act;
} start_t;

/* The public function that starts what s describes, for the details of
 * its refusals. */
static const char *start_name(const start_t *s) {
  switch (s->kind) {
    case TAXI_OP_ACCEPT:
      return "taxi_proactor_accept";
    case TAXI_OP_CONNECT:
      return "taxi_proactor_connect";
    case TAXI_OP_READ:
      return s->flags & TAXI__READ_POOLED ? "taxi_proactor_read_pooled"
                                          : "taxi_proactor_read";
    case TAXI_OP_WRITE:
      return "taxi_proactor_write";
    case TAXI_OP_READ_FILE:
      return "taxi_proactor_read_file";
    case TAXI_OP_WRITE_FILE:
      return "taxi_proactor_write_file";
    case TAXI_OP_TRANSMIT_FILE:
      return "taxi_proactor_transmit_file";
    case TAXI_OP_TIMER:
      return "taxi_proactor_timer";
    case TAXI_OP_RECVFROM:
      return s->flags & TAXI__READ_POOLED ? "taxi_proactor_recvfrom_pooled"
                                          : "taxi_proactor_recvfrom";
    case TAXI_OP_SENDTO:
      return "taxi_proactor_sendto";
    default:
      return "taxi_proactor_post";
  }
}

/* The checks every start makes once the lock is held: the proactor is
 * alive, the record is free, the handle is attached. */
static int admit_locked(taxi_proactor_t *p, const taxi_op_t *op,
                        const start_t *s, uint32_t *row) {
  if (p->destroying) return TAXI_ESTOPPED;
  if ((taxi__op_state_load(op) & TAXI__OP_STATE) != TAXI__OP_IDLE)
    return taxi__refuse(op->internal_.proactor == p ? TAXI_EBUSY : TAXI_EINVAL,
                        "%s: op: in flight (started and not yet completed) "
                        "on %s proactor",
                        start_name(s),
                        op->internal_.proactor == p ? "this" : "another");
  if (s->dir == TAXI__DIR_NONE) return 0;
  if (taxi__handle_map_get(&p->map, s->handle, row) < 0) return TAXI_ENOENT;
  /* A multishot read or receive holds its handle's input until it ends:
   * anything queued behind it would never run. */
  const taxi_op_t *cur = p->rows[*row].dir[TAXI__DIR_IN - 1].cur;
  if (s->dir == TAXI__DIR_IN && cur &&
      (cur->kind == TAXI_OP_READ || cur->kind == TAXI_OP_RECVFROM) &&
      (cur->internal_.flags & TAXI_READ_MULTISHOT))
    return taxi__refuse(TAXI_EBUSY,
                        "%s: h: a multishot read holds its input until it "
                        "ends (cancel it first)",
                        start_name(s));
  return 0;
}

/* Write the common part of the record. */
static void fill(taxi_proactor_t *p, taxi_op_t *op, const start_t *s) {
  op->kind = s->kind;
  op->handle = s->handle;
  op->accepted = TAXI_INVALID_HANDLE;
  op->peer_len = 0;
  op->more = 0;
  op->data = NULL;
  op->msg_flags = 0;
  op->internal_.proactor = p;
  op->internal_.next = NULL;
  op->internal_.fn = s->fn;
  op->internal_.act = s->act;
  op->internal_.flags = s->flags;
  op->internal_.dir = s->dir;
  op->internal_.status = 0;
  op->internal_.nbufs = 0;
  op->internal_.total = 0;
  op->internal_.done = 0;
  op->internal_.file = TAXI_INVALID_HANDLE;
  op->internal_.offset = 0;
  op->internal_.file_len = 0;
  op->internal_.deadline = 0;
  op->internal_.heap_index = TAXI__NO_ROW;
  op->internal_.addr_len = 0;
  taxi__op_state_store(op, TAXI__OP_IDLE);
}

/* Queue a filled record on its handle; submit it if it is the head. */
static void enqueue_locked(taxi_proactor_t *p, taxi_op_t *op, uint32_t row) {
  taxi__pdir_t *d = &p->rows[row].dir[op->internal_.dir - 1];
  op->internal_.heap_index = row;
  p->stats.started++;
  if (d->cur) {
    taxi__op_set_phase(op, TAXI__OP_QUEUED);
    taxi__opq_push(&d->wait, op);
    return;
  }
  d->cur = op;
  int rc = taxi__proactor_submit_or_pause_locked(p, op);
  if (rc < 0) taxi__proactor_complete_locked(p, op, rc);
}

/* The shape shared by the I/O starts: admit, let `setup` write the
 * kind-specific fields, queue. */
typedef void (*setup_fn)(taxi_op_t *op, const void *arg);

static int start_io(taxi_proactor_t *p, taxi_op_t *op, const start_t *s,
                    setup_fn setup, const void *arg) {
  uint32_t row = 0;
  taxi__mutex_lock(&p->lock);
  int rc = admit_locked(p, op, s, &row);
  if (rc == 0) {
    /* A socket connected through the proactor is one of its own (see the
     * backends' adopt), from before the connect is submitted. */
    if (s->kind == TAXI_OP_CONNECT) taxi__proactor_adopt_locked(p, s->handle);
    fill(p, op, s);
    setup(op, arg);
    enqueue_locked(p, op, row);
    taxi__proactor_follow_ons_locked(p);
    taxi__proactor_kick_locked(p);
  }
  taxi__mutex_unlock(&p->lock);
  return rc;
}

static bool common_ok(const taxi_proactor_t *p, const taxi_op_t *op,
                      taxi_completion_fn fn) {
  return p && op && fn;
}

/* ---- accept, connect ---------------------------------------------------- */

static void setup_none(taxi_op_t *op, const void *arg) {
  (void)op;
  (void)arg;
}

int taxi_proactor_accept(taxi_proactor_t *p, taxi_op_t *op,
                         taxi_handle_t listener, unsigned flags,
                         taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || (flags & ~TAXI_ACCEPT_MULTISHOT))
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_ACCEPT, listener, TAXI__DIR_IN, flags, fn, act};
  return start_io(p, op, &s, setup_none, NULL);
}

typedef struct addr_arg {
  const void *addr;
  size_t len;
} addr_arg_t;

static void setup_connect(taxi_op_t *op, const void *arg) {
  const addr_arg_t *a = arg;
  memcpy(op->internal_.addr, a->addr, a->len);
  op->internal_.addr_len = (uint32_t)a->len;
}

int taxi_proactor_connect(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                          const void *addr, size_t addr_len,
                          taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || !addr || addr_len == 0 ||
      addr_len > sizeof op->internal_.addr)
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_CONNECT, h, TAXI__DIR_OUT, 0, fn, act};
  addr_arg_t a = {addr, addr_len};
  return start_io(p, op, &s, setup_connect, &a);
}

/* ---- streams ------------------------------------------------------------ */

typedef struct one_buf {
  void *base;
  size_t len;
  int64_t offset;
} one_buf_t;

static void setup_one(taxi_op_t *op, const void *arg) {
  const one_buf_t *b = arg;
  op->internal_.bufs[0].base = b->base;
  op->internal_.bufs[0].len = b->len;
  op->internal_.nbufs = 1;
  op->internal_.total = b->len;
  op->internal_.offset = b->offset;
}

int taxi_proactor_read(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                       void *buf, size_t len, unsigned flags,
                       taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || !buf || len == 0 || (flags & ~TAXI_READ_EXACT))
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_READ, h, TAXI__DIR_IN, flags, fn, act};
  one_buf_t b = {buf, len, 0};
  return start_io(p, op, &s, setup_one, &b);
}

static void setup_pooled(taxi_op_t *op, const void *arg) {
  const taxi_proactor_t *p = arg;
  /* The buffer comes with the submission (core chooses) or the
   * completion (the backend does).  A datagram's only with a multishot
   * receive, whose layout the backend unpacks (dgram_unpack). */
  if (p->bufs->native &&
      (op->kind == TAXI_OP_READ ||
       ((op->internal_.flags & TAXI_READ_MULTISHOT) && p->ops->dgram_unpack)))
    op->internal_.flags |= TAXI__READ_SELECT;
}

int taxi_proactor_read_pooled(taxi_proactor_t *p, taxi_op_t *op,
                              taxi_handle_t h, unsigned flags,
                              taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || (flags & ~TAXI_READ_MULTISHOT) || !p->bufs)
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_READ, h,  TAXI__DIR_IN, flags | TAXI__READ_POOLED,
               fn,           act};
  return start_io(p, op, &s, setup_pooled, p);
}

int taxi_proactor_recvfrom_pooled(taxi_proactor_t *p, taxi_op_t *op,
                                  taxi_handle_t h, unsigned flags,
                                  taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || (flags & ~TAXI_READ_MULTISHOT) || !p->bufs)
    return taxi__refuse(TAXI_EINVAL, "taxi_proactor_recvfrom_pooled: %s",
                        !common_ok(p, op, fn) ? "p, op or fn: NULL"
                        : !p->bufs            ? "p: no buffer pool"
                                              : "flags: unknown bits");
  start_t s = {TAXI_OP_RECVFROM,          h,  TAXI__DIR_IN,
               flags | TAXI__READ_POOLED, fn, act};
  return start_io(p, op, &s, setup_pooled, p);
}

int taxi__proactor_recvfrom_group(taxi_proactor_t *p, taxi_op_t *op,
                                  taxi_handle_t h, unsigned group,
                                  taxi_completion_fn fn, void *act) {
  /* A group once made stays until the proactor is destroyed. */
  bool made = false;
  if (p && group > 0 && group < TAXI__BUF_GROUPS) {
    taxi__mutex_lock(&p->lock);
    made = p->dgroups[group] != NULL;
    taxi__mutex_unlock(&p->lock);
  }
  if (!common_ok(p, op, fn) || !made)
    return taxi__refuse(
        TAXI_EINVAL, "taxi_proactor_recvfrom_pooled: %s",
        !common_ok(p, op, fn) ? "p, op or fn: NULL" : "group: not made");
  /* The backend chooses from the group (it was made only where it
   * does), and unpacks the multishot receive's layout. */
  start_t s = {TAXI_OP_RECVFROM,
               h,
               TAXI__DIR_IN,
               TAXI_READ_MULTISHOT | TAXI__READ_POOLED | TAXI__READ_SELECT |
                   (group << TAXI__READ_GROUP_SHIFT),
               fn,
               act};
  return start_io(p, op, &s, setup_none, NULL);
}

typedef struct gather {
  const taxi_buf_t *bufs;
  size_t n, total;
} gather_t;

static void setup_gather(taxi_op_t *op, const void *arg) {
  const gather_t *g = arg;
  memcpy(op->internal_.bufs, g->bufs, g->n * sizeof *g->bufs);
  op->internal_.nbufs = (unsigned)g->n;
  op->internal_.total = g->total;
}

int taxi_proactor_write(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                        const taxi_buf_t *bufs, size_t nbufs,
                        taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || !bufs || nbufs == 0 || nbufs > TAXI_OP_MAX_BUFS)
    return TAXI_EINVAL;
  size_t total = 0;
  for (size_t i = 0; i < nbufs; i++) {
    if (bufs[i].len && !bufs[i].base) return TAXI_EINVAL;
    if (bufs[i].len > SIZE_MAX - total) return TAXI_EINVAL;
    total += bufs[i].len;
  }
  if (total == 0) return TAXI_EINVAL;
  start_t s = {TAXI_OP_WRITE, h, TAXI__DIR_OUT, 0, fn, act};
  gather_t g = {bufs, nbufs, total};
  return start_io(p, op, &s, setup_gather, &g);
}

/* ---- datagrams ---------------------------------------------------------- */

typedef struct dgram_arg {
  void *base;
  size_t len;
  const void *addr;
  size_t addr_len;
} dgram_arg_t;

/* One buffer, sent or received whole (a datagram is never resumed: done
 * stays 0 until the completion), and the destination, if any, where a
 * connect keeps its address. */
static void setup_dgram(taxi_op_t *op, const void *arg) {
  const dgram_arg_t *a = arg;
  op->internal_.bufs[0].base = a->base;
  op->internal_.bufs[0].len = a->len;
  op->internal_.nbufs = 1;
  op->internal_.total = a->len;
  if (a->addr_len) memcpy(op->internal_.addr, a->addr, a->addr_len);
  op->internal_.addr_len = (uint32_t)a->addr_len;
}

int taxi_proactor_recvfrom(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                           void *buf, size_t len, taxi_completion_fn fn,
                           void *act) {
  if (!common_ok(p, op, fn) || !buf || len == 0)
    return taxi__refuse(TAXI_EINVAL, "taxi_proactor_recvfrom: %s",
                        !p     ? "p: NULL"
                        : !op  ? "op: NULL"
                        : !fn  ? "fn: NULL"
                        : !buf ? "buf: NULL"
                               : "len: 0");
  start_t s = {TAXI_OP_RECVFROM, h, TAXI__DIR_IN, 0, fn, act};
  dgram_arg_t a = {buf, len, NULL, 0};
  return start_io(p, op, &s, setup_dgram, &a);
}

int taxi_proactor_sendto(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                         const void *buf, size_t len, const void *addr,
                         size_t addr_len, taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || (!buf && len))
    return taxi__refuse(TAXI_EINVAL, "taxi_proactor_sendto: %s",
                        !p    ? "p: NULL"
                        : !op ? "op: NULL"
                        : !fn ? "fn: NULL"
                              : "buf: NULL");
  if (!addr != !addr_len || addr_len > sizeof op->internal_.addr)
    return taxi__refuse(TAXI_EINVAL, "taxi_proactor_sendto: addr_len: %s",
                        addr_len > sizeof op->internal_.addr
                            ? "above 128"
                            : "0 with an address, or an address of 0 bytes");
  start_t s = {TAXI_OP_SENDTO, h, TAXI__DIR_OUT, 0, fn, act};
  dgram_arg_t a = {(void *)(uintptr_t)buf, len, addr, addr_len};
  return start_io(p, op, &s, setup_dgram, &a);
}

/* ---- files -------------------------------------------------------------- */

static bool range_ok(size_t len, int64_t offset) {
  return offset >= 0 && (uint64_t)len <= (uint64_t)(INT64_MAX - offset);
}

int taxi_proactor_read_file(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                            void *buf, size_t len, int64_t offset,
                            taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || !buf || len == 0 || !range_ok(len, offset))
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_READ_FILE, h, TAXI__DIR_IN, 0, fn, act};
  one_buf_t b = {buf, len, offset};
  return start_io(p, op, &s, setup_one, &b);
}

int taxi_proactor_write_file(taxi_proactor_t *p, taxi_op_t *op, taxi_handle_t h,
                             const void *buf, size_t len, int64_t offset,
                             taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn) || !buf || len == 0 || !range_ok(len, offset))
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_WRITE_FILE, h, TAXI__DIR_OUT, 0, fn, act};
  one_buf_t b = {(void *)(uintptr_t)buf, len, offset};
  return start_io(p, op, &s, setup_one, &b);
}

typedef struct transmit {
  taxi_handle_t file;
  int64_t offset;
  size_t file_len;
  taxi_buf_t header, trailer;
} transmit_t;

static void setup_transmit(taxi_op_t *op, const void *arg) {
  const transmit_t *t = arg;
  op->internal_.file = t->file;
  op->internal_.offset = t->offset;
  op->internal_.file_len = t->file_len;
  op->internal_.bufs[TAXI__OP_HEADER] = t->header;
  op->internal_.bufs[TAXI__OP_TRAILER] = t->trailer;
  op->internal_.nbufs = 0;
  op->internal_.total = t->header.len + t->file_len + t->trailer.len;
}

/* A header or trailer: NULL or empty is none; bytes must exist. */
static bool part_ok(const taxi_buf_t *b, taxi_buf_t *out) {
  out->base = NULL;
  out->len = 0;
  if (!b || b->len == 0) return true;
  if (!b->base) return false;
  *out = *b;
  return true;
}

/* The file range: [offset, offset + len) within the file, len 0 meaning
 * up to its end.  The size is looked up now, at the call, as promised. */
static int file_range(taxi_handle_t file, int64_t offset, size_t len,
                      size_t *out) {
  int64_t size;
  if (offset < 0) return TAXI_EINVAL;
  int rc = taxi__file_size(file, &size);
  if (rc < 0) return rc == TAXI_EBADF ? TAXI_EINVAL : rc;
  if (offset > size) return TAXI_EINVAL;
  uint64_t avail = (uint64_t)(size - offset);
  if (len == 0) {
    if (avail > SIZE_MAX / 2) return TAXI_EINVAL;
    *out = (size_t)avail;
    return 0;
  }
  if ((uint64_t)len > avail) return TAXI_EINVAL;
  *out = len;
  return 0;
}

int taxi_proactor_transmit_file(taxi_proactor_t *p, taxi_op_t *op,
                                taxi_handle_t sock, taxi_handle_t file,
                                int64_t offset, size_t len,
                                const taxi_buf_t *header,
                                const taxi_buf_t *trailer,
                                taxi_completion_fn fn, void *act) {
  transmit_t t = {file, offset, 0, {NULL, 0}, {NULL, 0}};
  if (!common_ok(p, op, fn) || file == TAXI_INVALID_HANDLE ||
      !part_ok(header, &t.header) || !part_ok(trailer, &t.trailer))
    return TAXI_EINVAL;
  int rc = file_range(file, offset, len, &t.file_len);
  if (rc < 0) return rc;
  if (t.header.len > SIZE_MAX / 4 || t.trailer.len > SIZE_MAX / 4 ||
      t.header.len + t.file_len + t.trailer.len == 0)
    return TAXI_EINVAL;
  start_t s = {TAXI_OP_TRANSMIT_FILE, sock, TAXI__DIR_OUT, 0, fn, act};
  return start_io(p, op, &s, setup_transmit, &t);
}

/* ---- timers and posts --------------------------------------------------- */

int taxi_proactor_timer(taxi_proactor_t *p, taxi_op_t *op, taxi_time_t delay,
                        taxi_completion_fn fn, void *act) {
  if (!common_ok(p, op, fn))
    return taxi__refuse(TAXI_EINVAL, "taxi_proactor_timer: %s: NULL",
                        !p    ? "p"
                        : !op ? "op"
                              : "fn");
  if (delay < 0 || delay > TAXI_TIME_SPAN_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_proactor_timer: delay: 0 to TAXI_TIME_SPAN_MAX "
                        "ns; got %" PRId64,
                        (int64_t)delay);
  start_t s = {TAXI_OP_TIMER, TAXI_INVALID_HANDLE, TAXI__DIR_NONE, 0, fn, act};
  taxi_time_t now = taxi_now();
  taxi_time_t deadline = taxi__time_add(now, delay);
  taxi__mutex_lock(&p->lock);
  uint32_t row;
  int rc = admit_locked(p, op, &s, &row);
  /* Room in the heap first: a refusal leaves the record as it was. */
  if (rc == 0) rc = taxi__timer_heap_reserve(&p->timers);
  if (rc == 0) {
    fill(p, op, &s);
    op->internal_.deadline = deadline;
    op->internal_.offset = p->timer_seq++;
    taxi__proactor_timer_push_locked(p, op);
    p->stats.started++;
    taxi__proactor_kick_locked(p);
  }
  taxi__mutex_unlock(&p->lock);
  return rc;
}

int taxi_proactor_post(taxi_proactor_t *p, taxi_op_t *op, taxi_completion_fn fn,
                       void *act) {
  if (!common_ok(p, op, fn)) return TAXI_EINVAL;
  start_t s = {TAXI_OP_POST, TAXI_INVALID_HANDLE, TAXI__DIR_NONE, 0, fn, act};
  taxi__mutex_lock(&p->lock);
  uint32_t row;
  int rc = admit_locked(p, op, &s, &row);
  if (rc == 0) {
    fill(p, op, &s);
    p->stats.started++;
    taxi__proactor_complete_locked(p, op, 0);
    taxi__proactor_kick_locked(p);
  }
  taxi__mutex_unlock(&p->lock);
  return rc;
}
