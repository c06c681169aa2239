/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_jaws_vfs.c - the JAWS example's cached virtual filesystem
 * (examples/jaws/vfs.c): hits and misses, LRU eviction by entries and by
 * bytes, invalidation when a file changes (under a clock the test moves),
 * a file rewritten in place with its mtime put back, entries loaded too
 * soon after a change to trust the times, a replaced file kept alive by
 * the reference a response holds, the document root's boundary (links
 * out of it, missing files, directories) and names that start with '.'.
 * On Windows too, over jaws_os_win32.c (the file calls the test
 * itself makes are the #if block below); there the links out of the root
 * are left to tests/win32/jaws-wine.sh, since making one needs a
 * privilege a Windows user may not have.
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <direct.h>
#include <windows.h>
#define mkdir(path, mode) _mkdir(path)
#define unlink(path) (DeleteFileA(path) ? 0 : -1)
/* rename() over a file: the C runtime's does not replace one, and
 * MoveFileEx does not replace one that is open (the cache holds it), even
 * shared for deletion; what that sharing allows is moving the open file
 * aside, so a deploy on Windows does that first.  The old handle reads the
 * old bytes either way. */
static int replace_file(const char *from, const char *to) {
  char aside[600];
  if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING)) return 0;
  snprintf(aside, sizeof aside, "%s.old", to);
  return MoveFileExA(to, aside, 0) && MoveFileExA(from, to, 0) ? 0 : -1;
}
#define rename(from, to) replace_file(from, to)
#define HAVE_LINKS false
#else
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define HAVE_LINKS true
#endif

#include "examples/jaws/jaws_os.h"
#include "examples/jaws/vfs.h"
#include "runner.h"

static char dir[256];
static int64_t fake_now = 1000000;

static int64_t fake_clock(void) { return fake_now; }

/* A directory below dir. */
static void put_dir(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
}

static void put(const char *name, const char *text, size_t repeat) {
  char path[512];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb"); /* binary: the sizes asserted are the bytes put */
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  for (size_t i = 0; i < repeat; i++) fputs(text, f);
  fclose(f);
}

#if defined(_WIN32)
static void make_dir(void) {
  static unsigned serial;
  char tmp[MAX_PATH];
  DWORD n = GetTempPathA(sizeof tmp, tmp);
  CU_ASSERT_FATAL(n > 0 && n < sizeof tmp);
  snprintf(dir, sizeof dir, "%staxi-vfs.%lu.%u", tmp,
           (unsigned long)GetCurrentProcessId(), serial++);
  CU_ASSERT_FATAL(CreateDirectoryA(dir, NULL));
}

/* Delete path and, for a directory, everything below it (no links are
 * made on Windows: nothing leads out of it). */
static void remove_tree(const char *path) {
  WIN32_FIND_DATAA fd;
  char pattern[600], sub[600];
  snprintf(pattern, sizeof pattern, "%s/*", path);
  HANDLE h = FindFirstFileA(pattern, &fd);
  if (h != INVALID_HANDLE_VALUE) {
    do {
      if (strcmp(fd.cFileName, ".") == 0 || strcmp(fd.cFileName, "..") == 0)
        continue;
      snprintf(sub, sizeof sub, "%s/%s", path, fd.cFileName);
      if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
        remove_tree(sub);
      else
        CU_ASSERT(DeleteFileA(sub));
    } while (FindNextFileA(h, &fd));
    FindClose(h);
  }
  CU_ASSERT(RemoveDirectoryA(path));
}

static void remove_dir(void) { remove_tree(dir); }
#else
static void make_dir(void) {
  snprintf(dir, sizeof dir, "%s/taxi-vfs.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
}

static void remove_dir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}
#endif

/* Set path's modification time to mtime_ns (since 1970), its contents
 * untouched: what cp -p, rsync -t and tar do after writing. */
