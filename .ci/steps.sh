# SPDX-License-Identifier: Apache-2.0
# .ci/steps.sh - the steps of CI, each a function of its own, and the plan
# that runs them: `./dev.sh ci` runs the whole plan (what .ci/run does),
# `./dev.sh ci STEP...` runs the steps named, `./dev.sh ci --list` lists
# them.  Sourced by dev.sh, which defines top, jobs, deps, check_and_total.
#
# Why lanes: most of CI's time is spent waiting (test programs sleeping on
# timers and sockets, wine's server, the fault sweep's servers), not
# computing, so four lanes run side by side, each a chain of steps that
# need one another's build trees, and the cores stay busy.  Each step
# writes its output to ci-logs/STEP.log; a step that fails prints the end
# of its log; the run ends with a table of every step's time.

# The steps, in the order `--list` shows them, with what each does.
ci_steps=(
  "deps:every Debian package any step needs, in one apt-get; configure generated"
  "format:clang-format on every C file; the licence tag on every source"
  "test:the README test command (./dev.sh test: gcc build, make check); the build must be warning-free"
  "docs:make docs: the API reference and the pages (an undocumented symbol or a broken link fails it); make layers: calls one way, no circle, no library file over 800 lines"
  "fault:the whole fault-injection sweep beside the bigger soaks (build/)"
  "distcheck:make distcheck: the tarball builds, installs, uninstalls; a smoke test runs from it"
  "consumers:install, then C (pkg-config), APR, C++ (g++, clang++) and CMake consumers; exports only taxi_*"
  "kqueue:clang -Werror build against libkqueue; the suite (small) with kqueue as every default backend"
  "fuzz:60 s of libFuzzer on the HTTP request parser, 60 s on the TLS record path"
  "asan:ASan+UBSan build (kqueue compiled in); every family and script at its small size"
  "tsan:TSan build; every family and script at its small size"
  "win32:MinGW-w64 cross build; the suite under wine"
)

# The plan: deps and format first, then the lanes side by side.  A lane's
# steps run in order (each needs the build tree of an earlier one: docs,
# fault, distcheck, consumers and fuzz use build/ from test).  The long
# waiting steps (win32, the suite runs) sit beside the builds of the other
# lanes.  kqueue and asan, each about as long as the test step, get a lane
# each: chained, they were the run's longest lane by four minutes.
ci_first=(deps format)
ci_lanes=(
  "test docs fault distcheck consumers fuzz"
  "kqueue"
  "asan"
  "win32 tsan"
)

ci_log_dir() { echo "$top/ci-logs"; }

# ---- the steps ----------------------------------------------------------

# Also generates configure: the lanes' builds would otherwise all run
# autoreconf at once in the same tree and trip over one another's files.
step_deps() {
  deps clang-format doxygen clang libclang-rt-14-dev cmake patch \
    gcc-mingw-w64-x86-64 wine64 dpkg-dev g++ python3
  autogen
}

step_format() {
  local unformatted unlicensed f
  unformatted=$(cd "$top" && for f in $(git ls-files '*.c' '*.h'); do
    clang-format "$f" | cmp -s - "$f" || echo "$f"; done)
  [ -z "$unformatted" ] || { echo "not formatted: $unformatted"; return 1; }
  echo "all formatted"
  # Every source file says its licence (LICENSE) in its first lines.
  unlicensed=$(cd "$top" && git ls-files '*.c' '*.h' '*.cc' '*.cpp' '*.sh' '*.am' \
    '*.ac' '*.in' '*CMakeLists.txt' .ci/run .ci/steps.sh dev.sh |
    while read -r f; do head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || echo "$f"; done)
  [ -z "$unlicensed" ] || { echo "no SPDX-License-Identifier: $unlicensed"; return 1; }
  echo "all carry SPDX-License-Identifier: Apache-2.0"
}

# The README test command.  Its build is gcc's -Werror build too:
# configure's warning flags are the same with or without --enable-werror,
# so a warning in this output fails the step as -Werror would have.
step_test() {
  local log
  log=$(mktemp)
  "$top/dev.sh" test 2>&1 | tee "$log" || { rm -f "$log"; return 1; }
  if grep -E '^[^ :]+:[0-9]+:([0-9]+:)? warning: |^cc1: warning: ' "$log"; then
    echo "gcc warned (above): the build must be warning-free"
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  echo "gcc: no warnings"
}

