#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# echo_demo.sh - the echo example as a test: runs examples/demo.sh (server
# and client over every backend that works here) with a small load.
#
# Automake runs tests from the build directory with $srcdir exported; when
# run by hand from anywhere, the defaults below find the same files.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
# The small sizes (TAXI_TEST_SMALL): 500 messages a connection.
case ${TAXI_TEST_SMALL:-0} in '' | 0) small_messages=2000 ;; *) small_messages=500 ;; esac
DEMO_MESSAGES=${DEMO_MESSAGES:-$small_messages}
export DEMO_MESSAGES

if sh "$srcdir/examples/demo.sh" "$builddir/examples"; then
  exit 0
fi
exit 1