static void set_mtime(const char *path, int64_t mtime_ns) {
#if defined(_WIN32)
  uint64_t ticks = (uint64_t)(mtime_ns / 100 + INT64_C(116444736000000000));
  FILETIME ft;
  HANDLE h = CreateFileA(path, FILE_WRITE_ATTRIBUTES,
                         FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                         NULL, OPEN_EXISTING, 0, NULL);
  ft.dwLowDateTime = (DWORD)ticks;
  ft.dwHighDateTime = (DWORD)(ticks >> 32);
  CU_ASSERT_FATAL(h != INVALID_HANDLE_VALUE);
  CU_ASSERT(SetFileTime(h, NULL, NULL, &ft));
  CloseHandle(h);
#else
  struct timespec ts[2];
  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1].tv_sec = (time_t)(mtime_ns / 1000000000);
  ts[1].tv_nsec = (long)(mtime_ns % 1000000000);
  CU_ASSERT_EQUAL(utimensat(AT_FDCWD, path, ts, 0), 0);
#endif
}

/* A wall clock well past every file the tests make: no entry is loaded
 * within VFS_RACY_NS of its file's change, so only the times tell. */
static int64_t late_wall(void) { return jaws_wall_ns() + 2 * VFS_RACY_NS; }

static struct vfs *make_vfs(size_t bytes, unsigned entries) {
  struct vfs *v = NULL;
  CU_ASSERT_EQUAL_FATAL(vfs_create(&v, dir, bytes, entries), 0);
  vfs_set_clock(v, fake_clock);
  return v;
}

static void test_hits(void) {
  struct vfs *v;
  struct vfs_file *a, *b, *big;
  struct vfs_stats st;
  make_dir();
  put("a.html", "hello\n", 1);
  put("big.bin", "0123456789", 10000); /* 100000 bytes: not in memory */
  v = make_vfs(1 << 20, 16);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/a.html", &a), 0);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/a.html", &b), 0);
  CU_ASSERT_PTR_EQUAL(a, b);
  CU_ASSERT_EQUAL(a->size, 6);
  CU_ASSERT_PTR_NOT_NULL(a->data);
  if (a->data) CU_ASSERT_EQUAL(memcmp(a->data, "hello\n", 6), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(a->meta, "Content-Type: text/html"));
  CU_ASSERT_PTR_NOT_NULL(strstr(a->meta, "Last-Modified: "));
  CU_ASSERT_EQUAL(vfs_lookup(v, "/big.bin", &big), 0);
  CU_ASSERT_EQUAL(big->size, 100000);
  CU_ASSERT_PTR_NULL(big->data);
  CU_ASSERT_NOT_EQUAL(big->fd, TAXI_INVALID_HANDLE);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.hits, 1);
  CU_ASSERT_EQUAL(st.misses, 2);
  CU_ASSERT_EQUAL(st.entries, 2);
  CU_ASSERT_EQUAL(st.bytes, 6);
  vfs_release(a);
  vfs_release(b);
  vfs_release(big);
  vfs_destroy(v);
  remove_dir();
}

/* vfs_set_memory_max: a file of that size or less is read into memory
 * (and counted in the cache's bytes), one larger is sent from its handle;
 * an eighth of the cache's bytes bounds it all the same. */
static void test_memory_max(void) {
  struct vfs *v;
  struct vfs_file *mid, *big, *huge;
  struct vfs_stats st;
  make_dir();
  put("mid.bin", "0123456789", 10000);  /* 100000 bytes */
  put("big.bin", "0123456789", 20001);  /* 200010 bytes */
  put("huge.bin", "0123456789", 30000); /* 300000 bytes */
  v = make_vfs(2400000, 16);            /* an eighth: 300000 bytes */
  vfs_set_memory_max(v, 200010);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/mid.bin", &mid), 0);
  CU_ASSERT_PTR_NOT_NULL(mid->data);
  CU_ASSERT_EQUAL(mid->fd, TAXI_INVALID_HANDLE);
  if (mid->data)
    CU_ASSERT_EQUAL(memcmp(mid->data + 99990, "0123456789", 10), 0);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/big.bin", &big), 0);
  CU_ASSERT_PTR_NOT_NULL(big->data); /* exactly the bound */
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/huge.bin", &huge), 0);
  CU_ASSERT_PTR_NULL(huge->data); /* over it */
  CU_ASSERT_NOT_EQUAL(huge->fd, TAXI_INVALID_HANDLE);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.bytes, 300010);
  vfs_release(mid);
  vfs_release(big);
  vfs_release(huge);
  vfs_destroy(v);

  /* The cache's eighth wins over a larger memory_max. */
  v = make_vfs(1600000, 16); /* an eighth: 200000 bytes */
  vfs_set_memory_max(v, 1u << 30);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/mid.bin", &mid), 0);
  CU_ASSERT_PTR_NOT_NULL(mid->data);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/big.bin", &big), 0);
  CU_ASSERT_PTR_NULL(big->data);
  vfs_release(mid);
  vfs_release(big);
  vfs_destroy(v);

  /* 0: no file with a byte is held in memory. */
  v = make_vfs(1 << 20, 16);
  vfs_set_memory_max(v, 0);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/mid.bin", &mid), 0);
  CU_ASSERT_PTR_NULL(mid->data);
  vfs_release(mid);
  vfs_destroy(v);
  remove_dir();
}

