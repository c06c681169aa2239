#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# fault_sweep.sh - the part of the fault-injection sweep that make check
# runs: one configuration per dispatcher, one error per call site, and the
# burst and persistent cases (tests/fault/sweep.sh --quick).  CI runs the
# whole sweep.
#
# Automake runs tests from the build directory with $srcdir exported; when
# run by hand from anywhere, the defaults below find the same files.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
export srcdir builddir
exec bash "$srcdir/tests/fault/sweep.sh" --quick --jobs 2
