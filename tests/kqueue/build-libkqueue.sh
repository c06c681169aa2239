#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/kqueue/build-libkqueue.sh - build libkqueue (kqueue(2) and kevent(2)
# implemented over epoll, signalfd, timerfd and eventfd on Linux) from the
# tarball in vendor/, so the kqueue backend can run on a Linux machine.
#
#   tests/kqueue/build-libkqueue.sh PREFIX
#
# Applies every tests/kqueue/patches/*.patch in name order (each restores a
# FreeBSD kqueue(2) behaviour libkqueue departs from, and says which), builds
# with cmake and installs a shared libkqueue under PREFIX/lib and its
# <sys/event.h> under PREFIX/include/kqueue.  Configure taxi against it with
#   configure CPPFLAGS=-IPREFIX/include/kqueue LIBS=-lkqueue \
#     LDFLAGS="-LPREFIX/lib -Wl,-rpath,PREFIX/lib"
# Does nothing when PREFIX already holds a build of the same tarball and
# patches.  Needs cmake and a C compiler.
set -euo pipefail

prefix=${1:?usage: build-libkqueue.sh PREFIX}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tarball=$(ls "$top"/vendor/libkqueue-*.tar.gz | head -n 1)
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

# What the build is made of: the tarball and the patches, by content.
shopt -s nullglob
patches=("$here"/patches/*.patch)
stamp=$(cat "$tarball" "${patches[@]}" | cksum | cut -d' ' -f1)
if [ -f "$prefix/lib/libkqueue.so" ] && [ "$(cat "$prefix/.built-from" 2>/dev/null)" = "$stamp" ]; then
  echo "build-libkqueue: $prefix is up to date"
  exit 0
fi
command -v cmake >/dev/null 2>&1 || {
  echo "build-libkqueue: cmake is needed (Debian: apt-get install cmake)" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
for p in "${patches[@]}"; do
  echo "build-libkqueue: applying $(basename "$p")"
  patch -s -p1 -d "$work/libkqueue" <"$p"
done
cmake -S "$work/libkqueue" -B "$work/build" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DENABLE_TESTING=NO >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" -j"${JOBS:-2}" >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" >/dev/null
echo "$stamp" >"$prefix/.built-from"
echo "build-libkqueue: installed into $prefix"