static void test_lru_entries(void) {
  struct vfs *v;
  struct vfs_file *f, *a;
  struct vfs_stats st;
  make_dir();
  put("a", "a", 1);
  put("b", "b", 1);
  put("c", "c", 1);
  v = make_vfs(1 << 20, 2);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/a", &a), 0);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/b", &f), 0);
  vfs_release(f);
  vfs_release(a);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/a", &f), 0); /* a is the most recent */
  vfs_release(f);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/c", &f), 0); /* evicts b */
  vfs_release(f);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.entries, 2);
  CU_ASSERT_EQUAL(st.evictions, 1);
  CU_ASSERT_EQUAL(st.misses, 3);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/a", &f), 0); /* still cached */
  vfs_release(f);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.misses, 3);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/b", &f), 0); /* was evicted */
  vfs_release(f);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.misses, 4);
  vfs_destroy(v);
  remove_dir();
}

static void test_lru_bytes(void) {
  struct vfs *v;
  struct vfs_file *f;
  struct vfs_stats st;
  char name[16];
  make_dir();
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof name, "f%d", i);
    put(name, "0123456789", 100); /* 1000 bytes */
  }
  v = make_vfs(8000, 100); /* eight of them in memory */
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof name, "/f%d", i);
    CU_ASSERT_EQUAL(vfs_lookup(v, name, &f), 0);
    CU_ASSERT_PTR_NOT_NULL(f->data);
    vfs_release(f);
  }
  vfs_get_stats(v, &st);
  CU_ASSERT(st.bytes <= 8000);
  CU_ASSERT_EQUAL(st.entries, 8);
  CU_ASSERT_EQUAL(st.evictions, 2);
  vfs_destroy(v);
  remove_dir();
}

static void test_invalidation(void) {
  struct vfs *v;
  struct vfs_file *f, *g;
  struct vfs_stats st;
  make_dir();
  put("page.txt", "first\n", 1);
  v = make_vfs(1 << 20, 16);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/page.txt", &f), 0);
  vfs_release(f);
  put("page.txt", "second version\n", 1);
  /* Within a second of the last check the cache answers alone. */
  fake_now += 500;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/page.txt", &g), 0);
  CU_ASSERT_PTR_EQUAL(g, f);
  CU_ASSERT_EQUAL(g->size, 6);
  vfs_release(g);
  /* After it, the change is seen. */
  fake_now += 1000;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/page.txt", &g), 0);
  CU_ASSERT_EQUAL(g->size, 15);
  if (g->data) CU_ASSERT_EQUAL(memcmp(g->data, "second version\n", 15), 0);
  vfs_release(g);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.invalidations, 1);
  /* A file that disappears is 404 once checked again. */
  CU_ASSERT_EQUAL(vfs_lookup(v, "/page.txt", &g), 0);
  vfs_release(g);
  {
    char path[512];
    snprintf(path, sizeof path, "%s/page.txt", dir);
    CU_ASSERT_EQUAL(unlink(path), 0);
  }
  fake_now += 1001;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/page.txt", &g), 404);
  vfs_destroy(v);
  remove_dir();
}

/* A file rewritten in place, with the same size, its mtime then put back
 * to the nanosecond (as cp -p or rsync -t leave it): its device, inode,
 * size and mtime are the cached entry's, and only its ctime tells.  It
 * is served new at the first check after the change, from memory and
 * from a handle alike (Last-Modified is the file's mtime either way). */
