/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/bound_fixture.c - the bound-association fixture: a pool, a
 * multiplexed connection over a socketpair, its parse and unknown-id
 * hooks, and the back end thread that answers in a random order.
 */
#define _GNU_SOURCE 1

#include "bound_fixture.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- frames -------------------------------------------------------------- */

size_t bd_len(uint64_t id) {
  return 1 + (size_t)((id * 2654435761u) >> 7) % BD_MAX_BODY;
}

void bd_fill(uint64_t id, unsigned char *body, size_t len) {
  for (size_t i = 0; i < len; i++)
    body[i] = (unsigned char)((id >> (8 * (i % 8))) + i);
}

static int write_all(int fd, const unsigned char *p, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
    struct pollfd pf = {fd, POLLOUT, 0};
    if (poll(&pf, 1, POOLS_WAIT_MS) <= 0) return -1;
  }
  return 0;
}

int bd_write_frame(int fd, uint64_t id, uint32_t flags, const void *body,
                   size_t len) {
  unsigned char buf[BD_HEADER + 4096];
  if (len > 4096) return -1;
  bd_header_t h = {(uint32_t)(BD_HEADER + len), flags, id};
  memcpy(buf, &h, BD_HEADER);
  if (len) memcpy(buf + BD_HEADER, body, len);
  return write_all(fd, buf, BD_HEADER + len);
}

int bd_send(taxi_lf_mux_t *m, uint64_t id, uint32_t flags, const void *body,
            size_t len) {
  unsigned char buf[BD_HEADER + BD_MAX_BODY];
  if (len > BD_MAX_BODY) return TAXI_EINVAL;
  bd_header_t h = {(uint32_t)(BD_HEADER + len), flags, id};
  memcpy(buf, &h, BD_HEADER);
  if (len) memcpy(buf + BD_HEADER, body, len);
  return taxi_lf_mux_send(m, buf, BD_HEADER + len, POOLS_WAIT_MS);
}

/* ---- the mux's hooks ----------------------------------------------------- */

/* What a hook of the connection may not do: each is refused. */
static void try_forbidden(bd_test_t *t, bd_hook_calls_t *c) {
  if (!atomic_exchange(&c->armed, 0)) return;
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, 0xfeedull, NULL, 0);
  taxi_lf_mux_expect(t->m, &e);
  atomic_store(&c->await_rc, taxi_lf_mux_await(t->m, &e, 0));
  taxi_lf_mux_forget(t->m, &e);
  atomic_store(&c->send_rc, taxi_lf_mux_send(t->m, "x", 1, 0));
  atomic_store(&c->destroy_rc, taxi_lf_mux_destroy(t->m));
}

static int bd_parse(void *arg, const void *data, size_t len,
                    taxi_lf_frame_t *f) {
  bd_test_t *t = arg;
  bd_header_t h;
  if (len < BD_HEADER) return 0;
  memcpy(&h, data, BD_HEADER);
  if (h.size < BD_HEADER) return TAXI_EINVAL;
  if (h.flags == BD_BAD) return TAXI_EPERM;
  try_forbidden(t, &t->in_parse);
  if (h.size > len) return 0;
  f->size = h.size;
  f->id = h.id;
  f->body = BD_HEADER;
  f->body_len = h.size - BD_HEADER;
  return 1;
}

static void bd_unknown(void *arg, uint64_t id, const void *body, size_t len) {
  bd_test_t *t = arg;
  (void)body;
  try_forbidden(t, &t->in_unknown);
  atomic_store(&t->unknown_id, id);
  atomic_store(&t->unknown_len, (int)len);
  atomic_fetch_add(&t->unknown, 1);
}

taxi_lf_mux_options_t bd_options(bd_test_t *t) {
  taxi_lf_mux_options_t o = TAXI_LF_MUX_OPTIONS_INIT;
  o.parse = bd_parse;
  o.unknown = bd_unknown;
  o.arg = t;
  return o;
}

int bd_wait_unknown(bd_test_t *t, int n) {
  return util_wait_flag(&t->unknown, n, POOLS_WAIT_MS);
}

/* ---- the back end -------------------------------------------------------- */

typedef struct bd_pending {
  uint64_t id;
  size_t len;
  unsigned char body[BD_MAX_BODY];
} bd_pending_t;

#define BD_PENDING_MAX 256

typedef struct bd_backend_state {
  unsigned char in[1 << 16];
  size_t inlen;
  bd_pending_t pending[BD_PENDING_MAX];
  int npending;
} bd_backend_state_t;

