/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docroot.c - the files of the WebSTONE-like benchmark: the table of the
 * paper's mix (500 B 35 %, 5 KB 50 %, 50 KB 14 %, 5 MB 1 %) and the single
 * sizes, writing them (--make-docroot), reading them back to verify every
 * byte a server sends, and picking the file of each request.
 *
 * A file's contents come from a PRNG seeded by its path, so two docroots
 * made apart are identical and a byte a server changes shows up.  Sizes are
 * decimal (5 KB = 5000 bytes).
 */
#include "webstone.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The mix: WebSTONE's classes, several files of each so that requests do
 * not all hit one file. */
static const struct {
  const char *name;
  size_t size;
  unsigned weight, files;
} mix[] = {
    {"500b", 500, 35, 50},
    {"5k", 5000, 50, 50},
    {"50k", 50000, 14, 20},
    {"5m", 5000000, 1, 2},
};
#define MIX_CLASSES (sizeof mix / sizeof mix[0])

/* The single sizes of the paper's Figures 6-10. */
static const size_t sizes[] = {500, 5000, 50000, 500000, 5000000};
#define SIZES (sizeof sizes / sizeof sizes[0])

uint64_t ws_rng_next(uint64_t *s) { /* xorshift64* */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C(2685821657736338717);
}

/* Printable bytes, lines of 64: any server serves them as they are. */
static void fill(unsigned char *buf, size_t size, const char *path) {
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint64_t s = UINT64_C(1469598103934665603); /* FNV-1a of the path */
  size_t i;
  for (; *path; path++)
    s = (s ^ (unsigned char)*path) * UINT64_C(1099511628211);
  if (s == 0) s = 1;
  for (i = 0; i < size; i++)
    buf[i] =
        (i % 65 == 64) ? '\n' : (unsigned char)alphabet[ws_rng_next(&s) >> 58];
}

static int write_file(const char *dir, const char *path, size_t size,
                      unsigned char *buf) {
  char name[4096];
  FILE *f;
  snprintf(name, sizeof name, "%s%s", dir, path);
  fill(buf, size, path);
  f = fopen(name, "wb");
  if (f == NULL || fwrite(buf, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "webstone: %s: %s\n", name, strerror(errno));
    if (f) fclose(f);
    return -1;
  }
  return 0;
}

static int make_dir(const char *dir, const char *sub) {
  char name[4096];
  snprintf(name, sizeof name, "%s%s", dir, sub);
  if (mkdir(name, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "webstone: mkdir %s: %s\n", name, strerror(errno));
    return -1;
  }
  return 0;
}

static void mix_path(char *out, size_t n, size_t cls, size_t k) {
  snprintf(out, n, "/mix/%s-%02zu.html", mix[cls].name, k);
}

static void size_path(char *out, size_t n, size_t size) {
  snprintf(out, n, "/size/%zu.bin", size);
}

int ws_make_docroot(const char *dir) {
  unsigned char *buf = malloc(5000000);
  char path[64];
  size_t c, k;
  int rc = -1;
  if (buf == NULL) {
    fprintf(stderr, "webstone: out of memory\n");
    return -1;
  }
  if (make_dir(dir, "") < 0 || make_dir(dir, "/mix") < 0 ||
      make_dir(dir, "/size") < 0)
    goto out;
  for (c = 0; c < MIX_CLASSES; c++)
    for (k = 0; k < mix[c].files; k++) {
      mix_path(path, sizeof path, c, k);
      if (write_file(dir, path, mix[c].size, buf) < 0) goto out;
    }
  for (c = 0; c < SIZES; c++) {
    size_path(path, sizeof path, sizes[c]);
    if (write_file(dir, path, sizes[c], buf) < 0) goto out;
  }
  rc = 0;
out:
  free(buf);
  return rc;
}

/* Read dir/path whole into f. */
static int load_file(struct ws_file *f, const char *dir, const char *path) {
  char name[4096];
  struct stat st;
  size_t got = 0;
  int fd;
  snprintf(f->path, sizeof f->path, "%s", path);
  snprintf(name, sizeof name, "%s%s", dir, path);
  fd = open(name, O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "webstone: %s: %s (make it with --make-docroot)\n", name,
            strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  f->size = (size_t)st.st_size;
  f->data = malloc(f->size ? f->size : 1);
  if (f->data == NULL) {
    fprintf(stderr, "webstone: out of memory\n");
    close(fd);
    return -1;
  }
  while (got < f->size) {
    ssize_t n = read(fd, f->data + got, f->size - got);
    if (n <= 0) {
      fprintf(stderr, "webstone: %s: %s\n", name,
              n < 0 ? strerror(errno) : "shorter than it was");
      close(fd);
      return -1;
    }
    got += (size_t)n;
  }
  close(fd);
  return 0;
}

int ws_docroot_load(struct ws_docroot *d, const char *dir, long size) {
  char path[64];
  size_t c, k, n = 0;
  memset(d, 0, sizeof *d);
  if (size > 0) {
    d->files = calloc(1, sizeof *d->files);
    if (d->files == NULL) return -1;
    size_path(path, sizeof path, (size_t)size);
    d->nfiles = 1;
    if (load_file(&d->files[0], dir, path) < 0) {
      ws_docroot_free(d);
      return -1;
    }
    d->classes[0] = (struct ws_class){"size", (size_t)size, 100, 0, 1};
    d->nclasses = 1;
    d->total_weight = 100;
    return 0;
  }
  for (c = 0; c < MIX_CLASSES; c++) n += mix[c].files;
  d->files = calloc(n, sizeof *d->files);
  if (d->files == NULL) return -1;
  for (c = 0; c < MIX_CLASSES; c++) {
    d->classes[c] = (struct ws_class){mix[c].name, mix[c].size, mix[c].weight,
                                      d->nfiles, mix[c].files};
    d->total_weight += mix[c].weight;
    for (k = 0; k < mix[c].files; k++) {
      mix_path(path, sizeof path, c, k);
      if (load_file(&d->files[d->nfiles++], dir, path) < 0) {
        ws_docroot_free(d);
        return -1;
      }
    }
  }
  d->nclasses = MIX_CLASSES;
  return 0;
}

void ws_docroot_free(struct ws_docroot *d) {
  size_t i;
  if (d->files == NULL) return;
  for (i = 0; i < d->nfiles; i++) free(d->files[i].data);
  free(d->files);
  d->files = NULL;
}

const struct ws_file *ws_docroot_pick(const struct ws_docroot *d,
                                      uint64_t *rng) {
  uint64_t r = ws_rng_next(rng);
  unsigned w = (unsigned)((r >> 32) % d->total_weight);
  size_t c = 0;
  while (c + 1 < d->nclasses && w >= d->classes[c].weight) {
    w -= d->classes[c].weight;
    c++;
  }
  return &d->files[d->classes[c].first +
                   (size_t)(r & 0xffffffffu) % d->classes[c].count];
}
