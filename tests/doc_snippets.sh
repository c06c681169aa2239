#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# doc_snippets.sh - the C of the documentation, compiled against the
# library just built and run, so that it cannot drift from the API.  Every
# ```c block of README.md and of the .md files under docs/ says on the
# line before it what it is:
#
#   <!-- snippet: NAME -->   a whole program: compiled (-std=c11 -Wall
#                            -Wextra -Werror), linked, run; it must exit 0
#                            within a minute (TAXI_SNIPPET_SECONDS).
#   <!-- snippet: NAME echo-server -->
#                            a whole program serving echo on the address
#                            and dispatcher its command line names: run under
#                            every dispatcher, each time checked with
#                            examples/echo_client (every byte verified), then
#                            stopped with SIGINT; it must exit 0.
#   <!-- fragment -->        declarations and functions without main:
#                            compiled after #include <taxi/taxi.h> (and
#                            stdio.h, stdlib.h, string.h), not run.
#   <!-- not compiled: REASON -->
#                            left out, for the reason given.
#
# A block without a mark, a mark without its block, or two snippets of one
# name fail the test.  Ends with "N passed, N failed".
#
# Automake runs tests from the build directory with $srcdir exported; the
# compiler and the build's LDFLAGS (a sanitizer's runtime, say) come from
# TAXI_TEST_CC and TAXI_TEST_LDFLAGS, as for tests/cxx_consumer.sh.

: "${srcdir:=$(dirname "$0")/..}"
: "${builddir:=.}"
cc=${TAXI_TEST_CC:-${CC:-cc}}
cflags="-std=c11 -Wall -Wextra -Werror"
limit=${TAXI_SNIPPET_SECONDS:-60} # a program's time to end by itself
client=$builddir/examples/echo_client
for f in "$builddir/libtool" "$builddir/libtaxi.la"; do
  if [ ! -f "$f" ]; then
    echo "doc_snippets.sh: SKIP: $f is not built"
    exit 77
  fi
done
work=$builddir/tests/doc-snippets
rm -rf "$work" && mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd) || exit 1 # the blocks are read from $srcdir
pid=''
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null' EXIT

# The pages, then every block of theirs: one line of the list per block,
# "KIND NAME FILE LINE" (KIND run, echo-server, fragment, skip, or error
# with the message as NAME), its text in $work/NAME.c.
pages=$(cd "$srcdir" && { echo README.md; find docs -name '*.md' -type f; } |
  LC_ALL=C sort)