static void test_rewrite_in_place(void) {
  struct vfs *v;
  struct vfs_file *small, *big, *g;
  struct jaws_stat st;
  char path[512], buf[10];
  make_dir();
  put("s.txt", "AAAA\n", 1);
  put("b.bin", "OLDOLDOLD!", 10000); /* 100000 bytes: from a handle */
  v = make_vfs(1 << 20, 16);
  vfs_set_wall_clock(v, late_wall);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/s.txt", &small), 0);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/b.bin", &big), 0);
  /* (Their references are kept, so that a new entry cannot reuse their
   * memory and pass for them.) */
  CU_ASSERT_FALSE(small->racy);
  CU_ASSERT_FALSE(big->racy);
  snprintf(path, sizeof path, "%s/s.txt", dir);
  CU_ASSERT_EQUAL_FATAL(jaws_stat(path, &st), 0);
  put("s.txt", "BBBB\n", 1); /* truncated and written: the same inode */
  set_mtime(path, st.mtime_ns);
  snprintf(path, sizeof path, "%s/b.bin", dir);
  CU_ASSERT_EQUAL_FATAL(jaws_stat(path, &st), 0);
  put("b.bin", "NEWNEWNEW!", 10000);
  set_mtime(path, st.mtime_ns);
  /* Within the interval the cache answers alone, as before. */
  fake_now += VFS_CHECK_MS - 1;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/s.txt", &g), 0);
  CU_ASSERT_PTR_EQUAL(g, small);
  vfs_release(g);
  /* After it, the new contents and a new entry. */
  fake_now += 1;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/s.txt", &g), 0);
  CU_ASSERT_PTR_NOT_EQUAL(g, small);
  CU_ASSERT_EQUAL(g->size, 5);
  CU_ASSERT(g->data && memcmp(g->data, "BBBB\n", 5) == 0);
  vfs_release(g);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/b.bin", &g), 0);
  CU_ASSERT_PTR_NOT_EQUAL(g, big);
  CU_ASSERT_EQUAL(g->size, 100000);
  CU_ASSERT_EQUAL(jaws_read_at(g->fd, buf, sizeof buf, 99990), 0);
  CU_ASSERT_EQUAL(memcmp(buf, "NEWNEWNEW!", 10), 0);
  vfs_release(g);
  vfs_release(small);
  vfs_release(big);
  vfs_destroy(v);
  remove_dir();
}

/* File systems stamp times from a coarse clock (a jiffy, FAT's 2 s): a
 * rewrite right after a load may leave every time as the entry has it.
 * So an entry loaded within VFS_RACY_NS of its file's last change is
 * loaded again at its next check even when nothing changed; one loaded
 * later is kept while its times match. */
static void test_racy(void) {
  struct vfs *v;
  struct vfs_file *f, *g;
  struct vfs_stats st;
  make_dir();
  put("fresh.txt", "just written\n", 1);
  v = make_vfs(1 << 20, 16); /* the real wall clock: the file is new */
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/fresh.txt", &f), 0);
  CU_ASSERT_TRUE(f->racy);
  fake_now += VFS_CHECK_MS;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/fresh.txt", &g), 0);
  CU_ASSERT_PTR_NOT_EQUAL(g, f); /* loaded again (f held: not reused) */
  CU_ASSERT_EQUAL(g->size, 13);
  vfs_release(g);
  vfs_release(f);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.invalidations, 1);
  vfs_destroy(v);
  /* The same file, its change long past by the wall clock: kept. */
  v = make_vfs(1 << 20, 16);
  vfs_set_wall_clock(v, late_wall);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/fresh.txt", &f), 0);
  CU_ASSERT_FALSE(f->racy);
  fake_now += VFS_CHECK_MS;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/fresh.txt", &g), 0);
  CU_ASSERT_PTR_EQUAL(g, f);
  vfs_release(g);
  vfs_release(f);
  vfs_get_stats(v, &st);
  CU_ASSERT_EQUAL(st.invalidations, 0);
  vfs_destroy(v);
  remove_dir();
}

/* A response holds the old file while it is replaced: its bytes stay the
 * old ones until it lets go, from memory and from an open handle alike. */
