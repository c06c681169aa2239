#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/win32/build-cunit.sh - build CUnit for Windows (x86_64-w64-mingw32)
# from Debian's source package, since Debian packages no MinGW CUnit.
#
#   tests/win32/build-cunit.sh PREFIX [HOST]
#
# Installs a static libcunit.a, its headers and cunit.pc under PREFIX
# (normally inside the cross build tree); configure then finds it with
#   PKG_CONFIG_PATH=PREFIX/lib/pkgconfig   (or CUNIT_CFLAGS / CUNIT_LIBS).
# The sources are fetched and built under PREFIX/src and never belong to
# the repository.  Does nothing when PREFIX already holds the library.
#
# `apt-get source` needs a deb-src entry: when the system has none, one is
# added for the same mirror and suites as its first deb entry
# (/etc/apt/sources.list.d/taxi-deb-src.sources), then apt-get update.
# Needs dpkg-dev (for dpkg-source) and root (or sudo) for those two steps.
set -euo pipefail

prefix=${1:?usage: build-cunit.sh PREFIX [HOST]}
host=${2:-x86_64-w64-mingw32}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

if [ -f "$prefix/lib/libcunit.a" ] && [ -f "$prefix/lib/pkgconfig/cunit.pc" ]; then
  echo "build-cunit: $prefix already has CUnit"
  exit 0
fi

# Without the cross compiler configure falls back to the native one and
# builds a library the Windows programs cannot link.
if ! command -v "$host-gcc" >/dev/null 2>&1; then
  echo "build-cunit: $host-gcc not found (Debian: gcc-mingw-w64-x86-64)" >&2
  exit 1
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# ---- a deb-src entry for the system's own mirror ---------------------------
has_deb_src() {
  grep -rqsE '^(deb-src |Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}
if ! has_deb_src; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    # deb822: the first stanza, with Types: deb-src.
    awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1 {
           sub(/Types:[^\n]*/, "Types: deb-src"); print }' \
      /etc/apt/sources.list.d/debian.sources |
      $sudo tee /etc/apt/sources.list.d/taxi-deb-src.sources >/dev/null
  elif [ -f /etc/apt/sources.list ]; then
    grep -E '^deb ' /etc/apt/sources.list | head -n 1 | sed 's/^deb /deb-src /' |
      $sudo tee /etc/apt/sources.list.d/taxi-deb-src.list >/dev/null
  else
    echo "build-cunit: no apt source list found to derive a deb-src entry" >&2
    exit 1
  fi
  $sudo apt-get update -qq
fi
command -v dpkg-source >/dev/null 2>&1 ||
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq dpkg-dev >/dev/null

# ---- fetch and build ---------------------------------------------------------
src="$prefix/src"
rm -rf "$src" && mkdir -p "$src"
(cd "$src" && apt-get source -qq cunit >/dev/null)
dir=$(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'cunit*' | head -n 1)
[ -n "$dir" ] || { echo "build-cunit: apt-get source cunit gave no tree" >&2; exit 1; }

cd "$dir"
log="$prefix/build.log"
run() { "$@" >>"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }; }
: >"$log"
# Debian's tree ships configure.in; regenerate for today's autotools.
run autoreconf -fi
run ./configure --host="$host" --prefix="$prefix" --disable-shared \
  --enable-static --disable-curses --disable-console
# CUnit's own sources warn under this compiler (printf widths): its
# problem, kept in the log.
run make -j"${JOBS:-2}"
run make install
[ -f "$prefix/lib/pkgconfig/cunit.pc" ] ||
  { echo "build-cunit: no cunit.pc installed" >&2; exit 1; }
echo "build-cunit: CUnit for $host installed in $prefix"
