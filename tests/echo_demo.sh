#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# echo_demo.sh - the echo example as a test: runs examples/demo.sh (server
# and client over every backend that works here) with a small load.
#
# Automake runs tests from the build directory with $srcdir exported; when
# run by hand from anywhere, the defaults below find the same files.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
DEMO_MESSAGES=${DEMO_MESSAGES:-2000}
export DEMO_MESSAGES

if sh "$srcdir/examples/demo.sh" "$builddir/examples"; then
  exit 0
fi
exit 1
