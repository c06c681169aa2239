/* SPDX-License-Identifier: Apache-2.0 */
/*
 * malloc_count.c - an LD_PRELOAD library that counts heap allocations.
 *
 *     LD_PRELOAD=.../malloc_count.so MALLOC_COUNT_FILE=FILE program ...
 *
 * Counts, process-wide, every call to malloc, calloc, realloc,
 * posix_memalign, aligned_alloc, memalign and valloc, and forwards each to
 * the next definition (the C library's), found with dlsym(RTLD_NEXT).
 *
 * If MALLOC_COUNT_FILE is set, the library appends to that file
 *
 *     malloc_count: N sigusr2     each time the process receives SIGUSR2
 *     malloc_count: N             when the process exits normally
 *
 * with N the number of calls so far.  The SIGUSR2 handler is installed only
 * then (otherwise SIGUSR2 keeps its default action, which ends the process):
 * a benchmark harness sends SIGUSR2 before and after its measured phase and
 * divides the difference by the messages measured.  The handler uses only
 * async-signal-safe calls (open, write, close) and formats the number
 * itself.  A program that installs its own SIGUSR2 handler, or blocks
 * SIGUSR2 in every thread, gets no lines of the first kind.
 *
 * To find where the allocations of a measured phase come from, set
 * MALLOC_COUNT_TRACE=FILE as well: between the first SIGUSR2 and the
 * second, each call counted appends to FILE a line
 *
 *     malloc_count: FUNCTION SIZE
 *
 * and the call's stack (backtrace_symbols_fd: one frame a line, module and
 * offset, this module's own first; addr2line turns an offset into a
 * function and line).  Not for timing: a stack walk costs microseconds.
 * A call made inside the tracing itself (the unwinder's, say) is counted
 * but not traced.
 *
 * dlsym may itself allocate (glibc's dlerror state is calloc'ed), so until
 * the real functions are known, allocations are served from a static bump
 * buffer; free and realloc recognise those blocks and never pass them on.
 *
 * Linux/glibc (or any system with dlsym(RTLD_NEXT) and ELF interposition)
 * only; elsewhere this file compiles to nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT, memalign, valloc */
#endif

#include <stdlib.h> /* defines __GLIBC__ */

#if defined(__linux__) && defined(__GLIBC__)

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static atomic_ullong calls;

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);

enum { UNRESOLVED, RESOLVING, RESOLVED };
static atomic_int resolve_state;

/* ---- the bootstrap buffer ---------------------------------------------------
 *
 * Each block is preceded by a header holding its size (for realloc).
 * Blocks are never reused: only a handful are ever needed.
 */

#define BOOT_SIZE (64 * 1024)
#define BOOT_ALIGN 16

static _Alignas(4096) unsigned char boot[BOOT_SIZE];
static atomic_size_t boot_used;

static int in_boot(const void *p) {
  return (const unsigned char *)p >= boot &&
         (const unsigned char *)p < boot + BOOT_SIZE;
}

static void *boot_alloc(size_t size, size_t align) {
  size_t used, start, end;
  if (align < BOOT_ALIGN) align = BOOT_ALIGN;
  do {
    used = atomic_load(&boot_used);
    start = (used + BOOT_ALIGN + align - 1) & ~(align - 1); /* header room */
    if (start > BOOT_SIZE || size > BOOT_SIZE - start) return NULL;
    end = start + size;
  } while (!atomic_compare_exchange_weak(&boot_used, &used, end));
  memcpy(boot + start - sizeof size, &size, sizeof size);
  return boot + start; /* static storage: already zeroed */
}

static size_t boot_size(const void *p) {
  size_t size;
  memcpy(&size, (const unsigned char *)p - sizeof size, sizeof size);
  return size;
}

/* ---- finding the real functions ------------------------------------------ */

#define LOOKUP(var, name) (var = (__typeof__(var))dlsym(RTLD_NEXT, name))

/* Returns whether the real functions are usable.  While one thread looks
 * them up (and dlsym calls back into us), every caller gets `boot`. */
static int resolve(void) {
  int expected = UNRESOLVED;
  if (atomic_load_explicit(&resolve_state, memory_order_acquire) == RESOLVED)
    return 1;
  if (!atomic_compare_exchange_strong(&resolve_state, &expected, RESOLVING))
    return 0; /* in progress (perhaps in this very thread, via dlsym) */
  LOOKUP(real_malloc, "malloc");
  LOOKUP(real_calloc, "calloc");
  LOOKUP(real_realloc, "realloc");
  LOOKUP(real_free, "free");
  LOOKUP(real_posix_memalign, "posix_memalign");
  LOOKUP(real_aligned_alloc, "aligned_alloc");
  LOOKUP(real_memalign, "memalign");
  LOOKUP(real_valloc, "valloc");
  if (!real_malloc || !real_calloc || !real_realloc || !real_free) {
    static const char msg[] =
        "malloc_count: cannot find the C library's "
        "malloc functions\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
  }
  atomic_store_explicit(&resolve_state, RESOLVED, memory_order_release);
  return 1;
}

/* ---- tracing (MALLOC_COUNT_TRACE) ---------------------------------------- */

