/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ext/apr.c - taxi/apr.h: APR sockets and files as taxi handles, taxi
 * objects whose life an apr_pool_t decides, error codes both ways.
 *
 * Where this sits: ext/ holds bindings of taxi to other libraries.  A
 * binding is written against taxi's public API only (like an example or an
 * application would be) plus the other library; it includes nothing from
 * core/ or ports/, and core/ never includes it or the library's headers.
 * It is compiled into libtaxi, and exported from it, only when configure
 * found the library (APR here), in the same convenience library as the
 * apr_pollset backend so that APR's flags reach these two files only.
 *
 * A binding of an object to a pool is a small record allocated from that
 * pool, registered as the pool's pre-cleanup, and found again through the
 * pool's user data under a key naming the kind of object and its address:
 * that is what lets bind refuse a second binding (TAXI_EEXIST) and unbind
 * find the cleanup to kill, and since APR forgets a pool's cleanups and
 * user data when it runs them, a pool cleared twice destroys nothing
 * twice and a later unbind says TAXI_ENOENT.
 */
#include "config.h"

#if TAXI_HAVE_APR

#include "taxi/apr.h"

#include <apr_portable.h>
#include <apr_strings.h>

#include <errno.h>
#ifndef _WIN32
#include <netdb.h> /* EAI_* */
#endif
#include <stdio.h>

/* ---- handles ------------------------------------------------------------ */

int taxi_apr_socket_handle(taxi_handle_t *out, apr_socket_t *sock) {
  apr_os_sock_t fd = -1;
  if (!out || !sock) return TAXI_EINVAL;
  /* A closed APR socket keeps its struct (until its pool goes) with the
   * descriptor set to -1. */
  if (apr_os_sock_get(&fd, sock) != APR_SUCCESS || fd < 0) return TAXI_EBADF;
  *out = (taxi_handle_t)fd;
  return 0;
}

int taxi_apr_file_handle(taxi_handle_t *out, apr_file_t *file) {
  apr_os_file_t fd = -1;
  if (!out || !file) return TAXI_EINVAL;
  if (apr_os_file_get(&fd, file) != APR_SUCCESS || fd < 0) return TAXI_EBADF;
  *out = (taxi_handle_t)fd;
  return 0;
}

int taxi_apr_register_socket(taxi_reactor_t *r, apr_socket_t *sock,
                             taxi_handler_t *h, unsigned events) {
  taxi_handle_t fd;
  int rc = taxi_apr_socket_handle(&fd, sock);
  if (rc < 0) return rc;
  return taxi_reactor_register(r, fd, h, events);
}

int taxi_apr_register_file(taxi_reactor_t *r, apr_file_t *file,
                           taxi_handler_t *h, unsigned events) {
  taxi_handle_t fd;
  int rc = taxi_apr_file_handle(&fd, file);
  if (rc < 0) return rc;
  return taxi_reactor_register(r, fd, h, events);
}

/* ---- bindings ----------------------------------------------------------- */

enum kind { KIND_REACTOR, KIND_LF, KIND_HSHA, KIND_PROACTOR };

static const char *const kind_names[] = {"reactor", "lf", "hsha", "proactor"};

typedef struct binding {
  enum kind kind;
  void *object;
  apr_pool_t *pool;
} binding_t;

/* The user-data key of a binding: "taxi:KIND:ADDRESS". */
static void binding_key(char *buf, size_t len, enum kind kind, void *object) {
  snprintf(buf, len, "taxi:%s:%p", kind_names[kind], object);
}

static binding_t *binding_find(apr_pool_t *pool, enum kind kind, void *object) {
  char key[64];
  void *data = NULL;
  binding_key(key, sizeof key, kind, object);
  if (apr_pool_userdata_get(&data, key, pool) != APR_SUCCESS) return NULL;
  return data;
}

static void binding_forget(binding_t *b) {
  char key[64];
  binding_key(key, sizeof key, b->kind, b->object);
  /* Setting NULL removes the entry from the pool's table. */
  (void)apr_pool_userdata_setn(NULL, key, NULL, b->pool);
}

/* The pool's cleanup: destroy the object.  APR ignores what a cleanup run
 * by apr_pool_clear()/apr_pool_destroy() returns; the status is for a
 * caller of apr_pool_cleanup_run(). */
