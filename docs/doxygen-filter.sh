#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# docs/doxygen-filter.sh - what Doxygen reads of a public header.  The
# headers are written in plain C comments: a comment before a declaration
# documents it, one after a member or a macro on its line documents that one; this
# turns them into Doxygen's forms (/** and /**<) on the way in, without
# changing the headers.  The comment that opens a header documents the
# file (without it Doxygen would not check the functions in it).
sed -e '/SPDX-License-Identifier/d' \
    -e '0,/^\/\*$/s,^/\*$,/** @file,' \
    -e 's,^\([ \t]*\)/\*\([ \t]\|$\),\1/**\2,' \
    -e 's,\([;,{][ \t]*\)/\*\([ \t]\),\1/**<\2,' \
    -e 's,^\(#[ \t]*define[ \t].*[^ \t]\)\([ \t][ \t]*\)/\*\([ \t]\),\1\2/**<\3,' "$1"
