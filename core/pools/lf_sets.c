/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_sets.c - Leader/Followers per handle set: several reactors,
 * each with its own pool, and the ways connections are spread over them.
 */
#include "config.h"

#include "taxi/lf_sets.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/reactor/reactor_impl.h"
#include "core/common/time_math.h"
#include "ports/sock.h"

#include <string.h>

struct taxi_lf_sets {
  unsigned n;
  taxi_reactor_t **reactors;
  taxi_lf_pool_t **pools;
  atomic_uint next; /* round-robin start for ties in register */
};

static void destroy_parts(taxi_lf_sets_t *s) {
  for (unsigned i = 0; i < s->n; i++)
    if (s->pools[i]) taxi_lf_destroy(s->pools[i]);
  for (unsigned i = 0; i < s->n; i++)
    if (s->reactors[i]) taxi_reactor_destroy(s->reactors[i]);
  taxi__free(s->pools);
  taxi__free(s->reactors);
  taxi__free(s);
}

void taxi_lf_sets_options_init(taxi_lf_sets_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi_lf_sets_create(taxi_lf_sets_t **out,
                        const taxi_lf_sets_options_t *opts) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_lf_sets_create: out: NULL");
  *out = NULL;
  taxi_lf_sets_options_t o;
  taxi_lf_sets_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_lf_sets_create: options",
                         "taxi_lf_sets_options_init") < 0)
    return TAXI_EINVAL;
  if (o.sets > TAXI_LF_SETS_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_lf_sets_create: options.sets: at most "
                        "TAXI_LF_SETS_MAX (%u); got %u",
                        TAXI_LF_SETS_MAX, o.sets);
  if (o.threads_per_set > TAXI_LF_MAX_THREADS)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_lf_sets_create: options.threads_per_set: at "
                        "most TAXI_LF_MAX_THREADS (%u); got %u",
                        TAXI_LF_MAX_THREADS, o.threads_per_set);
  if (o.sets == 0) o.sets = taxi__cpu_count();
  if (o.sets > TAXI_LF_SETS_MAX) o.sets = TAXI_LF_SETS_MAX;
  if (o.threads_per_set == 0) o.threads_per_set = 1;

  taxi_lf_sets_t *s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  s->reactors = taxi__calloc(o.sets, sizeof *s->reactors);
  s->pools = taxi__calloc(o.sets, sizeof *s->pools);
  s->n = o.sets;
  atomic_init(&s->next, 0);
  int rc = s->reactors && s->pools ? 0 : TAXI_ENOMEM;
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = o.backend;
  for (unsigned i = 0; rc == 0 && i < o.sets; i++) {
    /* Their refusals are of this call's options (the backend, the pool's
     * options), and say so. */
    unsigned mark = taxi__refusals();
    rc = taxi_reactor_create(&s->reactors[i], &ro);
    rc = taxi__refuse_within(rc, mark, "taxi_reactor_create: options",
                             "taxi_lf_sets_create: options");
    if (rc == 0) {
      mark = taxi__refusals();
      rc = taxi_lf_create(&s->pools[i], s->reactors[i], o.pool);
      rc = taxi__refuse_within(rc, mark, "taxi_lf_create: options",
                               "taxi_lf_sets_create: options.pool");
    }
    if (rc == 0) rc = taxi_lf_spawn(s->pools[i], o.threads_per_set);
  }
  if (rc < 0) {
    if (!s->reactors || !s->pools) s->n = 0;
    destroy_parts(s);
    return rc;
  }
  *out = s;
  return 0;
}

