/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/vfs.h - the JAWS paper's cached virtual filesystem: a
 * request path maps to an open file with its size, modification time,
 * Content-Type and a prebuilt part of its response header.
 *
 * Safety: a path is resolved (links, "." and "..") and must stay inside
 * the document root, else 403; missing files are 404.  A name below the
 * root that starts with '.' (".git", ".env"), in the request or in the
 * file it resolves to, is 404 unless allowed (vfs_set_dotfiles), except
 * a first ".well-known" (RFC 8615).  Directories serve their index.html.
 *
 * Cache: bounded by entries (open handles) and by bytes (the contents of
 * the files kept in memory: those of vfs_set_memory_max's size or less,
 * and of an eighth of the bytes' bound or less); least recently used
 * entries go first.
 * An entry is checked against the file system once VFS_CHECK_MS have
 * passed since its last check (path resolved again, then device, inode,
 * size, and mtime and ctime to the nanosecond compared) and replaced when
 * the file changed: a change is served at most VFS_CHECK_MS after it is
 * made.  A file system stamps times from a clock that ticks coarsely (a
 * jiffy, NTFS's 15.6 ms, FAT's 2 s), so a rewrite in the same tick as the
 * load may leave every time as it was: an entry loaded within
 * VFS_RACY_NS of the file's last change (or of a change dated ahead of
 * the clock) is loaded again at its next check whatever the times say.
 *
 * Threads: every call may come from any thread.  Entries are reference
 * counted: vfs_lookup returns one reference, vfs_release drops it, and an
 * entry evicted or replaced while a response still sends it stays open
 * until that reference is dropped, so a response is never torn.
 */
#ifndef JAWS_VFS_H
#define JAWS_VFS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <taxi/taxi.h>

/* How long an entry is served before it is checked again. */
#define VFS_CHECK_MS 1000
/* The coarsest tick of a file system's times (FAT's 2 s), with a margin. */
#define VFS_RACY_NS (3 * INT64_C(1000000000))
/* The largest file read into memory unless vfs_set_memory_max says. */
#define VFS_MEMORY_MAX (64 * 1024)

struct vfs;

struct vfs_file {
  taxi_handle_t fd; /* open while the entry lives, TAXI_INVALID_HANDLE when
                       the contents are in memory */
  const char *data; /* the contents (files kept in memory), else NULL */
  uint64_t size;
  int64_t mtime;
  /* "Content-Type: ...\r\nLast-Modified: ...\r\n" */
  char meta[192];
  size_t meta_len;
  /* the cache's own */
  atomic_uint refs;
  uint64_t dev, ino;
  int64_t mtime_ns, ctime_ns;
  bool racy; /* loaded within VFS_RACY_NS of the file's last change */
  int64_t checked_ms;
  bool cached;
  uint32_t hash;
  char *key;
  struct vfs_file *hnext, *prev, *next;
};

struct vfs_stats {
  uint64_t hits, misses, evictions, invalidations;
  unsigned entries;
  size_t bytes;
};

/* max_bytes: memory for contents; max_entries: entries (open files).
 * Returns 0, or a JAWS_OS_* code for a root that cannot be resolved or is
 * not a directory (JAWS_OS_NOENT). */
int vfs_create(struct vfs **out, const char *root, size_t max_bytes,
               unsigned max_entries);
void vfs_destroy(struct vfs *v);

/* The file for a decoded, normalised request path ("/a/b.html").
 * Returns 0 and a reference in *out, or an HTTP status: 301 (a directory
 * named without its trailing slash), 403 (outside the root, not a regular
 * file, no permission), 404, 500. */
int vfs_lookup(struct vfs *v, const char *path, struct vfs_file **out);
void vfs_release(struct vfs_file *f);

void vfs_get_stats(struct vfs *v, struct vfs_stats *out);

/* Serve names that start with '.' (default false: 404). */
void vfs_set_dotfiles(struct vfs *v, bool allow);

/* Files of `bytes` or less (default VFS_MEMORY_MAX), and of an eighth of
 * vfs_create's max_bytes or less, are read into memory when loaded
 * (vfs_file.data) and sent from there; the others are sent from their
 * handle.  Entries loaded before the call keep what they have.  0: only
 * empty files. */
void vfs_set_memory_max(struct vfs *v, uint64_t bytes);

/* Tests: the clock the cache reads (NULL: the monotonic one). */
void vfs_set_clock(struct vfs *v, int64_t (*now_ms)(void));
/* Tests: the wall clock an entry's load is compared with the file's times
 * by (NULL: jaws_wall_ns). */
void vfs_set_wall_clock(struct vfs *v, int64_t (*now_ns)(void));

/* An HTTP-date of t into out (30 bytes at least). */
void vfs_format_date(int64_t t, char *out);

#endif /* JAWS_VFS_H */
