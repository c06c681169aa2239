/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/refusal.c - io_uring refused by the system: a clear error
 * when it is asked for by name, and the automatic choice falls back.
 *
 * Containers and hardened systems refuse io_uring in two ways: a seccomp
 * policy that fails io_uring_setup(2) with ENOSYS (as if the kernel had no
 * such call) or EPERM, and the kernel.io_uring_disabled sysctl (EPERM).
 * The test reproduces both errors for real in a child process, with a
 * seccomp filter that fails only io_uring_setup, and checks what the
 * library does there.  Linux only; elsewhere (or without io_uring compiled
 * in) it checks nothing and says so.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/seccomp.h>) && __has_include(<linux/filter.h>)
#define PT_HAVE_SECCOMP 1
#endif
#endif

#ifdef PT_HAVE_SECCOMP
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Make io_uring_setup fail with `err` in this process from now on; every
 * other system call is allowed.  0, or -1 if the kernel refuses filters. */
static int deny_io_uring_setup(int err) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K,
               SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* What the child found, one bit per failed expectation (0: all held). */
enum {
  RF_FILTER = 1,    /* the filter could not be installed */
  RF_NAMED = 2,     /* create("uring") did not return the expected code */
  RF_OS_ERROR = 4,  /* taxi_last_os_error() did not tell the errno */
  RF_FALLBACK = 8,  /* the automatic choice failed */
  RF_NOT_URING = 16 /* the automatic choice still said "uring" */
};

static int refused_child(int err, int expected) {
  if (deny_io_uring_setup(err) != 0) return RF_FILTER;
  int bad = 0;
  taxi_proactor_t *p = NULL;
  if (util_proactor_create(&p, "uring") != expected) bad |= RF_NAMED;
  if (taxi_last_os_error() != err) bad |= RF_OS_ERROR;
  if (p) taxi_proactor_destroy(p);
  p = NULL;
  if (taxi_proactor_create(&p, NULL) != 0) return bad | RF_FALLBACK;
  if (strcmp(taxi_proactor_backend(p), "uring") == 0) bad |= RF_NOT_URING;
  printf(
      "\n    io_uring_setup fails with %s: create(\"uring\") is %s, the "
      "automatic choice is %s",
      strerror(err), taxi_error_name(expected), taxi_proactor_backend(p));
  fflush(stdout);
  taxi_proactor_destroy(p);
  return bad;
}

static void check_refusal(int err, int expected) {
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) _exit(refused_child(err, expected));
  int st = 0;
  CU_ASSERT_EQUAL_FATAL(waitpid(pid, &st, 0), pid);
  CU_ASSERT_FATAL(WIFEXITED(st));
  CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
  if (WEXITSTATUS(st) != 0)
    printf("\n    io_uring_setup fails with %s: child found 0x%x\n",
           strerror(err), (unsigned)WEXITSTATUS(st));
}
#endif /* PT_HAVE_SECCOMP */

static int uring_compiled_in(void) {
  const char *names[16];
  int n = taxi_proactor_backend_names(names, 16);
  for (int i = 0; i < n && i < 16; i++)
    if (strcmp(names[i], "uring") == 0) return 1;
  return 0;
}

void pt_test_uring_refused(void) {
#ifdef PT_HAVE_SECCOMP
  if (!uring_compiled_in()) {
    printf("\n    io_uring is not compiled in: nothing to refuse\n");
    return;
  }
  check_refusal(ENOSYS, TAXI_ENOTSUP); /* a seccomp policy, or no such call */
  check_refusal(EPERM, TAXI_EPERM);    /* seccomp, kernel.io_uring_disabled */
  printf("\n");
#else
  (void)uring_compiled_in;
  printf("\n    not Linux: io_uring refusal is not reproduced here\n");
#endif
}
