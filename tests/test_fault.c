/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_fault.c - the fault-injection module itself: rules fail the
 * calls they name, at the count they name, with the error they name, and
 * the library sees those failures.  The suites of other programs rely on
 * it; this proves it injects what it says.
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault/fault.h"
#include "runner.h"
#include "util.h"
#include "taxi/taxi.h"

static void test_bad_rules_refused(void) {
  CU_ASSERT_EQUAL(fault_arm("nosuchcall:1:EINTR"), -EINVAL);
  CU_ASSERT_EQUAL(fault_arm("read:0:EINTR"), -EINVAL);
  CU_ASSERT_EQUAL(fault_arm("read:x"), -EINVAL);
  CU_ASSERT_EQUAL(fault_arm("read:1:ENOTANERRNO"), -EINVAL);
  CU_ASSERT_EQUAL(fault_arm("read:1:EINTR:1:extra"), -EINVAL);
  CU_ASSERT_EQUAL(fault_arm(""), 0);
}

/* The second pipe2 fails with EMFILE, once; the others succeed. */
static void test_nth_call_fails_once(void) {
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(fault_arm("pipe2:2:EMFILE"), 0);
  CU_ASSERT_EQUAL(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  close(fds[1]);
  errno = 0;
  CU_ASSERT_EQUAL(pipe2(fds, O_CLOEXEC), -1);
  CU_ASSERT_EQUAL(errno, EMFILE);
  CU_ASSERT_EQUAL(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  close(fds[1]);
  CU_ASSERT_EQUAL(fault_calls("pipe2"), 3);
  CU_ASSERT_EQUAL(fault_injected("pipe2"), 1);
  fault_arm("");
}

/* COUNT 0: every call from NTH on fails. */
static void test_persistent_failure(void) {
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(fault_arm("pipe2:1:ENFILE:0"), 0);
  for (int i = 0; i < 5; i++) {
    errno = 0;
    CU_ASSERT_EQUAL(pipe2(fds, 0), -1);
    CU_ASSERT_EQUAL(errno, ENFILE);
  }
  CU_ASSERT_EQUAL(fault_injected("pipe2"), 5);
  fault_arm("");
  CU_ASSERT_EQUAL(pipe2(fds, 0), 0);
  close(fds[0]);
  close(fds[1]);
}

/* "short" transfers half of what was asked. */
static void test_short_transfer(void) {
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  CU_ASSERT_EQUAL_FATAL(fault_arm("write:1:short"), 0);
  CU_ASSERT_EQUAL(write(sv[0], "abcdefgh", 8), 4);
  CU_ASSERT_EQUAL(write(sv[0], "ijkl", 4), 4);
  char buf[16];
  CU_ASSERT_EQUAL(read(sv[1], buf, sizeof buf), 8);
  CU_ASSERT_EQUAL(memcmp(buf, "abcdijkl", 8), 0);
  fault_arm("");
  close(sv[0]);
  close(sv[1]);
}

/* A call made inside the library is reached: the reactor's wait on poll
 * interrupted (EINTR) is a wait that returned nothing, not an error. */
static void test_library_calls_reached(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, "poll"), 0);
  CU_ASSERT_EQUAL_FATAL(fault_arm("poll:1:EINTR"), 0);
  CU_ASSERT(taxi_reactor_handle_events(r, 0) >= 0);
  CU_ASSERT_EQUAL(fault_injected("poll"), 1);
  fault_arm("");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void *pipe_in_thread(void *arg) {
  int fds[2];
  int rc = pipe2(fds, 0);
  *(int *)arg = rc == 0 ? 0 : errno;
  if (rc == 0) {
    close(fds[0]);
    close(fds[1]);
  }
  return NULL;
}

/* SCOPE "others": the arming thread's calls pass, another thread's fail. */
static void test_scope_others(void) {
  int fds[2], err = -1;
  CU_ASSERT_EQUAL_FATAL(fault_arm("pipe2:1:EMFILE:0:others"), 0);
  CU_ASSERT_EQUAL(pipe2(fds, 0), 0);
  close(fds[0]);
  close(fds[1]);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, pipe_in_thread, &err), 0);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(err, EMFILE);
  CU_ASSERT_EQUAL(fault_injected("pipe2"), 1);
  CU_ASSERT_EQUAL(fault_arm("pipe2:1:EMFILE:0:nobody"), -EINVAL);
  fault_arm("");
}

