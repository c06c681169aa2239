#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/stream/pair.sh FILE.pair - run the stream layer's test program over
# the dispatcher x backend pair the file is named after: "lf-epoll.pair" is
# lf:epoll, "hsha-apr+poll.pair" is hsha:apr:poll ('+' for ':', which
# make cannot have in a file name).  Exits as the program does (77 when the
# pair does not work here).
: "${builddir:=.}"
name=$(basename "$1" .pair)
dispatcher=${name%%-*}
backend=$(printf '%s' "${name#*-}" | tr + :)
exec "$builddir/tests/stream/test_stream" "$dispatcher:$backend"