# The build/ tree of the test step, made (or brought up to date) when a
# step that needs it runs on its own.
ci_build() { "$top/dev.sh" build >/dev/null; }

step_docs() {
  ci_build
  (cd "$top/build" && make docs && make layers LAYERS_FLAGS=--check)
}

# The whole sweep (every dispatcher, backend, call site and error) beside
# the bigger soaks: the sweep mostly waits on its processes.
step_fault() {
  ci_build
  local b=$top/build sweep_rc=0 soak_rc=0 sweep_pid soak_pid
  (cd "$b" && make -j"$jobs" check TESTS= >/dev/null)
  (cd "$b" && bash "$top/tests/fault/sweep.sh" --jobs 3 >fault-sweep.log 2>&1) &
  sweep_pid=$!
  (cd "$b" && sh "$top/tests/soak.sh" --messages 100000 >soak.log 2>&1 &&
    TAXI_SOAK_SECONDS=5 ./tests/soak_mixed >>soak.log 2>&1) &
  soak_pid=$!
  wait $sweep_pid || sweep_rc=$?
  wait $soak_pid || soak_rc=$?
  sed -n '/^site x error/,$p' "$b/fault-sweep.log"
  grep -E 'FAIL |XPASS' "$b/fault-sweep.log" || true
  grep -E 'PASS|FAIL|over|passed' "$b/soak.log" || true
  [ $sweep_rc -eq 0 ] && [ $soak_rc -eq 0 ] || { cat "$b/soak.log"; return 1; }
}

# The package: the tarball builds, installs and uninstalls (with a
# program built against the installed headers and library:
# installcheck), and the echo demo runs from the tarball's build.  The
# suite itself ran in the test step: the check programs are not built
# again here.
step_distcheck() {
  ci_build
  (cd "$top/build" &&
    make -j"$jobs" distcheck TESTS=tests/echo_demo.sh check_PROGRAMS= \
      check_LTLIBRARIES= check_SCRIPTS= >/dev/null &&
    echo "distcheck: ok")
}

step_consumers() {
  ci_build
  local stage prefix consumer cxx
  stage=$(mktemp -d)
  (cd "$top/build" && make install DESTDIR="$stage" >/dev/null)
  prefix="$stage/usr/local"
  consumer=$(mktemp -d)
  cat >"$consumer/consumer.c" <<'C'
#include <taxi/taxi.h>
#include <stdio.h>
int main(void) {
  taxi_reactor_t *r;
  int rc = taxi_reactor_create(&r, NULL);
  if (rc < 0) { fprintf(stderr, "%s\n", taxi_strerror(rc)); return 1; }
  printf("taxi %s on %s\n", taxi_version_string(), taxi_reactor_backend(r));
  return taxi_reactor_destroy(r) == 0 ? 0 : 1;
}
C
  (
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror -o "$consumer/consumer" "$consumer/consumer.c" \
      $(pkg-config --cflags --libs taxi)
    LD_LIBRARY_PATH="$prefix/lib" "$consumer/consumer"
    # With APR, taxi/apr.h is installed and builds against APR's flags.
    if [ -f "$prefix/include/taxi/apr.h" ]; then
      cat >"$consumer/apr_consumer.c" <<'C'
#include <taxi/apr.h>
#include <apr_general.h>
#include <stdio.h>
int main(void) {
  apr_pool_t *pool;
  taxi_reactor_t *r;
  if (apr_initialize() != APR_SUCCESS || apr_pool_create(&pool, NULL)) return 1;
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  o.backend = "apr";
  int rc = taxi_reactor_create(&r, &o);
  if (rc == 0) rc = taxi_apr_reactor_bind(r, pool);
  if (rc < 0) { fprintf(stderr, "%s\n", taxi_strerror(rc)); return 1; }
  printf("taxi on %s, bound to an apr_pool_t\n", taxi_reactor_backend(r));
  apr_pool_destroy(pool); /* destroys the reactor */
  apr_terminate();
  return 0;
}
C
      # APR is the system's, not staged: its flags without the sysroot.
      # shellcheck disable=SC2046
      cc -std=c11 -Wall -Wextra -Werror -o "$consumer/apr_consumer" \
        "$consumer/apr_consumer.c" $(pkg-config --cflags --libs taxi) \
        $(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --cflags --libs apr-1)
      LD_LIBRARY_PATH="$prefix/lib" "$consumer/apr_consumer"
    fi
    # The headers as C++, with both C++ compilers, against the installed tree.
    for cxx in g++ clang++; do
      # shellcheck disable=SC2046
      "$cxx" -std=c++11 -Wall -Wextra -Werror -o "$consumer/cxx_consumer" \
        "$top/tests/cxx/consumer.cc" $(pkg-config --cflags --libs taxi)
      LD_LIBRARY_PATH="$prefix/lib" "$consumer/cxx_consumer"
      echo "$cxx consumer: ok"
    done
    # CMake's find_package(taxi), from the staged installation.
    cmake -S "$top/tests/cmake" -B "$consumer/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
    cmake --build "$consumer/cmake" >/dev/null
    LD_LIBRARY_PATH="$prefix/lib" "$consumer/cmake/taxi_cmake_consumer"
    LD_LIBRARY_PATH="$prefix/lib" "$consumer/cmake/taxi_cmake_consumer_cxx"
    echo "cmake consumer: ok"
    # Only the public API is exported.
    if nm -D --defined-only "$prefix/lib/libtaxi.so" | awk '{print $3}' |
      grep -v '^taxi_' | grep -v '^_'; then
      echo "unexpected exported symbols above"
      exit 1
    fi
    echo "exports: only taxi_*"
  )
  local rc=$?
  rm -rf "$stage" "$consumer"
  return $rc
}