static int trace_fd = -1;
/* The SIGUSR2s seen while tracing: calls are traced while it is 1. */
static atomic_int trace_phase;
/* Set while this thread writes a trace, whose own calls are not traced. */
static _Thread_local int tracing;

/* Decimal digits of n into out (no terminator); returns their number. */
static size_t format_u(unsigned long long n, char *out) {
  char digits[24];
  size_t nd = 0, len = 0;
  do {
    digits[nd++] = (char)('0' + n % 10);
    n /= 10;
  } while (n != 0);
  while (nd > 0) out[len++] = digits[--nd];
  return len;
}

static void trace(const char *fn, size_t size) {
  char line[96];
  void *frames[32];
  size_t len = 14, k;
  if (trace_fd < 0 || tracing ||
      atomic_load_explicit(&trace_phase, memory_order_relaxed) != 1)
    return;
  tracing = 1;
  memcpy(line, "malloc_count: ", len);
  for (k = 0; fn[k] != '\0'; k++) line[len++] = fn[k];
  line[len++] = ' ';
  len += format_u(size, line + len);
  line[len++] = '\n';
  (void)!write(trace_fd, line, len);
  /* Every frame: how many are this module's own depends on what the
   * compiler inlined, and a frame too few skipped is better than the
   * caller's lost. */
  int n = backtrace(frames, 32);
  if (n > 0) backtrace_symbols_fd(frames, n, trace_fd);
  tracing = 0;
}

static void count(const char *fn, size_t size) {
  atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
  trace(fn, size);
}

/* ---- the interposed functions -------------------------------------------- */

void *malloc(size_t size) {
  count("malloc", size);
  if (!resolve()) return boot_alloc(size, 0);
  return real_malloc(size);
}

void *calloc(size_t n, size_t size) {
  count("calloc", size != 0 && n > SIZE_MAX / size ? SIZE_MAX : n * size);
  if (!resolve()) {
    if (size != 0 && n > SIZE_MAX / size) return NULL;
    return boot_alloc(n * size, 0);
  }
  return real_calloc(n, size);
}

void *realloc(void *p, size_t size) {
  count("realloc", size);
  if (p != NULL && in_boot(p)) {
    size_t old = boot_size(p);
    void *q = resolve() ? real_malloc(size) : boot_alloc(size, 0);
    if (q != NULL) memcpy(q, p, old < size ? old : size);
    return q;
  }
  if (!resolve()) return p == NULL ? boot_alloc(size, 0) : NULL;
  return real_realloc(p, size);
}

void free(void *p) {
  if (p == NULL || in_boot(p)) return;
  if (resolve()) real_free(p);
  /* else: a block from nowhere we know, during the lookup; leak it */
}

int posix_memalign(void **out, size_t align, size_t size) {
  count("posix_memalign", size);
  if (!resolve() || !real_posix_memalign) {
    void *p;
    if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *))
      return EINVAL;
    if ((p = boot_alloc(size, align)) == NULL) return ENOMEM;
    *out = p;
    return 0;
  }
  return real_posix_memalign(out, align, size);
}

void *aligned_alloc(size_t align, size_t size) {
  count("aligned_alloc", size);
  if (!resolve() || !real_aligned_alloc) return boot_alloc(size, align);
  return real_aligned_alloc(align, size);
}

void *memalign(size_t align, size_t size) {
  count("memalign", size);
  if (!resolve() || !real_memalign) return boot_alloc(size, align);
  return real_memalign(align, size);
}

void *valloc(size_t size) {
  count("valloc", size);
  if (!resolve() || !real_valloc) return boot_alloc(size, 4096);
  return real_valloc(size);
}

/* ---- reporting ----------------------------------------------------------- */

static const char *count_file; /* MALLOC_COUNT_FILE, or NULL */

/* Append "malloc_count: N<tag>\n" to count_file; async-signal-safe. */
static void write_count(const char *tag) {
  char line[96];
  size_t len = 14, k;
  int fd;

  memcpy(line, "malloc_count: ", len);
  len += format_u(atomic_load(&calls), line + len);
  for (k = 0; tag[k] != '\0' && len < sizeof line - 1; k++)
    line[len++] = tag[k];
  line[len++] = '\n';

  fd = open(count_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, line, len);
  close(fd);
}

static void on_sigusr2(int signo) {
  int saved = errno;
  (void)signo;
  write_count(" sigusr2");
  if (trace_fd >= 0) atomic_fetch_add(&trace_phase, 1);
  errno = saved;
}

__attribute__((constructor)) static void malloc_count_init(void) {
  const char *file = getenv("MALLOC_COUNT_FILE");
  const char *trace_file = getenv("MALLOC_COUNT_TRACE");
  (void)resolve();
  if (file != NULL && *file != '\0' && trace_file != NULL &&
      *trace_file != '\0') {
    void *frame;
    /* The first backtrace loads the unwinder (and allocates): now, not
     * in the measured phase. */
    (void)backtrace(&frame, 1);
    trace_fd =
        open(trace_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }
  if (file != NULL && *file != '\0') {
    struct sigaction sa;
    count_file = file;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr2;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
  }
}

__attribute__((destructor)) static void malloc_count_fini(void) {
  if (count_file != NULL) write_count("");
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int malloc_count_unsupported;
#endif
