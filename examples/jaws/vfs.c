/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/vfs.c - the cached virtual filesystem (see vfs.h): a hash
 * table of entries under one lock, an LRU list, and resolution of request
 * paths inside the document root.  File-system calls (resolve, stat, open,
 * read) run outside the lock, so a slow disk delays only its own request.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "vfs.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jaws_os.h"
#include "mime.h"

#define BUCKETS 1024u
#define PATH_CAP 4096

struct vfs {
  pthread_mutex_t lock;
  char root[PATH_CAP];
  size_t root_len;
  size_t max_bytes, bytes;
  uint64_t memory_max; /* the largest file read into memory */
  unsigned max_entries, entries;
  struct vfs_file *buckets[BUCKETS];
  struct vfs_file *head, *tail; /* LRU: head most recent */
  int64_t (*now_ms)(void);
  int64_t (*wall_ns)(void);
  bool dotfiles; /* served */
  struct vfs_stats st;
};

void vfs_format_date(int64_t t, char *out) {
  static const char *const days[] = {"Thu", "Fri", "Sat", "Sun",
                                     "Mon", "Tue", "Wed"};
  static const char *const months[] = {"Jan", "Feb", "Mar", "Apr",
                                       "May", "Jun", "Jul", "Aug",
                                       "Sep", "Oct", "Nov", "Dec"};
  int64_t day = t >= 0 ? t / 86400 : (t - 86399) / 86400;
  int64_t secs = t - day * 86400;
  /* Civil date from days since 1970-01-01 (the era-based algorithm). */
  int64_t z = day + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  int64_t y = yoe + era * 400 + (m <= 2);
  int64_t wd = ((day % 7) + 7) % 7;
  snprintf(out, 30, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[wd], (int)d,
           months[m - 1], (int)y, (int)(secs / 3600), (int)(secs / 60 % 60),
           (int)(secs % 60));
}