# libkqueue built into build-kqueue/libkqueue, taxi built against it with
# clang at -Werror (CI's clang build: every file of the library, the
# examples and the tests), and the whole suite with kqueue as the default
# of every reactor, pool and Proactor, at the small sizes (the sweep and
# the soaks ran in full in the fault step).
step_kqueue() {
  rm -rf "$top/build-kqueue"
  TAXI_TEST_SMALL=1 CONFIGURE_FLAGS="--enable-werror CC=clang" "$top/dev.sh" kqueue
}

# A finding fails the step and is left as tests/fuzz/http-crash-* (or
# tls-crash-*); copied into tests/fuzz/http_corpus (tls_corpus) it becomes
# a regular test (test_http_parse, test_tls_corpus).
step_fuzz() {
  ci_build
  (cd "$top/build" && make fuzz-http FUZZ_SECONDS=60 2>&1 | tail -n 40) &&
    (cd "$top/build" && make fuzz-tls FUZZ_SECONDS=60 2>&1 | tail -n 40)
}

# ci_sanitized NAME FLAGS [CONFIGURE-ARGS...]: the suite built with FLAGS
# in build-NAME, every family and script at its small size.
ci_sanitized() {
  local name=$1 flags=$2 dir
  shift 2
  dir=$top/build-$name
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" &&
    "$top/configure" -q --enable-werror --disable-shared \
      CFLAGS="-O1 -g -fno-omit-frame-pointer $flags" LDFLAGS="$flags" "$@" &&
    make -j"$jobs" >/dev/null &&
    TAXI_TEST_SMALL=1 TAXI_TEST_TIMEOUT_SCALE=${TAXI_TEST_TIMEOUT_SCALE:-3} \
      check_and_total)
}

# With kqueue (libkqueue) compiled in beside epoll, so that the kqueue
# families and stream pairs run under ASan+UBSan too.  Its own libkqueue:
# the kqueue step, beside it, starts by removing build-kqueue/.
step_asan() {
  local kq=$top/build-asan-libkqueue
  "$top/tests/kqueue/build-libkqueue.sh" "$kq"
  local asan="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ci_sanitized asan-ubsan "$asan" CPPFLAGS="-I$kq/include/kqueue" LIBS=-lkqueue \
    LDFLAGS="-L$kq/lib -Wl,-rpath,$kq/lib $asan"
}

step_tsan() {
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$top/tests/tsan.supp \
    ci_sanitized tsan "-fsanitize=thread"
}

# MinGW-w64 cross build, CUnit for Windows built from Debian's source into
# build-win32/cunit, libtaxi-0.dll, the examples and the tests, every test
# program run under wine (tests/win32/).
step_win32() {
  rm -rf "$top/build-win32"
  (unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
    CONFIGURE_FLAGS=--enable-werror "$top/dev.sh" win32)
}

