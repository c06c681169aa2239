#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dev.sh - build, demo and test taxi from a fresh checkout.
#
#   ./dev.sh demo     install what is missing, build everything, run the demo
#   ./dev.sh test     install what is missing, build, run the whole test suite
#   ./dev.sh deps     only install the build dependencies (Debian/Ubuntu)
#   ./dev.sh build    only configure and build (in ./build)
#   ./dev.sh win32    cross-build for Windows with MinGW-w64 (in
#                     ./build-win32) and run the whole test suite under wine
#   ./dev.sh bench-peers [OPTIONS]
#                     install the peers' libraries, perf and gnuplot, build,
#                     and run the echo benchmark against Boost.Asio,
#                     libevent, libuv and the bare loops (make bench-peers;
#                     OPTIONS go to tests/bench/peers.sh, e.g. --quick)
#   ./dev.sh kqueue   the BSD path on Linux: build libkqueue from vendor/,
#                     build against it (in ./build-kqueue) and run the whole
#                     test suite with kqueue as the default backend
#   ./dev.sh kqueue-asan  the kqueue programs of the suite under ASan+UBSan
#                     (in ./build-kqueue-asan)
#   ./dev.sh ci [--list | STEP...]
#                     what CI runs (.ci/run): every step, or the steps
#                     named; --list lists them (.ci/steps.sh, docs/ci.md)
#
# Environment: BUILD_DIR (default: build), CONFIGURE_FLAGS (extra flags for
# configure), JOBS (default: number of CPUs), WIN32_BUILD_DIR (default:
# build-win32), KQUEUE_BUILD_DIR (default: build-kqueue).
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
build_dir=${BUILD_DIR:-$top/build}
jobs=${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}

# Debian packages the build and the tests need (gdb: a test that hangs is
# reported with every thread's stack; libssl-dev: TLS streams, openssl:
# the TLS tests' certificates and peers).
packages=(build-essential autoconf automake libtool pkg-config libcunit1-dev liburing-dev
  libapr1-dev libaprutil1-dev libssl-dev openssl curl gdb)

# What `make bench-peers` needs beyond those: the peers' libraries (and a
# C++ compiler for Boost.Asio), perf for system calls, gnuplot for charts.
bench_packages=(g++ libboost-dev libevent-dev libuv1-dev linux-perf gnuplot-nox)

deps() {
  command -v dpkg-query >/dev/null 2>&1 || return 0
  local missing=()
  for p in "${packages[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "dev.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

autogen() {
  if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
    (cd "$top" && autoreconf -fi)
  fi
}

# After `make check` in the current directory: on failure show every
# failing test's log and fail; else add up the "N passed, N failed" line
# each CUnit program ends its log with (the logs of tests/ and of its
# subdirectories: a family's log per backend, a stream pair's).
check_and_total() {
  if ! make -j"$jobs" check "$@"; then
    # Each failed program's whole log, then (last, where a short view of
    # the output still shows it) the lines that say what failed.
    local failed
    failed=$(grep -l ':test-result: \(FAIL\|ERROR\|XPASS\)' $(find . -name '*.trs') 2>/dev/null || true)
    for trs in $failed; do
      echo "==> ${trs%.trs}.log"
      cat "${trs%.trs}.log"
    done
    echo "==> what failed"
    for trs in $failed; do
      grep -H -B1 -A3 'FAILED\|TIMEOUT\|CRASH\|Assertion\|FAIL:\|ERROR' "${trs%.trs}.log" | tail -n 40
    done
    exit 1
  fi
  total_pass=0 total_fail=0
  for log in $(find tests -name '*.log' | LC_ALL=C sort); do
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1) || continue
    echo "${log#tests/}: $line"
    set -- $line
    total_pass=$((total_pass + $1)) total_fail=$((total_fail + $3))
  done
  echo "$total_pass passed, $total_fail failed"
}

# The Windows cross build: MinGW-w64, wine to run the tests, CUnit built
# for Windows from Debian's source package (tests/win32/build-cunit.sh)
# into the build tree.
win32() {
  deps gcc-mingw-w64-x86-64 wine64 dpkg-dev
  autogen
  local dir=${WIN32_BUILD_DIR:-$top/build-win32}
  mkdir -p "$dir"
  "$top/tests/win32/build-cunit.sh" "$dir/cunit"
  cd "$dir"
  # shellcheck disable=SC2086
  [ -f Makefile ] || "$top/configure" --host=x86_64-w64-mingw32 \
    PKG_CONFIG_LIBDIR="$dir/cunit/lib/pkgconfig" ${CONFIGURE_FLAGS:-}
  make -j"$jobs"
  check_and_total
}