static apr_status_t binding_cleanup(void *data) {
  binding_t *b = data;
  int rc = 0;
  switch (b->kind) {
    case KIND_REACTOR:
      rc = taxi_reactor_destroy(b->object);
      break;
    case KIND_LF:
      rc = taxi_lf_destroy(b->object);
      /* Inside one of the pool's own hooks: stop the others at least. */
      if (rc == TAXI_EBUSY) (void)taxi_lf_stop(b->object);
      break;
    case KIND_HSHA:
      rc = taxi_hsha_destroy(b->object);
      if (rc == TAXI_EBUSY) (void)taxi_hsha_stop(b->object);
      break;
    case KIND_PROACTOR:
      rc = taxi_proactor_destroy(b->object);
      break;
  }
  return taxi_apr_status(rc);
}

static int bind_object(enum kind kind, void *object, apr_pool_t *pool) {
  char key[64];
  binding_t *b;
  if (!object || !pool) return TAXI_EINVAL;
  if (binding_find(pool, kind, object)) return TAXI_EEXIST;
  b = apr_palloc(pool, sizeof *b);
  if (!b) return TAXI_ENOMEM;
  b->kind = kind;
  b->object = object;
  b->pool = pool;
  binding_key(key, sizeof key, kind, object);
  /* apr_pool_userdata_set() copies the key into the pool. */
  if (apr_pool_userdata_set(b, key, NULL, pool) != APR_SUCCESS)
    return TAXI_ENOMEM;
  /* A pre-cleanup: it runs before APR destroys the pool's subpools and
   * runs its ordinary cleanups, so the threads are stopped and the close
   * hooks have run while the APR sockets they use are still there. */
  apr_pool_pre_cleanup_register(pool, b, binding_cleanup);
  return 0;
}

static int unbind_object(enum kind kind, void *object, apr_pool_t *pool) {
  binding_t *b;
  if (!object || !pool) return TAXI_EINVAL;
  b = binding_find(pool, kind, object);
  if (!b) return TAXI_ENOENT;
  apr_pool_cleanup_kill(pool, b, binding_cleanup);
  binding_forget(b);
  return 0;
}

int taxi_apr_reactor_bind(taxi_reactor_t *r, apr_pool_t *pool) {
  return bind_object(KIND_REACTOR, r, pool);
}
int taxi_apr_reactor_unbind(taxi_reactor_t *r, apr_pool_t *pool) {
  return unbind_object(KIND_REACTOR, r, pool);
}

int taxi_apr_lf_bind(taxi_lf_pool_t *p, apr_pool_t *pool) {
  taxi_lf_stats_t st;
  /* Refuse a pool that is not alive now rather than destroy it later. */
  if (p && taxi_lf_stats(p, &st) == TAXI_EINVAL) return TAXI_EINVAL;
  return bind_object(KIND_LF, p, pool);
}
int taxi_apr_lf_unbind(taxi_lf_pool_t *p, apr_pool_t *pool) {
  return unbind_object(KIND_LF, p, pool);
}

int taxi_apr_hsha_bind(taxi_hsha_pool_t *p, apr_pool_t *pool) {
  taxi_hsha_stats_t st;
  if (p && taxi_hsha_stats(p, &st) == TAXI_EINVAL) return TAXI_EINVAL;
  return bind_object(KIND_HSHA, p, pool);
}
int taxi_apr_hsha_unbind(taxi_hsha_pool_t *p, apr_pool_t *pool) {
  return unbind_object(KIND_HSHA, p, pool);
}

int taxi_apr_proactor_bind(taxi_proactor_t *p, apr_pool_t *pool) {
  return bind_object(KIND_PROACTOR, p, pool);
}
int taxi_apr_proactor_unbind(taxi_proactor_t *p, apr_pool_t *pool) {
  return unbind_object(KIND_PROACTOR, p, pool);
}

/* ---- error codes -------------------------------------------------------- */