static void test_refcount(void) {
  struct vfs *v;
  struct vfs_file *small, *big, *g;
  char from[512], to[512], buf[10];
  make_dir();
  put("s.txt", "old\n", 1);
  put("b.bin", "OLDOLDOLD!", 10000);
  v = make_vfs(1 << 20, 16);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/s.txt", &small), 0);
  CU_ASSERT_EQUAL_FATAL(vfs_lookup(v, "/b.bin", &big), 0);
  put("s.new", "new content\n", 1);
  put("b.new", "NEWNEWNEW!", 20000);
  snprintf(from, sizeof from, "%s/s.new", dir);
  snprintf(to, sizeof to, "%s/s.txt", dir);
  CU_ASSERT_EQUAL(rename(from, to), 0);
  snprintf(from, sizeof from, "%s/b.new", dir);
  snprintf(to, sizeof to, "%s/b.bin", dir);
  CU_ASSERT_EQUAL(rename(from, to), 0);
  fake_now += 2000;
  CU_ASSERT_EQUAL(vfs_lookup(v, "/s.txt", &g), 0);
  CU_ASSERT_PTR_NOT_EQUAL(g, small);
  CU_ASSERT_EQUAL(g->size, 12);
  vfs_release(g);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/b.bin", &g), 0);
  CU_ASSERT_PTR_NOT_EQUAL(g, big);
  CU_ASSERT_EQUAL(g->size, 200000);
  vfs_release(g);
  /* The old ones, out of the cache, still whole. */
  CU_ASSERT_EQUAL(small->size, 4);
  CU_ASSERT_EQUAL(memcmp(small->data, "old\n", 4), 0);
  CU_ASSERT_EQUAL(big->size, 100000);
  CU_ASSERT_EQUAL(jaws_read_at(big->fd, buf, sizeof buf, 99990), 0);
  CU_ASSERT_EQUAL(memcmp(buf, "OLDOLDOLD!", 10), 0);
  vfs_release(small);
  vfs_release(big);
  vfs_destroy(v);
  remove_dir();
}

static void test_boundary(void) {
  struct vfs *v;
  struct vfs_file *f;
  char inside[300], target[600], link[600];
  make_dir();
  put("secret.txt", "secret\n", 1);
  /* The root is a subdirectory; the secret is beside it. */
  snprintf(inside, sizeof inside, "%s/root", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(inside, 0755), 0);
#if !defined(_WIN32)
  snprintf(target, sizeof target, "%s/secret.txt", dir);
  snprintf(link, sizeof link, "%s/link.txt", inside);
  CU_ASSERT_EQUAL(symlink(target, link), 0);
  snprintf(link, sizeof link, "%s/up", inside);
  CU_ASSERT_EQUAL(symlink(dir, link), 0);
#endif
  snprintf(link, sizeof link, "%s/sub", inside);
  CU_ASSERT_EQUAL(mkdir(link, 0755), 0);
  snprintf(link, sizeof link, "%s/sub/index.html", inside);
  {
    FILE *o = fopen(link, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    fputs("<p>index</p>\n", o);
    fclose(o);
  }
  CU_ASSERT_EQUAL_FATAL(vfs_create(&v, inside, 1 << 20, 16), 0);
  if (HAVE_LINKS) {
    CU_ASSERT_EQUAL(vfs_lookup(v, "/link.txt", &f), 403);
    CU_ASSERT_EQUAL(vfs_lookup(v, "/up/secret.txt", &f), 403);
  }
  CU_ASSERT_EQUAL(vfs_lookup(v, "/../secret.txt", &f), 403);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/missing", &f), 404);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/sub/index.html/x", &f), 404);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/", &f), 404); /* no index.html */
  CU_ASSERT_EQUAL(vfs_lookup(v, "/sub", &f), 301);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/sub/", &f), 0);
  CU_ASSERT_EQUAL(f->size, 13);
  vfs_release(f);
  vfs_destroy(v);
  snprintf(target, sizeof target, "%s/none", dir);
  CU_ASSERT_EQUAL(vfs_create(&v, target, 1 << 20, 16), JAWS_OS_NOENT);
  CU_ASSERT_EQUAL(vfs_create(&v, link, 1 << 20, 16), JAWS_OS_NOENT);
  remove_dir();
}