# libkqueue (tests/kqueue/build-libkqueue.sh) built into the build tree,
# taxi configured against it in a build directory of its own; TAXI_BACKEND
# makes kqueue the default of every reactor, pool and Proactor that names
# no backend (the emulated and aio Proactors' internal reactors too).
kqueue() {
  local sanitize=${1:-}
  deps cmake patch
  autogen
  local dir=${KQUEUE_BUILD_DIR:-$top/build-kqueue}
  [ "$sanitize" = asan ] && dir=${KQUEUE_BUILD_DIR:-$top/build-kqueue-asan}
  mkdir -p "$dir"
  "$top/tests/kqueue/build-libkqueue.sh" "$dir/libkqueue"
  local prefix
  prefix=$(cd "$dir/libkqueue" && pwd)
  local link="-L$prefix/lib -Wl,-rpath,$prefix/lib"
  local args=(-q CPPFLAGS="-I$prefix/include/kqueue" LIBS=-lkqueue LDFLAGS="$link")
  if [ "$sanitize" = asan ]; then
    local san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    args+=(--disable-shared CFLAGS="-O1 -g -fno-omit-frame-pointer $san"
      LDFLAGS="$link $san")
  fi
  cd "$dir"
  # shellcheck disable=SC2086
  [ -f Makefile ] || "$top/configure" "${args[@]}" ${CONFIGURE_FLAGS:-}
  make -j"$jobs"
  grep -E '^#define TAXI_HAVE_KQUEUE' config.h
  export TAXI_BACKEND=kqueue
  if [ "$sanitize" = asan ]; then
    # The programs that run kqueue: the Reactor and pool conformance
    # suites, the Proactors whose internal reactor is kqueue, the stream
    # pairs over kqueue.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    export TAXI_TEST_TIMEOUT_SCALE=${TAXI_TEST_TIMEOUT_SCALE:-3}
    check_and_total TESTS="tests/conformance/kqueue.backend tests/pools/kqueue.backend \
      tests/proactor/emulated.backend tests/proactor/aio.backend \
      tests/stream/reactor-kqueue.pair \
      tests/stream/lf-kqueue.pair tests/stream/hsha-kqueue.pair \
      tests/stream/proactor-emulated+kqueue.pair \
      tests/stream/proactors-emulated+kqueue.pair"
  else
    check_and_total
    # The port's wake-up channel and signal source too, where kqueue has
    # its own (EVFILT_USER, EVFILT_SIGNAL).
    if grep -q '^#define TAXI_HAVE_KQUEUE_\(USER\|SIGNAL\) 1' config.h; then
      echo "again with TAXI_WAKEUP_CHANNEL=1 TAXI_SIGNAL_SOURCE=port" \
        "(an eventfd and a signalfd instead of EVFILT_USER and EVFILT_SIGNAL):"
      for t in conformance/test_reactor pools/test_pools; do
        TAXI_WAKEUP_CHANNEL=1 TAXI_SIGNAL_SOURCE=port "tests/$t" kqueue \
          >"tests/$t-kqueue-port.out" 2>&1 || { cat "tests/$t-kqueue-port.out"; exit 1; }
        echo "$t kqueue: $(grep -E '^[0-9]+ passed' "tests/$t-kqueue-port.out" | tail -n 1)"
      done
    fi
  fi
}

build() {
  deps
  autogen
  mkdir -p "$build_dir"
  cd "$build_dir"
  # shellcheck disable=SC2086
  [ -f Makefile ] || "$top/configure" ${CONFIGURE_FLAGS:-}
  make -j"$jobs"
}

case "${1:-}" in
  deps) shift; deps "$@" ;;
  build) build ;;
  demo) build; make demo ;;
  test)
    build
    check_and_total
    ;;
  win32) win32 ;;
  bench-peers)
    shift
    deps "${bench_packages[@]}"
    build
    # Again: the peers' libraries may have come after the first configure.
    ./config.status --recheck >/dev/null && ./config.status >/dev/null
    make -j"$jobs" bench-peers PEERS_FLAGS="$*"
    ;;
  kqueue) kqueue ;;
  kqueue-asan) kqueue asan ;;
  ci)
    shift
    # shellcheck source=.ci/steps.sh
    . "$top/.ci/steps.sh"
    ci_main "$@"
    ;;
  *)
    sed -n '3,28p' "$0"
    exit 2
    ;;
esac
