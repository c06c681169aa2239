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
#
# Environment: BUILD_DIR (default: build), CONFIGURE_FLAGS (extra flags for
# configure), JOBS (default: number of CPUs), WIN32_BUILD_DIR (default:
# build-win32).
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
build_dir=${BUILD_DIR:-$top/build}
jobs=${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}

# Debian packages the build and the tests need.
packages=(build-essential autoconf automake libtool pkg-config libcunit1-dev liburing-dev
  libapr1-dev libaprutil1-dev)

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
# each CUnit program ends its log with.
check_and_total() {
  if ! make -j"$jobs" check; then
    for log in $(find . -name '*.log' ! -name config.log ! -name test-suite.log ! -path './cunit/*'); do
      grep -q '^FAIL\|^ERROR' "${log%.log}.trs" 2>/dev/null && { echo "==> $log"; cat "$log"; }
    done
    exit 1
  fi
  total_pass=0 total_fail=0
  for log in tests/*.log; do
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1) || continue
    echo "$(basename "$log" .log): $line"
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
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
