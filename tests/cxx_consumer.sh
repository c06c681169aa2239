#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cxx_consumer.sh - the public headers as C++: tests/cxx/consumer.cc built
# with every C++ compiler found here (g++, clang++, $CXX) at -Wall -Wextra
# -Werror, linked with the library just built (and the build's LDFLAGS,
# from TAXI_TEST_LDFLAGS: a sanitizer's runtime), and run.  Skips (77) when
# there is no C++ compiler.
#
# Automake runs tests from the build directory with $srcdir exported.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
work=$builddir/tests/cxx
mkdir -p "$work" || exit 1

compilers=""
for cxx in ${CXX:-} g++ clang++; do
  command -v "$cxx" >/dev/null 2>&1 || continue
  case " $compilers " in *" $cxx "*) continue ;; esac
  compilers="$compilers $cxx"
done
if [ -z "$compilers" ]; then
  echo "SKIP: no C++ compiler (g++, clang++)"
  exit 77
fi

status=0
for cxx in $compilers; do
  out=$work/consumer-$(basename "$cxx")
  # libtool links against the uninstalled library (and makes the wrapper
  # that finds it when run).
  if "$cxx" -std=c++11 -Wall -Wextra -Werror -I"$srcdir/include" \
       -c "$srcdir/tests/cxx/consumer.cc" -o "$out.o" &&
     "$builddir/libtool" --quiet --tag=CC --mode=link "$cxx" -o "$out" \
       "$out.o" "$builddir/libtaxi.la" ${TAXI_TEST_LDFLAGS:-} &&
     "$out"; then
    echo "PASS: $cxx"
  else
    echo "FAIL: $cxx"
    status=1
  fi
done
exit $status