int taxi_lf_sets_destroy(taxi_lf_sets_t *s) {
  if (!s) return TAXI_EINVAL;
  for (unsigned i = 0; i < s->n; i++)
    if (taxi_lf_current_thread(s->pools[i]) >= 0)
      return taxi__refuse(TAXI_EBUSY,
                          "taxi_lf_sets_destroy: s: called from a thread of "
                          "set %u's pool, which the destroy would wait for",
                          i);
  /* Every pool stops before any reactor goes: a hook of one set may be
   * using another set's reactor (a move, a shared acceptor). */
  for (unsigned i = 0; i < s->n; i++) taxi_lf_stop(s->pools[i]);
  destroy_parts(s);
  return 0;
}

int taxi_lf_sets_stop(taxi_lf_sets_t *s) {
  if (!s) return TAXI_EINVAL;
  int rc = 0;
  for (unsigned i = 0; i < s->n; i++) {
    int one = taxi_lf_stop(s->pools[i]);
    if (one < 0 && rc == 0) rc = one;
  }
  return rc;
}

int taxi_lf_sets_wait(taxi_lf_sets_t *s, int timeout_ms) {
  if (!s) return TAXI_EINVAL;
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  int rc = 0;
  for (unsigned i = 0; i < s->n; i++) {
    int left = -1; /* no limit */
    if (timeout_ms >= 0) {
      taxi_time_t now = taxi_now();
      left = now >= deadline ? 0
                             : (int)((deadline - now + TAXI_NSEC_PER_MSEC - 1) /
                                     TAXI_NSEC_PER_MSEC);
    }
    int one = taxi_lf_wait(s->pools[i], left);
    if (one == TAXI_ETIMEDOUT || one == TAXI_EBUSY || one == TAXI_EINVAL)
      return one;
    if (one < 0 && one != TAXI_ESTOPPED && rc == 0) rc = one;
  }
  return rc ? rc : TAXI_ESTOPPED;
}

unsigned taxi_lf_sets_count(const taxi_lf_sets_t *s) { return s ? s->n : 0; }

taxi_reactor_t *taxi_lf_sets_reactor(const taxi_lf_sets_t *s, unsigned i) {
  return s && i < s->n ? s->reactors[i] : NULL;
}

taxi_lf_pool_t *taxi_lf_sets_pool(const taxi_lf_sets_t *s, unsigned i) {
  return s && i < s->n ? s->pools[i] : NULL;
}

int taxi_lf_sets_index(const taxi_lf_sets_t *s, const taxi_reactor_t *r) {
  for (unsigned i = 0; s && i < s->n; i++)
    if (s->reactors[i] == r) return (int)i;
  return -1;
}

/* Handles registered with r now.  The count may be stale by the time it
 * is used; balancing only needs it to be roughly right. */
static size_t load_of(taxi_reactor_t *r) {
  taxi_reactor_stats_t st;
  return taxi_reactor_stats(r, &st) == 0 ? st.handles : SIZE_MAX;
}