# shellcheck disable=SC2086 # $pages: one word per page
(cd "$srcdir" && awk -v work="$work" '
  function fail(msg) { printf "error %s %s %d\n", msg, FILENAME, FNR; mark = "" }
  FNR == 1 {
    if (mark != "") { printf "error mark-without-block %s %d\n", markfile, markline; mark = "" }
    infence = 0
  }
  infence && /^ *(```|~~~)[ \t]*$/ { infence = 0; if (out != "") close(out); out = ""; next }
  infence { if (out != "") { sub("^" indent, ""); print > out }; next }
  /^ *(```|~~~)/ {
    infence = 1; out = ""
    indent = $0; sub(/[^ ].*$/, "", indent)
    if ($0 !~ /^ *```[ \t]*[cC][ \t]*$/) { if (mark != "") fail("mark-on-a-block-not-c"); next }
    if (mark == "") { printf "error unmarked-c-block %s %d\n", FILENAME, FNR; next }
    split(mark, m, " ")
    if (m[1] == "skip") { printf "skip - %s %d\n", FILENAME, FNR; mark = ""; next }
    if (m[1] == "fragment") name = "fragment-" (++fragments)
    else {
      name = m[2]
      if (name in names) { fail("two-snippets-named-" name); next }
      names[name] = 1
    }
    out = work "/" name ".c"
    if (m[1] == "fragment")
      print "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <taxi/taxi.h>" > out
    printf "%s %s %s %d\n", (m[1] == "fragment" ? "fragment" : m[3] == "" ? "run" : m[3]), name, FILENAME, FNR
    mark = ""
    next
  }
  /^[ \t]*<!--[ \t]*(snippet:|fragment|not compiled:)/ {
    if (mark != "") { printf "error mark-without-block %s %d\n", markfile, markline }
    line = $0
    sub(/^[ \t]*<!--[ \t]*/, "", line); sub(/[ \t]*-->[ \t]*$/, "", line)
    markfile = FILENAME; markline = FNR
    if (line ~ /^snippet:[ \t]*[A-Za-z0-9_-]+([ \t]+echo-server)?$/) {
      sub(/^snippet:[ \t]*/, "", line); mark = "snippet " line
    } else if (line == "fragment") mark = "fragment"
    else if (line ~ /^not compiled:[ \t]*[^ \t]/) mark = "skip"
    else { printf "error malformed-mark %s %d\n", FILENAME, FNR; mark = "" }
    next
  }
  /^[ \t]*$/ { next }
  { if (mark != "") { printf "error mark-without-block %s %d\n", markfile, markline; mark = "" } }
  END { if (mark != "") printf "error mark-without-block %s %d\n", markfile, markline }
' $pages) >"$work/blocks" || exit 1

pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

# build NAME [-c]: NAME.c compiled, and linked with the library unless -c.
build() {
  # shellcheck disable=SC2086 # $cflags: several flags
  if ! "$cc" $cflags ${2:+-Wno-unused-function} -I"$srcdir/include" \
    -c "$work/$1.c" -o "$work/$1.o" >"$work/$1.out" 2>&1; then
    return 1
  fi
  [ "${2:-}" = -c ] && return 0
  # shellcheck disable=SC2086
  "$builddir/libtool" --quiet --tag=CC --mode=link "$cc" -o "$work/$1" \
    "$work/$1.o" "$builddir/libtaxi.la" ${TAXI_TEST_LDFLAGS:-} \
    >>"$work/$1.out" 2>&1
}

# run_timed SECONDS PROG [ARGS]: PROG, killed if it outlives SECONDS.
run_timed() {
  if command -v timeout >/dev/null 2>&1; then
    timeout -s KILL "$@"
    return
  fi
  secs=$1
  shift
  "$@" &
  pid=$!
  (sleep "$secs" && kill -9 "$pid" 2>/dev/null) &
  watchdog=$!
  wait "$pid"
  status=$?
  pid=''
  kill "$watchdog" 2>/dev/null
  return $status
}

# serve NAME DISPATCHER: the echo server on a free port (a few tried),
# a load through it, a stop.
serve() {
  out=$work/$1-$2.out
  try=0
  while [ $try -lt 5 ]; do
    port=$((20000 + ($$ * 7 + try * 997) % 10000))
    try=$((try + 1))
    "$work/$1" "127.0.0.1:$port" "$2" >"$out" 2>&1 &
    pid=$!
    # Up once a round trip goes through; a server that has exited could
    # not bind the port (tried again with another).
    up=0 i=0
    while [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
      if "$client" --port "$port" --connections 1 --messages 1 \
        --time-limit 5 >/dev/null 2>&1 && kill -0 "$pid" 2>/dev/null; then
        up=1
        break
      fi
      sleep 0.1
      i=$((i + 1))
    done
    [ "$up" = 1 ] && break
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=''
  done
  if [ "$up" != 1 ]; then
    echo "the server did not start:"
    cat "$out"
    return 1
  fi
  status=0
  if ! "$client" --port "$port" --connections 8 --messages 500 --size 1000 \
    --time-limit 30; then
    echo "the load failed"
    status=1
  fi
  # A clean stop: SIGINT makes taxi_io_run return, then exit status 0.
  kill -INT "$pid"
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "still running 30 s after SIGINT"
    kill -9 "$pid"
    status=1
  fi
  wait "$pid" || { echo "exit status not 0"; status=1; }
  pid=''
  [ -s "$out" ] && cat "$out"
  return $status
}

while read -r kind name file line; do
  where="$file:$line"
  case $kind in
    error)
      bad "$where: $name (see tests/doc_snippets.sh for the marks)"
      ;;
    skip)
      ok "$where: not compiled, as its mark says"
      ;;
    fragment)
      if build "$name" -c; then
        ok "$where: fragment compiles"
      else
        bad "$where: fragment does not compile:"
        cat "$work/$name.out"
      fi
      ;;
    run)
      if ! build "$name"; then
        bad "$where: snippet $name does not build:"
        cat "$work/$name.out"
      elif run_timed "$limit" "$work/$name" >"$work/$name.run" 2>&1; then
        ok "$where: snippet $name runs"
        sed 's/^/    /' "$work/$name.run"
      else
        status=$?
        bad "$where: snippet $name failed (exit status $status):"
        cat "$work/$name.run"
        [ $status = 137 ] && echo "(killed: still running after $limit s)"
      fi
      ;;
    echo-server)
      if [ ! -x "$client" ]; then
        bad "$where: $client is not built"
      elif ! build "$name"; then
        bad "$where: snippet $name does not build:"
        cat "$work/$name.out"
      else
        for d in reactor lf hsha proactor proactors; do
          if serve "$name" "$d" >"$work/$name-$d.log" 2>&1; then
            ok "$where: snippet $name serves echo with $d"
          else
            bad "$where: snippet $name with $d:"
            cat "$work/$name-$d.log"
          fi
        done
      fi
      ;;
  esac
done <"$work/blocks"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
