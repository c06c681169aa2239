#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_malloc_count.sh - the benchmark's allocation counter
# (tests/bench/malloc_count.c, an LD_PRELOAD module) counts the calls a
# program makes between two SIGUSR2s, and with MALLOC_COUNT_TRACE traces
# exactly those calls, each with the stack that made it; without it, or
# without MALLOC_COUNT_FILE, no trace is written.  bash is the subject:
# it allocates for every command, and sends itself the signals with its
# kill builtin, which returns only once the signal's handler has run.
# Skipped (77) where the module was not built (it needs glibc's
# dlsym(RTLD_NEXT)).

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
module=$builddir/tests/bench/.libs/malloc_count.so
if [ ! -f "$module" ]; then
  echo "bench_malloc_count: $module not built; skipped"
  exit 77
fi
if ! command -v bash >/dev/null 2>&1; then
  echo "bench_malloc_count: no bash; skipped"
  exit 77
fi
module=$(cd "$(dirname "$module")" && pwd)/$(basename "$module")
make_work malloc-count
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# The program: allocations before, between and after the two signals.
program='a=(x y z); kill -USR2 $$; b="${a[*]}$RANDOM"; c=(${b}); kill -USR2 $$; d=$c'

# count_at N FILE: the count of the Nth line of FILE.
count_at() {
  sed -n "${1}p" "$2" | sed 's/^malloc_count: \([0-9]*\).*/\1/'
}

LD_PRELOAD=$module MALLOC_COUNT_FILE=$work/count \
  MALLOC_COUNT_TRACE=$work/trace bash -c "$program" ||
  fail "bash under the module exited with status $?"
if [ "$(grep -c ' sigusr2$' "$work/count")" != 2 ] ||
  [ "$(sed -n 3p "$work/count" | grep -c '^malloc_count: [0-9]*$')" != 1 ]; then
  fail "the count file is not two sigusr2 lines and the final count:"
  cat "$work/count"
fi
first=$(count_at 1 "$work/count")
second=$(count_at 2 "$work/count")
last=$(count_at 3 "$work/count")
between=$((second - first))
traced=$(grep -c '^malloc_count: [a-z_]* [0-9]*$' "$work/trace")
echo "counted $first, then $between between the signals, $last in all;" \
  "$traced traced"
[ "$between" -gt 0 ] || fail "bash allocated nothing between the signals?"
[ "$last" -ge "$second" ] || fail "the final count went down"
[ "$traced" = "$between" ] ||
  fail "traced $traced calls, counted $between between the signals"
# Every traced call has a stack, of at least one frame in bash itself.
awk '/^malloc_count: /{ if (n && !frames) bad++; n++; frames = 0; next }
     /^bash\(/ { frames++ }
     END { if (n && !frames) bad++; exit bad ? 1 : 0 }' "$work/trace" ||
  fail "a traced call without a frame of bash's"

# Without MALLOC_COUNT_TRACE: the same counts' lines, and no trace.
LD_PRELOAD=$module MALLOC_COUNT_FILE=$work/count2 bash -c "$program" ||
  fail "bash under the module (no trace) exited with status $?"
[ "$(grep -c ' sigusr2$' "$work/count2")" = 2 ] ||
  fail "no two sigusr2 lines without the trace"
# MALLOC_COUNT_TRACE alone traces nothing (no SIGUSR2 handler, no phase).
LD_PRELOAD=$module MALLOC_COUNT_TRACE=$work/trace3 bash -c 'a=(x y); b=$a' ||
  fail "bash under the module (trace alone) exited with status $?"
[ -e "$work/trace3" ] && fail "a trace written without MALLOC_COUNT_FILE"
exit $failed
