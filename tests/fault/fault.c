/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/fault.c - an LD_PRELOAD module that makes chosen system calls
 * fail, for the fault-injection tests.
 *
 *     LD_PRELOAD=.../libtaxifault.so TAXI_FAULT=SPEC program ...
 *
 * SPEC is a comma-separated list of rules NAME:NTH[:WHAT[:COUNT[:SCOPE]]]:
 *   NAME   the call (see FAULT_CALLS below for the whole list), or one of
 *          the sites that only count some of a call's uses:
 *            read@eventfd, write@eventfd  reads and writes on descriptors
 *                       made by eventfd() (the wake-up channel),
 *            read@pipe, write@pipe  the same on pipes (the wake-up and
 *                       signal self-pipes, the splice pipes),
 *            read@signalfd  reads of a signalfd;
 *          the plain read, readv, write and writev count every call but
 *          fail only those on other descriptors (sockets, files), so that
 *          a rule for a connection's transfers never hits the wake-up;
 *          io_uring_enter, io_uring_setup and io_uring_register are the
 *          syscall(2) calls of those numbers; clock_gettime is counted
 *          and never failed (a rule for it fails nothing);
 *   NTH    the first call to fail, counting from 1 after the rules were
 *          armed (or after the gate opened, see TAXI_FAULT_AFTER);
 *   WHAT   an errno name (ENOMEM, EINTR, EAGAIN, EMFILE, ENFILE, ENOBUFS,
 *          ECONNRESET, EPIPE, EBADF, EINVAL, ...; default EINTR) or
 *          "short", a transfer of half the bytes asked for (at least 1);
 *   COUNT  how many calls in a row fail from NTH on (default 1; 0: every
 *          call from NTH on, a persistent failure);
 *   SCOPE  "any" (default): every thread's calls count; "others": only the
 *          calls of threads other than the one that armed the rules (their
 *          own count), so a test can fail a pool thread's poll() while it
 *          polls itself.
 * Example: TAXI_FAULT=epoll_wait:3:ENOMEM,epoll_ctl:1:ENOMEM:2
 * (The rules are parsed and applied by rules.c, which the Windows layer,
 * iat_win32.c, shares.)
 *
 * How each kind of call fails: calls that return -1 and set errno do so
 * without being made; pthread_create returns the error; malloc, calloc and
 * realloc return NULL with errno ENOMEM (whatever WHAT says); aio_error
 * reports a finished request as failed with WHAT (a request still in
 * progress is reported as such and not counted, so that no test frees a
 * request the C library still owns); aio_return returns -1 with WHAT.
 *
 * Other variables, read when the module loads:
 *   TAXI_FAULT_AFTER=NAME[/NAME...]  the rules count nothing until the
 *          first call of one of these names (say accept/accept4: the first
 *          connection), which counts as a call of its own name; the
 *          counters of taxi_fault_calls() count from the start regardless.
 *          A way to aim at the calls of the steady state rather than those
 *          of start-up, without knowing how many start-up makes.
 *   TAXI_FAULT_CALLER=TEXT[/TEXT...]  the rules count only calls made
 *          directly from code in a loaded object whose path contains one
 *          of the TEXTs (say "libtaxi/echo_server": calls made by the
 *          library or the program, not those the C library makes for its
 *          own ends, such as stdio's writes).  Objects loaded later are
 *          not seen.
 *   TAXI_FAULT_STATS=FILE  at exit, append to FILE one line per call
 *          made: "PROGRAM NAME CALLS INJECTED" (tests/fault/sweep.sh reads
 *          which calls a configuration makes from it).
 *   TAXI_FAULT_ONLY=PROGRAM  all of the above applies only in a process
 *          of that name (an "lt-" prefix ignored); in others the module
 *          only forwards.  So that a shell wrapper (libtool's) run with
 *          the module preloaded fails nothing of its own.
 *
 * A test program that loaded this module can also re-arm it at run time:
 * taxi_fault_arm(SPEC) replaces the rules and zeroes the counters, and
 * taxi_fault_calls(NAME) / taxi_fault_injected(NAME) say how often NAME was
 * called and failed on purpose since then, so a test can check that the
 * fault it meant to inject was injected (tests/fault/fault.h finds these
 * with dlsym, so programs still run without the module).
 *
 * Each wrapper counts the call with a relaxed atomic and forwards it to the
 * next definition (the C library's, or a sanitizer's interceptor), found
 * with dlsym(RTLD_NEXT) on first use.  Calls are counted process-wide,
 * whichever code makes them, so a rule counts the test's own calls to a
 * function too: tests inject into calls only the library makes, use
 * TAXI_FAULT_CALLER, or count with that in mind.
 *
 * What cannot be reached from here: calls the C library makes to itself
 * (glibc's eventfd_write() and its aio helper threads call the system
 * directly), and the system calls of liburing built without the C library
 * (Debian's liburing2 makes io_uring_setup, io_uring_register, mmap and
 * munmap as inline system-call instructions: io_uring_queue_init and the
 * probe cannot be failed; the io_uring_enter calls taxi makes itself, with
 * syscall(2), can).  Operations the kernel carries out for a ring (the
 * reads, writes and accepts of the uring backend) make no call at all.
 *
 * The parts: fault_module.h.  Linux/glibc only; elsewhere these files
 * compile to nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT, accept4, pipe2, splice, dl_iterate_phdr */
#endif

#include <stdlib.h> /* defines __GLIBC__ */

#if defined(__linux__) && defined(__GLIBC__)

#include "fault_module.h"

static const char *const wrapped[NCALLS] = {
#define AS_NAME(id, name) name,
    FAULT_CALLS(AS_NAME)
#undef AS_NAME
};

/* ---- rules (tests/fault/rules.c) --------------------------------------- */

static const fault_errname_t errnos[] = {
    {"EINTR", EINTR},
    {"EAGAIN", EAGAIN},
    {"ENOMEM", ENOMEM},
    {"ENOBUFS", ENOBUFS},
    {"EMFILE", EMFILE},
    {"ENFILE", ENFILE},
    {"ECONNRESET", ECONNRESET},
    {"EPIPE", EPIPE},
    {"EBADF", EBADF},
    {"EINVAL", EINVAL},
    {"EIO", EIO},
    {"ECONNABORTED", ECONNABORTED},
    {"EPROTO", EPROTO},
    {"ETIMEDOUT", ETIMEDOUT},
    {"EPERM", EPERM},
    {"ENOSPC", ENOSPC},
    {"EBUSY", EBUSY},
    {"ENOSYS", ENOSYS},
    {"ECANCELED", ECANCELED},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EMSGSIZE", EMSGSIZE},
    {"EHOSTUNREACH", EHOSTUNREACH},
    {"ENOPROTOOPT", ENOPROTOOPT},
};

_Static_assert(NCALLS <= FAULT_MAX_SITES, "FAULT_MAX_SITES is too small");

static fault_rules_t set = {
    .sites = wrapped,
    .nsites = NCALLS,
    .errors = errnos,
    .nerrors = sizeof errnos / sizeof errnos[0],
    .default_what = EINTR,
    .arming = ATOMIC_FLAG_INIT,
};

static int call_index(const char *name, size_t len) {
  return fault_rules_site(&set, name, len);
}

/* TAXI_FAULT_AFTER: the gate is open once one of `gate` was called. */
static bool gate[NCALLS];
static atomic_bool gate_open = true;

/* TAXI_FAULT_CALLER: the code ranges whose calls the rules count. */
#define MAX_RANGES 16
static struct { uintptr_t lo, hi; } ranges[MAX_RANGES];
static int nranges = -1; /* -1: every caller */

int taxi_fault_arm(const char *spec) {
  return fault_rules_arm(&set, spec) < 0 ? -EINVAL : 0;
}

unsigned long taxi_fault_calls(const char *name) {
  return fault_rules_calls(&set, name);
}

unsigned long taxi_fault_injected(const char *name) {
  return fault_rules_injected(&set, name);
}

/* ---- set-up from the environment ----------------------------------------
 * No allocation here: malloc is one of the wrapped calls. */

void fault_die(const char *msg) {
  ssize_t ignored = write(2, msg, strlen(msg));
  (void)ignored;
  _exit(2);
}

static void parse_gate(const char *list) {
  const char *s = list;
  bool any = false;
  while (*s) {
    const char *end = strchr(s, '/');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int i = call_index(s, len);
    if (i < 0) fault_die("libtaxifault: bad TAXI_FAULT_AFTER\n");
    gate[i] = any = true;
    s += len + (end ? 1 : 0);
  }
  if (any) atomic_store(&gate_open, false);
}

static int add_ranges(struct dl_phdr_info *info, size_t size, void *arg) {
  const char *text = arg;
  (void)size;
  const char *name = info->dlpi_name;
  /* The main program has an empty name: match it by its own path. */
  char exe[512];
  if (!name || !*name) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    name = exe;
  }
  bool match = false;
  for (const char *t = text; *t && !match;) {
    const char *end = strchr(t, '/');
    size_t len = end ? (size_t)(end - t) : strlen(t);
    for (const char *p = name; *p && !match; p++)
      match = strncmp(p, t, len) == 0 && len > 0;
    t += len + (end ? 1 : 0);
  }
  if (!match) return 0;
  for (int i = 0; i < info->dlpi_phnum && nranges < MAX_RANGES; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    ranges[nranges].lo = info->dlpi_addr + ph->p_vaddr;
    ranges[nranges].hi = ranges[nranges].lo + ph->p_memsz;
    nranges++;
  }
  return 0;
}

static const char *stats_file;

static void write_stats(void) {
  int fd = open(stats_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  for (int i = 0; i < NCALLS; i++) {
    unsigned long c = atomic_load(&set.calls[i]);
    if (!c) continue;
    char line[160];
    int n = snprintf(line, sizeof line, "%s %s %lu %lu\n",
                     program_invocation_short_name, wrapped[i], c,
                     atomic_load(&set.injected[i]));
    ssize_t ignored = write(fd, line, (size_t)n);
    (void)ignored;
  }
  close(fd);
}

/* Whether TAXI_FAULT_ONLY leaves this process out. */
static bool left_out(void) {
  const char *only = getenv("TAXI_FAULT_ONLY");
  if (!only || !*only) return false;
  const char *me = program_invocation_short_name;
  if (strncmp(me, "lt-", 3) == 0) me += 3;
  return strcmp(me, only) != 0;
}

__attribute__((constructor)) static void fault_init(void) {
  if (left_out()) return;
  const char *spec = getenv("TAXI_FAULT");
  if (spec && taxi_fault_arm(spec) < 0)
    fault_die("libtaxifault: bad TAXI_FAULT rule list\n");
  const char *after = getenv("TAXI_FAULT_AFTER");
  if (after && *after) parse_gate(after);
  const char *caller = getenv("TAXI_FAULT_CALLER");
  if (caller && *caller) {
    nranges = 0;
    dl_iterate_phdr(add_ranges, (void *)caller);
  }
  stats_file = getenv("TAXI_FAULT_STATS");
  if (stats_file && *stats_file) atexit(write_stats);
}

static bool from_chosen_code(const void *caller) {
  if (nranges < 0) return true;
  uintptr_t a = (uintptr_t)caller;
  for (int i = 0; i < nranges; i++)
    if (a >= ranges[i].lo && a < ranges[i].hi) return true;
  return false;
}

int fault_decide(int call, const void *caller) {
  fault_rules_count(&set, call);
  if (!atomic_load_explicit(&gate_open, memory_order_acquire)) {
    if (!gate[call]) return 0;
    atomic_store_explicit(&gate_open, true, memory_order_release);
  }
  if (!from_chosen_code(caller)) return 0;
  return fault_rules_decide(&set, call);
}

void fault_count(int call) { fault_rules_count(&set, call); }

#endif /* __linux__ && __GLIBC__ */