int taxi_lf_sets_register(taxi_lf_sets_t *s, taxi_handle_t handle,
                          taxi_handler_t *h, unsigned events) {
  if (!s) return TAXI_EINVAL;
  unsigned start = atomic_fetch_add(&s->next, 1) % s->n;
  unsigned best = start;
  size_t best_load = load_of(s->reactors[start]);
  for (unsigned k = 1; k < s->n; k++) {
    unsigned i = (start + k) % s->n;
    size_t load = load_of(s->reactors[i]);
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  int rc = taxi_reactor_register(s->reactors[best], handle, h, events);
  return rc < 0 ? rc : (int)best;
}

/* Register an acceptor for listener on set i; the listener is closed if
 * no acceptor takes it. */
static int add_acceptor(taxi_lf_sets_t *s, unsigned i, taxi_handle_t fd,
                        taxi_lf_sets_acceptor_fn make, void *arg,
                        taxi_handler_t **out) {
  taxi_handler_t *h = make(i, fd, arg);
  if (!h) {
    taxi__close(fd);
    return taxi__refuse(
        TAXI_EINVAL, "taxi_lf_sets_listen: make: returned NULL for set %u", i);
  }
  int rc = taxi_reactor_register(s->reactors[i], fd, h, TAXI_EV_READ);
  if (rc < 0) {
    taxi__close(fd);
    return rc;
  }
  *out = h;
  return 0;
}

/* host and port as the address to listen on: a numeric IPv4 or IPv6
 * address, or for NULL every address, as taxi_addr_parse() reads "*:port"
 * (IPv6's wildcard, which takes IPv4 connections too). */
static int listen_addr(taxi_addr_t *a, const char *host, unsigned port) {
  if (port > 65535)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_lf_sets_listen: port: 0 to 65535; got %u", port);
  if (!host) return taxi__sockaddr_ip(a, true, NULL, 0, port);
  size_t n = strlen(host);
  if (taxi__sockaddr_ip(a, false, host, n, port) == 0 ||
      taxi__sockaddr_ip(a, true, host, n, port) == 0)
    return 0;
  return taxi__refuse(TAXI_EBADADDR,
                      "taxi_lf_sets_listen: host: not a numeric IPv4 or IPv6 "
                      "address (names are not resolved); got \"%.64s\"",
                      host);
}

/* One listening socket on *a, through the function every listener of taxi
 * is made with (ports/sock.h).  The first fixes the port (a free one if
 * it was 0) and the family (IPv4's where the system has no IPv6): *a
 * becomes the address it is bound to, which the others then share. */
static int listen_one(taxi_addr_t *a, bool first, bool balanced,
                      taxi_handle_t *out) {
  int rc = taxi__sock_listen(a, 0, balanced ? TAXI_LISTEN_REUSEPORT : 0, out);
  if (rc == 0 && first && (rc = taxi__sock_local_addr(*out, a)) < 0)
    taxi__close(*out);
  return rc;
}

int taxi_lf_sets_listen(taxi_lf_sets_t *s, const char *host, unsigned port,
                        int balance, taxi_lf_sets_acceptor_fn make, void *arg,
                        unsigned *bound_port) {
  if (!s || !make)
    return taxi__refuse(TAXI_EINVAL, "taxi_lf_sets_listen: %s: NULL",
                        !s ? "s" : "make");
  if (balance < TAXI_BALANCE_AUTO || balance > TAXI_BALANCE_ACCEPTOR)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_lf_sets_listen: balance: not a TAXI_BALANCE_*; "
                        "got %d",
                        balance);
  if (balance == TAXI_BALANCE_AUTO)
    balance = taxi__reuseport_balances() ? TAXI_BALANCE_KERNEL
                                         : TAXI_BALANCE_ACCEPTOR;
  if (balance == TAXI_BALANCE_KERNEL && !taxi__reuseport_balances())
    return taxi__refuse(TAXI_ENOTSUP,
                        "taxi_lf_sets_listen: balance: TAXI_BALANCE_KERNEL, "
                        "and the kernel here does not balance connections "
                        "over sockets sharing a port");
  taxi_addr_t a;
  int rc = listen_addr(&a, host, port);
  if (rc < 0) return rc;
  unsigned listeners = balance == TAXI_BALANCE_KERNEL ? s->n : 1;
  taxi_handler_t **made = taxi__calloc(listeners, sizeof *made);
  if (!made) return TAXI_ENOMEM;
  unsigned done = 0;
  for (; done < listeners; done++) {
    taxi_handle_t fd;
    rc = listen_one(&a, done == 0, balance == TAXI_BALANCE_KERNEL, &fd);
    if (rc == 0) rc = add_acceptor(s, done, fd, make, arg, &made[done]);
    if (rc < 0) break;
  }
  if (rc < 0) {
    /* Their close hooks close the listeners. */
    for (unsigned i = 0; i < done; i++)
      taxi_reactor_remove(s->reactors[i], made[i]);
  } else if (bound_port) {
    *bound_port = taxi__sockaddr_port(&a);
  }
  taxi__free(made);
  return rc < 0 ? rc : balance;
}