/* A site by descriptor kind: write@eventfd fails the eventfd's write only;
 * the plain write fails a socket's, never the eventfd's. */
static void test_descriptor_sites(void) {
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int sv[2];
  CU_ASSERT_FATAL(efd >= 0);
  CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  uint64_t one = 1;
  CU_ASSERT_EQUAL_FATAL(fault_arm("write@eventfd:1:EINTR,write:1:EPIPE"), 0);
  CU_ASSERT_EQUAL(write(efd, &one, sizeof one), -1);
  CU_ASSERT_EQUAL(errno, EINTR);
  CU_ASSERT_EQUAL(write(efd, &one, sizeof one), (ssize_t)sizeof one);
  CU_ASSERT_EQUAL(write(sv[0], "x", 1), -1);
  CU_ASSERT_EQUAL(errno, EPIPE);
  CU_ASSERT_EQUAL(write(sv[0], "x", 1), 1);
  CU_ASSERT_EQUAL(fault_injected("write@eventfd"), 1);
  CU_ASSERT_EQUAL(fault_injected("write"), 1);
  CU_ASSERT_EQUAL(fault_calls("write"), 4);
  fault_arm("");
  close(efd);
  close(sv[0]);
  close(sv[1]);
}

/* malloc fails with NULL and ENOMEM; syscall(2) of io_uring_enter fails
 * without reaching the kernel. */
static void test_allocator_and_syscall(void) {
  /* Called through a volatile pointer: a compiler may drop a malloc whose
   * result is only compared with NULL (clang does), and with it the call
   * the rule must fail. */
  void *(*volatile alloc)(size_t) = malloc;
  CU_ASSERT_EQUAL_FATAL(fault_arm("malloc:1:ENOMEM"), 0);
  errno = 0;
  void *p = alloc(32);
  int err = errno;
  void *q = alloc(32);
  fault_arm("");
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_EQUAL(err, ENOMEM);
  CU_ASSERT_PTR_NOT_NULL(q);
  free(p);
  free(q);
#ifdef __NR_io_uring_enter
  CU_ASSERT_EQUAL_FATAL(fault_arm("io_uring_enter:1:EBUSY"), 0);
  errno = 0;
  CU_ASSERT_EQUAL(syscall(__NR_io_uring_enter, -1, 0, 0, 0, NULL, 0), -1);
  CU_ASSERT_EQUAL(errno, EBUSY);
  /* The next goes through: the kernel refuses descriptor -1 itself. */
  errno = 0;
  CU_ASSERT_EQUAL(syscall(__NR_io_uring_enter, -1, 0, 0, 0, NULL, 0), -1);
  CU_ASSERT_NOT_EQUAL(errno, EBUSY);
  CU_ASSERT_EQUAL(fault_calls("io_uring_enter"), 2);
  fault_arm("");
#endif
}

static CU_TestInfo tests[] = {
    {"a bad rule list is refused", test_bad_rules_refused},
    {"the NTH call fails once", test_nth_call_fails_once},
    {"COUNT 0 fails every later call", test_persistent_failure},
    {"a short transfer moves half", test_short_transfer},
    {"calls made by the library are reached", test_library_calls_reached},
    {"scope others: only other threads' calls fail", test_scope_others},
    {"sites by descriptor kind", test_descriptor_sites},
    {"malloc and syscall(2) are reached", test_allocator_and_syscall},
    CU_TEST_INFO_NULL,
};

int main(int argc, char **argv) {
  fault_reexec_preloaded(argc, argv);
  const char *why = fault_available() ? NULL : fault_unavailable_reason();
  taxi_test_suite_t suite = {"fault injection", tests, 0, why};
  const taxi_test_suite_t *suites[] = {&suite};
  return taxi_test_run("fault injection", suites, 1, argc, argv);
}