/* Answer everything that waits, in a random order. */
static int flush(bd_test_t *t, bd_backend_state_t *s) {
  for (int i = s->npending - 1; i > 0; i--) {
    int j = (int)(pools_rand(&t->seed) % (uint64_t)(i + 1));
    bd_pending_t tmp = s->pending[i];
    s->pending[i] = s->pending[j];
    s->pending[j] = tmp;
  }
  for (int i = 0; i < s->npending; i++) {
    if (bd_write_frame(t->sv[1], s->pending[i].id, 0, s->pending[i].body,
                       s->pending[i].len) != 0)
      return -1;
    atomic_fetch_add(&t->replies, 1);
  }
  s->npending = 0;
  return 0;
}

/* Take the complete requests read so far.  0, or -1 for nonsense. */
static int take_requests(bd_test_t *t, bd_backend_state_t *s) {
  size_t at = 0;
  while (s->inlen - at >= BD_HEADER) {
    bd_header_t h;
    memcpy(&h, s->in + at, BD_HEADER);
    if (h.size < BD_HEADER || h.size - BD_HEADER > BD_MAX_BODY) return -1;
    if (s->inlen - at < h.size) break;
    atomic_fetch_add(&t->requests, 1);
    if (!(h.flags & BD_NOREPLY)) {
      if (s->npending == BD_PENDING_MAX) return -1;
      bd_pending_t *pd = &s->pending[s->npending++];
      pd->id = h.id;
      pd->len = h.size - BD_HEADER;
      memcpy(pd->body, s->in + at + BD_HEADER, pd->len);
    }
    at += h.size;
  }
  memmove(s->in, s->in + at, s->inlen - at);
  s->inlen -= at;
  return 0;
}

static void backend_main(void *arg) {
  bd_test_t *t = arg;
  bd_backend_state_t *s = calloc(1, sizeof *s);
  if (!s) {
    atomic_store(&t->backend_failed, 1);
    return;
  }
  while (!atomic_load(&t->stop)) {
    struct pollfd pf = {t->sv[1], POLLIN, 0};
    int ready = poll(&pf, 1, 2);
    ssize_t n = 0;
    if (ready > 0) {
      n = read(t->sv[1], s->in + s->inlen, sizeof s->in - s->inlen);
      if (n == 0) break; /* the mux closed */
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
      if (n > 0) s->inlen += (size_t)n;
      if (take_requests(t, s) != 0) {
        atomic_store(&t->backend_failed, 1);
        break;
      }
    }
    bool idle = ready == 0 && !t->strict;
    if (s->npending >= t->batch || (idle && s->npending > 0)) {
      if (flush(t, s) != 0) {
        atomic_store(&t->backend_failed, 1);
        break;
      }
    }
  }
  free(s);
}

/* ---- the fixture --------------------------------------------------------- */

static int bd_do_destroy_mux(void *m) { return taxi_lf_mux_destroy(m); }
static int bd_do_destroy_pool(void *p) { return taxi_lf_destroy(p); }

bd_test_t *bd_new(unsigned threads, int backend, int batch, int strict) {
  return bd_new_with(threads, backend, batch, strict, NULL);
}

bd_test_t *bd_new_with(unsigned threads, int backend, int batch, int strict,
                       const taxi_lf_options_t *po) {
  bd_test_t *t = calloc(1, sizeof *t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  t->r = pools_reactor();
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&t->p, t->r, po), 0);
  if (threads) CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(t->p, threads), 0);
  pools_pair(t->sv);
  taxi_lf_mux_options_t o = bd_options(t);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_mux_create(&t->m, t->p, t->r, t->sv[0], &o), 0);
  for (int i = 0; i < 2; i++) {
    bd_hook_calls_t *c = i ? &t->in_unknown : &t->in_parse;
    atomic_store(&c->await_rc, 1);
    atomic_store(&c->send_rc, 1);
    atomic_store(&c->destroy_rc, 1);
  }
  t->batch = batch > 0 ? batch : 1;
  t->strict = strict;
  t->seed = 0x1234567ull + (uint64_t)batch;
  if (backend) {
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&t->backend, backend_main, t), 0);
    t->backend_running = 1;
  }
  return t;
}

void bd_stop_backend(bd_test_t *t) {
  atomic_store(&t->stop, 1);
  if (t->backend_running)
    util_thread_join(&t->backend, POOLS_WAIT_MS, "bound back end");
  t->backend_running = 0;
}

void bd_free(bd_test_t *t) {
  if (!t) return;
  bd_stop_backend(t);
  CU_ASSERT_EQUAL(t->backend_failed, 0);
  if (t->m)
    CU_ASSERT_EQUAL(util_bounded(bd_do_destroy_mux, t->m, POOLS_WAIT_MS,
                                 "taxi_lf_mux_destroy"),
                    0);
  CU_ASSERT_EQUAL(
      util_bounded(bd_do_destroy_pool, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"),
      0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(t->r), 0);
  if (t->sv[1] >= 0) close(t->sv[1]);
  free(t);
}