apr_status_t taxi_apr_status(int code) {
  switch (code) {
    case 0:
      return APR_SUCCESS;
    case TAXI_EINVAL:
      return APR_EINVAL;
    case TAXI_ENOMEM:
      return APR_ENOMEM;
    case TAXI_EBADF:
      return APR_EBADF;
    case TAXI_EEXIST:
      return APR_EEXIST;
    case TAXI_ENOENT:
      return APR_ENOENT;
    case TAXI_ENOBACKEND:
    case TAXI_ENOTSUP:
      return APR_ENOTIMPL;
    case TAXI_ETOOMANY:
      return APR_EMFILE;
    case TAXI_ETIMEDOUT:
      return APR_TIMEUP;
    case TAXI_ESTOPPED:
      /* No APR status means "shut down"; the socket error does. */
      return APR_FROM_OS_ERROR(ESHUTDOWN);
    case TAXI_EBUSY:
      return APR_EBUSY;
    case TAXI_ECANCELED:
      return APR_FROM_OS_ERROR(ECANCELED);
    case TAXI_EAGAIN:
      return APR_EAGAIN;
    case TAXI_EPERM:
      return APR_FROM_OS_ERROR(EPERM);
    case TAXI_ESYS: {
      int os = taxi_last_os_error();
      return os ? APR_FROM_OS_ERROR(os) : APR_EGENERAL;
    }
    case TAXI_ECONNRESET:
      return APR_ECONNRESET;
    case TAXI_ECONNREFUSED:
      return APR_ECONNREFUSED;
    case TAXI_EPIPE:
      return APR_EPIPE;
    case TAXI_EADDRINUSE:
      return APR_FROM_OS_ERROR(EADDRINUSE);
    case TAXI_EEOF:
      return APR_EOF;
    case TAXI_EBADADDR:
      return APR_EBADIP;
    case TAXI_EMSGSIZE:
      return APR_FROM_OS_ERROR(EMSGSIZE);
    case TAXI_ENOBUFS:
      return APR_FROM_OS_ERROR(ENOBUFS);
#if defined(EAI_NONAME) && defined(EAI_AGAIN) && defined(EAI_FAMILY)
    /* APR's resolver reports getaddrinfo's failures as
     * APR_OS_START_EAIERR + EAI_* (apr_errno.h); no other status says so. */
    case TAXI_ENONAME:
      return APR_OS_START_EAIERR + EAI_NONAME;
    case TAXI_ETRYAGAIN:
      return APR_OS_START_EAIERR + EAI_AGAIN;
    case TAXI_ENOADDR:
      return APR_OS_START_EAIERR + EAI_FAMILY;
#endif
    default:
      return APR_EGENERAL;
  }
}

int taxi_apr_error(apr_status_t st) {
  if (st == APR_SUCCESS) return 0;
  if (APR_STATUS_IS_EINVAL(st)) return TAXI_EINVAL;
  if (APR_STATUS_IS_ENOMEM(st)) return TAXI_ENOMEM;
  if (APR_STATUS_IS_EBADF(st) || APR_STATUS_IS_ENOTSOCK(st)) return TAXI_EBADF;
  if (APR_STATUS_IS_EEXIST(st)) return TAXI_EEXIST;
  if (APR_STATUS_IS_ENOENT(st) || APR_STATUS_IS_NOTFOUND(st))
    return TAXI_ENOENT;
  if (APR_STATUS_IS_ENOTIMPL(st)) return TAXI_ENOTSUP;
  if (APR_STATUS_IS_EMFILE(st) || APR_STATUS_IS_ENFILE(st))
    return TAXI_ETOOMANY;
  if (APR_STATUS_IS_TIMEUP(st) || APR_STATUS_IS_ETIMEDOUT(st))
    return TAXI_ETIMEDOUT;
  if (APR_STATUS_IS_EBUSY(st)) return TAXI_EBUSY;
  if (APR_STATUS_IS_EAGAIN(st)) return TAXI_EAGAIN;
  if (APR_STATUS_IS_ECONNRESET(st)) return TAXI_ECONNRESET;
  if (APR_STATUS_IS_ECONNREFUSED(st)) return TAXI_ECONNREFUSED;
  if (APR_STATUS_IS_EPIPE(st)) return TAXI_EPIPE;
  if (APR_STATUS_IS_EOF(st)) return TAXI_EEOF;
  if (APR_STATUS_IS_EBADIP(st)) return TAXI_EBADADDR;
  if (APR_STATUS_IS_EACCES(st) || st == APR_FROM_OS_ERROR(EPERM))
    return TAXI_EPERM;
  if (st == APR_FROM_OS_ERROR(ESHUTDOWN)) return TAXI_ESTOPPED;
  if (st == APR_FROM_OS_ERROR(ECANCELED)) return TAXI_ECANCELED;
  if (st == APR_FROM_OS_ERROR(EADDRINUSE)) return TAXI_EADDRINUSE;
  if (st == APR_FROM_OS_ERROR(EMSGSIZE)) return TAXI_EMSGSIZE;
  if (st == APR_FROM_OS_ERROR(ENOBUFS)) return TAXI_ENOBUFS;
#if defined(EAI_NONAME) && defined(EAI_AGAIN) && defined(EAI_FAMILY)
  if (st == APR_OS_START_EAIERR + EAI_NONAME) return TAXI_ENONAME;
  if (st == APR_OS_START_EAIERR + EAI_AGAIN) return TAXI_ETRYAGAIN;
  if (st == APR_OS_START_EAIERR + EAI_FAMILY) return TAXI_ENOADDR;
#endif
  return TAXI_ESYS;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__ext_apr_absent;
#endif /* TAXI_HAVE_APR */