# ---- running them -------------------------------------------------------

ci_known() {
  local s
  for s in "${ci_steps[@]}"; do [ "${s%%:*}" = "$1" ] && return 0; done
  return 1
}

ci_now() { date +%s; }

# ci_run_step NAME: runs one step with its output in ci-logs/NAME.log and
# records "NAME START END STATUS" in ci-logs/times; on failure prints the
# end of the log.
ci_run_step() {
  local name=$1 dir start rc=0
  dir=$(ci_log_dir)
  start=$(ci_now)
  printf '=== %s: started at %ds\n' "$name" $((start - ci_t0))
  # In the background and waited for: a subshell in an `||` list would run
  # with set -e ignored.
  (set -eo pipefail; cd "$top" && "step_$name") >"$dir/$name.log" 2>&1 &
  wait $! || rc=$?
  local end
  end=$(ci_now)
  echo "$name $((start - ci_t0)) $((end - ci_t0)) $rc" >>"$dir/times"
  if [ $rc -eq 0 ]; then
    printf '=== %s: passed in %dm%02ds\n' "$name" $(((end - start) / 60)) $(((end - start) % 60))
    # The lines a reader wants from a step that passed.
    grep -E '^[0-9]+ passed, [0-9]+ failed$|^(distcheck|clang|gcc|exports|cmake consumer|all )' \
      "$dir/$name.log" | tail -n 5 | sed "s/^/    $name: /"
  else
    printf '=== %s: FAILED (status %d) after %dm%02ds; the end of ci-logs/%s.log:\n' \
      "$name" $rc $(((end - start) / 60)) $(((end - start) % 60)) "$name"
    tail -n 150 "$dir/$name.log"
    printf '=== end of %s\n' "$name"
  fi
  return $rc
}

ci_table() {
  local dir total
  dir=$(ci_log_dir)
  total=$(($(ci_now) - ci_t0))
  printf '\n%-10s %8s %8s %8s  %s\n' step start end took result
  local name s e rc
  while read -r name s e rc; do
    printf '%-10s %7ds %7ds %4dm%02ds  %s\n' "$name" "$s" "$e" $(((e - s) / 60)) $(((e - s) % 60)) \
      "$([ "$rc" -eq 0 ] && echo passed || echo "FAILED ($rc)")"
  done <"$dir/times"
  printf '%-10s %26dm%02ds\n' total $((total / 60)) $((total % 60))
}

ci_main() {
  case "${1:-}" in
    --list)
      local s
      for s in "${ci_steps[@]}"; do printf '%-10s %s\n' "${s%%:*}" "${s#*:}"; done
      printf '\nthe plan: %s first, then these lanes side by side:\n' "${ci_first[*]}"
      for s in "${ci_lanes[@]}"; do printf '  %s\n' "$s"; done
      return 0
      ;;
    -h | --help)
      echo "usage: ./dev.sh ci [--list | STEP...]  (no STEP: the whole plan)"
      return 0
      ;;
  esac
  local dir
  dir=$(ci_log_dir)
  mkdir -p "$dir"
  : >"$dir/times"
  ci_t0=$(ci_now)
  # Time limits of the suites scale up: the lanes load the machine.
  export TAXI_TEST_TIMEOUT_SCALE=${TAXI_TEST_TIMEOUT_SCALE:-3}
  local failed=0 s
  if [ $# -gt 0 ]; then
    for s in "$@"; do
      ci_known "$s" || { echo "ci: no step $s (./dev.sh ci --list)" >&2; return 2; }
    done
    # A step named alone on a fresh clone needs configure (deps makes it
    # in the whole plan).
    autogen >/dev/null
    for s in "$@"; do ci_run_step "$s" || failed=1; done
    ci_table
    return $failed
  fi
  for s in "${ci_first[@]}"; do
    ci_run_step "$s" || { ci_table; return 1; }
  done
  local pids=() lane
  for lane in "${ci_lanes[@]}"; do
    (
      # A lane stops at its first failure: its later steps need the
      # earlier ones.
      for s in $lane; do ci_run_step "$s" || exit 1; done
    ) &
    pids+=($!)
  done
  local p
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  ci_table
  return $failed
}
