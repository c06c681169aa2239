#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/family.sh FILE.backend - run a family's test program over the
# backend the file is named after, the log compiler of the .backend
# entries of `make check`: "tests/pools/epoll.backend" runs
# tests/pools/test_pools epoll, "tests/conformance/apr+poll.backend" runs
# tests/conformance/test_reactor apr:poll ('+' for ':', which make cannot
# have in a file name).  A Windows program (.exe) runs under wine
# (tests/win32/wine-run.sh).  Exits as the program does (77 when the
# backend does not work here).
: "${builddir:=.}"
family=$(basename "$(dirname "$1")")
case $family in
  conformance) prog=tests/conformance/test_reactor ;;
  pools) prog=tests/pools/test_pools ;;
  proactor) prog=tests/proactor/test_proactor ;;
  *)
    echo "family.sh: $1: not an entry of a test family" >&2
    exit 2
    ;;
esac
backend=$(basename "$1" .backend | tr + :)
if [ -f "$builddir/$prog.exe" ]; then
  exec sh "$(dirname "$0")/win32/wine-run.sh" "$builddir/$prog.exe" "$backend"
fi
exec "$builddir/$prog" "$backend"