/* Names below the root that start with '.' are 404, existing or not, by
 * the request's path or by what it resolves to (a link to .git), except
 * a first .well-known; the root itself may be below such a name.  All
 * served once allowed. */
static void test_dot_names(void) {
  static const char *const hidden[] = {
      "/.git/config", "/.env",       "/sub/.hidden",    "/.git/",
      "/.git",        "/.missing",   "/sub/.missing/x", "/.well-known/.x",
      "/..x",         "/sub/../.env"};
  struct vfs *v;
  struct vfs_file *f;
  char root[300];
  make_dir();
  snprintf(root, sizeof root, "%s/.site", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(root, 0755), 0);
  put_dir(".site/.git");
  put_dir(".site/sub");
  put_dir(".site/.well-known");
  put(".site/.git/config", "[core]\n", 1);
  put(".site/.env", "SECRET=1\n", 1);
  put(".site/sub/.hidden", "hidden\n", 1);
  put(".site/sub/ok.txt", "ok\n", 1);
  put(".site/.well-known/security.txt", "contact\n", 1);
  put(".site/.well-known/.x", "x\n", 1);
  put(".site/..x", "dots\n", 1);
#if !defined(_WIN32)
  {
    char link[600];
    snprintf(link, sizeof link, "%s/gitlink", root);
    CU_ASSERT_EQUAL(symlink(".git", link), 0);
  }
#endif
  CU_ASSERT_EQUAL_FATAL(vfs_create(&v, root, 1 << 20, 16), 0);
  vfs_set_clock(v, fake_clock);
  for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++) {
    f = NULL;
    CU_ASSERT_EQUAL(vfs_lookup(v, hidden[i], &f), 404);
    CU_ASSERT_PTR_NULL(f);
  }
  if (HAVE_LINKS) CU_ASSERT_EQUAL(vfs_lookup(v, "/gitlink/config", &f), 404);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/.well-known", &f), 301);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/.well-known/security.txt", &f), 0);
  CU_ASSERT_EQUAL(f->size, 8);
  vfs_release(f);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/sub/ok.txt", &f), 0);
  vfs_release(f);
  /* Allowed: served (the missing ones missing). */
  vfs_set_dotfiles(v, true);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/.git/config", &f), 0);
  CU_ASSERT_EQUAL(f->size, 7);
  vfs_release(f);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/.env", &f), 0);
  vfs_release(f);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/sub/.hidden", &f), 0);
  vfs_release(f);
  CU_ASSERT_EQUAL(vfs_lookup(v, "/..x", &f), 0);
  vfs_release(f);
  if (HAVE_LINKS) {
    CU_ASSERT_EQUAL(vfs_lookup(v, "/gitlink/config", &f), 0);
    vfs_release(f);
  }
  CU_ASSERT_EQUAL(vfs_lookup(v, "/.missing", &f), 404);
  vfs_destroy(v);
  remove_dir();
}

static void test_date(void) {
  char d[32];
  vfs_format_date(0, d);
  CU_ASSERT_STRING_EQUAL(d, "Thu, 01 Jan 1970 00:00:00 GMT");
  vfs_format_date(784111777, d);
  CU_ASSERT_STRING_EQUAL(d, "Sun, 06 Nov 1994 08:49:37 GMT");
  vfs_format_date(951782400, d); /* a leap day */
  CU_ASSERT_STRING_EQUAL(d, "Tue, 29 Feb 2000 00:00:00 GMT");
}

static CU_TestInfo vfs_tests[] = {
    {"hits, memory and handle entries", test_hits},
    {"files held in memory up to memory_max", test_memory_max},
    {"LRU eviction by entries", test_lru_entries},
    {"LRU eviction by bytes", test_lru_bytes},
    {"invalidation when a file changes", test_invalidation},
    {"a file rewritten in place, its mtime put back", test_rewrite_in_place},
    {"entries loaded within a tick of a change", test_racy},
    {"a replaced file stays whole while referenced", test_refcount},
    {"the document root's boundary", test_boundary},
    {"names that start with a dot", test_dot_names},
    {"HTTP dates", test_date},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t vfs_suite = {"jaws: cached virtual filesystem",
                                            vfs_tests, 60, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {&vfs_suite};
  return taxi_test_run("jaws VFS cache", suites, 1, argc, argv);
}
