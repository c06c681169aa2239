#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/backends_listed.sh - every backend this build has is tested: for
# each readiness backend examples/echo_server lists, `make check` has an
# entry of the Reactor family and of the pool family
# (tests/conformance/NAME.backend, tests/pools/NAME.backend), and for each
# completion backend one of the Proactor family (tests/proactor/NAME.backend).
# A name with a colon (apr:poll) is a method of the backend before it and
# is covered by that backend's entry.  So a backend added to the table
# (core/reactor/reactor_backends.c, core/proactor/proactor_backends.c) without its entries in
# Makefile.am (FAMILY_ENTRIES) fails here instead of going untested.
#
# Environment: builddir, TAXI_FAMILY_ENTRIES (the entries make check runs;
# set by Makefile.am).  Ends with "N passed, N failed".
: "${builddir:=.}"
server=$builddir/examples/echo_server
if [ ! -x "$server" ]; then
  echo "backends_listed.sh: SKIP: examples/echo_server is not built"
  exit 77
fi
entries=" ${TAXI_FAMILY_ENTRIES:-} "
pass=0 fail=0
check() { # FAMILY NAME
  entry="tests/$1/$(echo "$2" | tr : +).backend"
  case $entries in
    *" $entry "*) pass=$((pass + 1)) ;;
    *)
      echo "FAIL: backend \"$2\" has no make check entry $entry"
      fail=$((fail + 1))
      ;;
  esac
}
for b in $("$server" --list-backends); do
  case $b in *:*) continue ;; esac
  check conformance "$b"
  check pools "$b"
done
for b in $("$server" --list-proactor-backends); do
  case $b in *:*) continue ;; esac
  check proactor "$b"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