static uint32_t hash_of(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

int vfs_create(struct vfs **out, const char *root, size_t max_bytes,
               unsigned max_entries) {
  struct jaws_stat st;
  struct vfs *v = calloc(1, sizeof *v);
  int rc;
  if (v == NULL) return JAWS_OS_ERROR;
  if ((rc = jaws_resolve(root, v->root, sizeof v->root)) != 0 ||
      (rc = jaws_stat(v->root, &st)) != 0 || st.kind != JAWS_DIRECTORY) {
    free(v);
    return rc ? rc : JAWS_OS_NOENT;
  }
  v->root_len = strlen(v->root);
  if (v->root_len == 1) v->root_len = 0; /* "/": every path is inside */
  v->max_bytes = max_bytes;
  v->memory_max = VFS_MEMORY_MAX;
  v->max_entries = max_entries ? max_entries : 1;
  v->now_ms = jaws_now_ms;
  v->wall_ns = jaws_wall_ns;
  pthread_mutex_init(&v->lock, NULL);
  *out = v;
  return 0;
}

void vfs_set_clock(struct vfs *v, int64_t (*now_ms)(void)) {
  v->now_ms = now_ms ? now_ms : jaws_now_ms;
}

void vfs_set_wall_clock(struct vfs *v, int64_t (*now_ns)(void)) {
  v->wall_ns = now_ns ? now_ns : jaws_wall_ns;
}

void vfs_set_dotfiles(struct vfs *v, bool allow) { v->dotfiles = allow; }

void vfs_set_memory_max(struct vfs *v, uint64_t bytes) {
  pthread_mutex_lock(&v->lock);
  v->memory_max = bytes;
  pthread_mutex_unlock(&v->lock);
}

static void file_free(struct vfs_file *f) {
  jaws_close(f->fd);
  free((void *)f->data);
  free(f->key);
  free(f);
}

void vfs_release(struct vfs_file *f) {
  if (f && atomic_fetch_sub(&f->refs, 1) == 1) file_free(f);
}

/* Under the lock: take f out of the table and the list and drop the
 * cache's reference (the file lives on while responses hold it). */
static void unlink_entry(struct vfs *v, struct vfs_file *f) {
  struct vfs_file **pp = &v->buckets[f->hash % BUCKETS];
  while (*pp != f) pp = &(*pp)->hnext;
  *pp = f->hnext;
  if (f->prev)
    f->prev->next = f->next;
  else
    v->head = f->next;
  if (f->next)
    f->next->prev = f->prev;
  else
    v->tail = f->prev;
  f->cached = false;
  v->entries--;
  if (f->data) v->bytes -= (size_t)f->size;
  vfs_release(f);
}

static void to_front(struct vfs *v, struct vfs_file *f) {
  if (v->head == f) return;
  f->prev->next = f->next;
  if (f->next)
    f->next->prev = f->prev;
  else
    v->tail = f->prev;
  f->prev = NULL;
  f->next = v->head;
  v->head->prev = f;
  v->head = f;
}

static struct vfs_file *find(struct vfs *v, const char *key, uint32_t h) {
  for (struct vfs_file *f = v->buckets[h % BUCKETS]; f; f = f->hnext)
    if (f->hash == h && strcmp(f->key, key) == 0) return f;
  return NULL;
}

/* Is the resolved `real` the root or below it? */
static bool inside(const struct vfs *v, const char *real) {
  return strncmp(real, v->root, v->root_len) == 0 &&
         (real[v->root_len] == '/' || real[v->root_len] == '\0');
}

/* Has path ("/a/b", '/' separators) a name that starts with '.', other
 * than a first ".well-known"?  Such names are what a deploy leaves
 * behind and no one means to publish (.git, .env, .htpasswd, an editor's
 * swap file); RFC 8615's directory is meant to be served.  "." and ".."
 * name no file: where they lead is judged once resolved. */
static bool dot_name(const char *path) {
  for (const char *p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
    const char *name = p + 1;
    size_t len = strcspn(name, "/");
    if (name[0] != '.' || len == 1 || (len == 2 && name[1] == '.')) continue;
    if (p == path && len == 11 && strncmp(name, ".well-known", 11) == 0)
      continue;
    return true;
  }
  return false;
}

static int http_status(int os) {
  return os == JAWS_OS_NOENT ? 404 : os == JAWS_OS_DENIED ? 403 : 500;
}

/* Is the resolved `real` (inside the root) a name that must not be
 * served?  Its part below the root is what counts: the root itself may
 * be anywhere ("/home/www/.site"). */
static bool hidden(const struct vfs *v, const char *real) {
  return !v->dotfiles && dot_name(real + v->root_len);
}

/* The file a request path names: resolved, inside the root, a regular
 * file (a directory's index.html), no dot name in the request or in what
 * it resolves to (a link to .git).  0 with real[] set, or a status. */
static int resolve(const struct vfs *v, const char *path, char *real,
                   struct jaws_stat *st) {
  char full[PATH_CAP];
  int rc;
  /* 404 whether it exists or not: the answer says nothing of the tree. */
  if (!v->dotfiles && dot_name(path)) return 404;
  if ((size_t)snprintf(full, sizeof full, "%.*s%s", (int)v->root_len, v->root,
                       path) >= sizeof full)
    return 414;
  if ((rc = jaws_resolve(full, real, PATH_CAP)) != 0) return http_status(rc);
  if (!inside(v, real)) return 403;
  if (hidden(v, real)) return 404;
  if ((rc = jaws_stat(real, st)) != 0) return http_status(rc);
  if (st->kind == JAWS_DIRECTORY) {
    /* Relative links in its index resolve against the slash. */
    if (path[strlen(path) - 1] != '/') return 301;
    if ((size_t)snprintf(full, sizeof full, "%s/index.html", real) >=
        sizeof full)
      return 404;
    if ((rc = jaws_resolve(full, real, PATH_CAP)) != 0) return http_status(rc);
    if (!inside(v, real)) return 403;
    if (hidden(v, real)) return 404;
    if ((rc = jaws_stat(real, st)) != 0) return http_status(rc);
  }
  return st->kind == JAWS_REGULAR ? 0 : 403;
}

/* A new entry for `path`, opened (and read, when small). */
static int load(struct vfs *v, const char *path, struct vfs_file **out) {
  char real[PATH_CAP], date[32];
  struct jaws_stat st, ost;
  struct vfs_file *f;
  /* Before the file is looked at: a change after this instant that keeps
   * the file's times as they were can only be within a tick of them. */
  int64_t wall = v->wall_ns();
  int rc = resolve(v, path, real, &st);
  if (rc != 0) return rc;
  if ((f = calloc(1, sizeof *f)) == NULL || (f->key = strdup(path)) == NULL) {
    free(f);
    return 500;
  }
  f->fd = TAXI_INVALID_HANDLE;
  if ((rc = jaws_open(real, &f->fd, &ost)) != 0) {
    file_free(f);
    return http_status(rc);
  }
  if (ost.kind != JAWS_REGULAR) { /* changed since resolve */
    file_free(f);
    return 403;
  }
  f->size = ost.size;
  f->mtime = ost.mtime;
  f->mtime_ns = ost.mtime_ns;
  f->ctime_ns = ost.ctime_ns;
  f->racy = (ost.ctime_ns > ost.mtime_ns ? ost.ctime_ns : ost.mtime_ns) >
            (wall > INT64_MIN + VFS_RACY_NS ? wall - VFS_RACY_NS : INT64_MIN);
  f->dev = ost.dev;
  f->ino = ost.ino;
  pthread_mutex_lock(&v->lock);
  uint64_t memory_max = v->memory_max;
  pthread_mutex_unlock(&v->lock);
  /* An eighth of the cache at most, so that one file cannot take it all:
   * the bound by bytes evicts the others to make room. */
  if (f->size <= memory_max && f->size <= v->max_bytes / 8) {
    char *data = malloc(f->size ? (size_t)f->size : 1);
    if (data && jaws_read_at(f->fd, data, (size_t)f->size, 0) == 0) {
      f->data = data;
      jaws_close(f->fd);
      f->fd = TAXI_INVALID_HANDLE;
    } else {
      free(data); /* served from the file instead */
    }
  }
  vfs_format_date(f->mtime, date);
  f->meta_len = (size_t)snprintf(f->meta, sizeof f->meta,
                                 "Content-Type: %s\r\nLast-Modified: %s\r\n",
                                 mime_type(real), date);
  f->hash = hash_of(path);
  atomic_init(&f->refs, 1);
  *out = f;
  return 0;
}

/* Under the lock: add f (the cache takes a reference), replacing an
 * entry of the same path, then evict from the tail until within bounds. */
static void insert(struct vfs *v, struct vfs_file *f, int64_t now) {
  struct vfs_file *old = find(v, f->key, f->hash);
  if (old) unlink_entry(v, old);
  atomic_fetch_add(&f->refs, 1);
  f->cached = true;
  f->checked_ms = now;
  f->hnext = v->buckets[f->hash % BUCKETS];
  v->buckets[f->hash % BUCKETS] = f;
  f->prev = NULL;
  f->next = v->head;
  if (v->head)
    v->head->prev = f;
  else
    v->tail = f;
  v->head = f;
  v->entries++;
  if (f->data) v->bytes += (size_t)f->size;
  while ((v->entries > v->max_entries || v->bytes > v->max_bytes) &&
         v->tail != f) {
    unlink_entry(v, v->tail);
    v->st.evictions++;
  }
}

/* Does the cached f still describe what `path` names?  Not if it was
 * loaded too soon after the file's last change to tell a later change by
 * the times (see vfs.h). */
static bool still_valid(const struct vfs *v, const struct vfs_file *f) {
  char real[PATH_CAP];
  struct jaws_stat st;
  return !f->racy && resolve(v, f->key, real, &st) == 0 && st.dev == f->dev &&
         st.ino == f->ino && st.size == f->size && st.mtime_ns == f->mtime_ns &&
         st.ctime_ns == f->ctime_ns;
}

int vfs_lookup(struct vfs *v, const char *path, struct vfs_file **out) {
  uint32_t h = hash_of(path);
  struct vfs_file *f;
  int64_t now = v->now_ms();
  int rc;

  pthread_mutex_lock(&v->lock);
  f = find(v, path, h);
  if (f) {
    atomic_fetch_add(&f->refs, 1);
    to_front(v, f);
    if (now - f->checked_ms < VFS_CHECK_MS) {
      v->st.hits++;
      pthread_mutex_unlock(&v->lock);
      *out = f;
      return 0;
    }
    pthread_mutex_unlock(&v->lock);
    if (still_valid(v, f)) {
      pthread_mutex_lock(&v->lock);
      f->checked_ms = now;
      v->st.hits++;
      pthread_mutex_unlock(&v->lock);
      *out = f;
      return 0;
    }
    pthread_mutex_lock(&v->lock);
    if (f->cached) unlink_entry(v, f);
    v->st.invalidations++;
    pthread_mutex_unlock(&v->lock);
    vfs_release(f);
  } else {
    pthread_mutex_unlock(&v->lock);
  }
  if ((rc = load(v, path, &f)) != 0) return rc;
  pthread_mutex_lock(&v->lock);
  v->st.misses++;
  insert(v, f, now);
  pthread_mutex_unlock(&v->lock);
  *out = f;
  return 0;
}

void vfs_get_stats(struct vfs *v, struct vfs_stats *out) {
  pthread_mutex_lock(&v->lock);
  *out = v->st;
  out->entries = v->entries;
  out->bytes = v->bytes;
  pthread_mutex_unlock(&v->lock);
}

void vfs_destroy(struct vfs *v) {
  if (v == NULL) return;
  while (v->head) unlink_entry(v, v->head);
  pthread_mutex_destroy(&v->lock);
  free(v);
}
