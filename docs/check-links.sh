#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# docs/check-links.sh - the links of the documentation go somewhere.
#
#   docs/check-links.sh [SRCDIR]
#       Checks every relative link and image of the pages `make docs`
#       renders (README.md, every .md file under docs/ and examples/, and
#       vendor/README.md) and prints each broken one as FILE:LINE: why.
#       Exits 1 if there is any, else 0.  SRCDIR defaults to the directory
#       above this script.  `make docs` runs it first, and `make check`.
#
#   docs/check-links.sh --doxygen FILE
#       What Doxygen reads of the page FILE (FILTER_PATTERNS in
#       docs/Doxyfile; TAXI_SRCDIR names the top of the tree): the same
#       lines, each heading labelled with the id GitHub gives it (prefixed
#       with the page's path, since Doxygen's labels are global), each link
#       to a heading made a reference to that label, each link to a page
#       made absolute.  Doxygen 1.9.4 gives headings ids of its own, which
#       no link written for GitHub names.
#
# The rules, so that a link works both where the Markdown is read on a
# forge and in the HTML pages `make docs` writes:
#   - a relative link or image points to a file or directory that exists;
#   - a link to `page.md#heading` or `#heading` names a heading of that
#     page by its GitHub id: lower case, punctuation dropped, spaces made
#     hyphens, -1, -2, ... added to repeats;
#   - a link (not an image) points to a page (.md) of the set above: the
#     HTML pages are written side by side, and Doxygen links pages only.
#     The one exception is README.md linking `./NAME` to a file that the
#     Doxyfile copies beside the pages (HTML_EXTRA_FILES: NEWS, LICENSE).
#     Name other files of the tree in `code` instead.
# Absolute URLs (scheme:...) and what is inside code are not checked.

LC_ALL=C
export LC_ALL

# Both modes: Markdown read line by line, fenced code skipped, inline links
# [text](target), images ![alt](target), reference definitions [x]: target.
# shellcheck disable=SC2016 # the program is awk's, its $ too
awk_prog='
function slug(t,   s) {
  # The text as GitHub renders it: a link reduced to its text, code and
  # emphasis to their content.
  while (match(t, /\[[^]]*\]\([^)]*\)/)) {
    s = substr(t, RSTART, RLENGTH)
    sub(/\]\(.*$/, "", s)
    t = substr(t, 1, RSTART - 1) substr(s, 2) substr(t, RSTART + RLENGTH)
  }
  gsub(/<[^>]*>/, "", t)
  t = tolower(t)
  gsub(/[^a-z0-9 _\200-\377-]/, "", t)
  gsub(/ /, "-", t)
  return t
}
# The text of an ATX heading line ("## Title ##"), or "" for none.
function atx(line) {
  if (line !~ /^ ? ? ?#+([ \t]|$)/ || line ~ /^ *#######/) return ""
  sub(/^ *#+[ \t]*/, "", line)
  sub(/[ \t]+#+[ \t]*$/, "", line)
  sub(/[ \t]+$/, "", line)
  return line
}
function is_fence(line) { return line ~ /^ ? ? ?(```|~~~)/ }
# A setext underline under `prev`, which makes prev a heading.
function is_underline(line, prev) {
  return prev !~ /^[ \t]*$/ && prev !~ /^[ \t]*([-*+>|]|[0-9]+\.)/ &&
    line ~ /^ ? ? ?(=+|-+)[ \t]*$/
}
# The slug of a heading, its repeats in one page (counted under `file`)
# numbered as GitHub numbers them.
function heading_slug(file, text,   s, c) {
  s = slug(text)
  c = count[file, s]++
  return c > 0 ? s "-" c : s
}
# The headings of FILE as seen[FILE, SLUG]; title[FILE] the slug of the
# first heading when it is of level 1 (the page title, which Doxygen
# keeps as the title rather than a section).  0 if FILE cannot be read.
function load(file,   line, prev, t, s, infence, any, level1) {
  if (file in loaded) return loaded[file]
  loaded[file] = 0
  infence = 0; prev = ""; any = 0
  while ((getline line < file) > 0) {
    loaded[file] = 1
    if (is_fence(line)) { infence = !infence; prev = ""; continue }
    if (infence) continue
    t = atx(line); level1 = line ~ /^ *# /
    if (t == "" && is_underline(line, prev)) { t = prev; level1 = line ~ /=/ }
    if (t == "") { prev = line; continue }
    s = heading_slug("load:" file, t)
    seen[file, s] = 1
    if (!any && level1) title[file] = s
    any = 1; prev = ""
  }
  close(file)
  return loaded[file]
}
# PATH relative to the directory of FILE, normalised ("a/b/../c" is
# "a/c"); "" when it leaves the tree.
function resolve(file, path,   dir, n, i, parts, out, m) {
  dir = file
  if (dir ~ /\//) sub(/\/[^\/]*$/, "", dir); else dir = ""
  if (dir != "") path = dir "/" path
  n = split(path, parts, "/")
  m = 0
  for (i = 1; i <= n; i++) {
    if (parts[i] == "" || parts[i] == ".") continue
    if (parts[i] == "..") { if (m == 0) return ""; m--; continue }
    out[++m] = parts[i]
  }
  path = ""
  for (i = 1; i <= m; i++) path = path (i > 1 ? "/" : "") out[i]
  return path == "" ? "." : path
}
function page_id(rel) { gsub(/[^A-Za-z0-9]/, "_", rel); return rel }
function is_url(t) { return t ~ /^[A-Za-z][A-Za-z0-9+.-]*:/ }
function exists(path) { return system("test -e \"" path "\"") == 0 }
function complain(nr, msg) { printf "%s:%d: %s\n", page, nr, msg; bad++ }

# ---- checking ----
# One link or image (kind "link", "image") of line nr of the page.
function check(nr, kind, target,   hash, path, frag, rel) {
  sub(/^</, "", target); sub(/>$/, "", target)
  if (target == "" || is_url(target)) return
  hash = index(target, "#")
  path = hash ? substr(target, 1, hash - 1) : target
  frag = hash ? substr(target, hash + 1) : ""
  rel = path == "" ? page : resolve(page, path)
  if (rel == "" || !exists(rel)) { complain(nr, "no such file: " target); return }
  if (frag != "") {
    if (rel !~ /\.md$/ || !load(rel)) { complain(nr, "not a Markdown page: " target); return }
    if (!((rel, frag) in seen)) { complain(nr, "no heading \"" frag "\" in " rel); return }
  }
  if (kind == "image") return
  if (rel ~ /\.md$/) {
    if (!(rel in pages)) complain(nr, "not one of the pages make docs renders: " target)
    return
  }
  if (page == "README.md" && path ~ /^\.\/[^\/]+$/ && (substr(path, 3) in copied)) return
  complain(nr, "a link to a file that is not a page (name it in `code`): " target)
}
# The links of a paragraph, its lines joined with newlines (a link text
# may wrap on a forge, but not for Doxygen 1.9.4, which then renders the
# rest of the page as text).
function scan(nr, text,   t, kind, s, pre, start, len) {
  while (match(text, /`[^`]*`/)) { # code: out, but not its line breaks
    s = substr(text, RSTART, RLENGTH)
    gsub(/[^\n]/, "", s)
    text = substr(text, 1, RSTART - 1) s substr(text, RSTART + RLENGTH)
  }
  while (match(text, /!?\[[^]]*\]\([^) \t\n]*([ \t]+"[^"]*")?\)/)) {
    start = RSTART; len = RLENGTH # check() matches too
    t = substr(text, start, len)
    pre = substr(text, 1, start - 1)
    nr += gsub(/\n/, "", pre)
    text = substr(text, start + len)
    kind = t ~ /^!/ ? "image" : "link"
    if (t ~ /\n/) {
      s = t; gsub(/\n/, " ", s)
      complain(nr, "a link whose text spans lines (Doxygen 1.9.4 cannot): " s)
    }
    s = t
    nr += gsub(/\n/, "", s)
    sub(/^!?\[[^]]*\]\(/, "", t); sub(/([ \t]+"[^"]*")?\)$/, "", t)
    check(nr, kind, t)
  }
}
function end_paragraph() { if (para != "") scan(para_nr, para); para = "" }

# ---- --doxygen ----
# The line with each link to a page made absolute (Doxygen would try a
# relative one against its working directory first) and each link to a
# heading made a reference to its label.
function label_links(line,   out, t, hash, path, frag, rel) {
  out = ""
  while (match(line, /\]\([^) \t]*\)/)) {
    t = substr(line, RSTART + 2, RLENGTH - 3)
    out = out substr(line, 1, RSTART + 1)
    line = substr(line, RSTART + RLENGTH - 1)
    hash = index(t, "#")
    path = hash ? substr(t, 1, hash - 1) : t
    frag = hash ? substr(t, hash + 1) : ""
    rel = path == "" ? self : resolve(self, path)
    if (t == "" || is_url(t) || rel !~ /\.md$/) out = out t
    else if (frag == "" || (load(root "/" rel) && title[root "/" rel] == frag))
      out = out root "/" rel # the page itself
    else
      out = out "@ref " page_id(rel) "-" frag
  }
  return out line
}
# The label a heading line ends with ("" for the page title).
function label(text, level1,   s) {
  s = heading_slug("doxygen", text)
  if (first) { first = 0; if (level1) return "" }
  return " {#" page_id(self) "-" s "}"
}
function flush() { if (held) print label_links(heldline); held = 0 }

BEGIN {
  n = split(page_list, tmp, " ")
  for (i = 1; i <= n; i++) pages[tmp[i]] = 1
  n = split(copied_list, tmp, " ")
  for (i = 1; i <= n; i++) copied[tmp[i]] = 1
  self_name = self; sub(/.*\//, "", self_name)
  first = 1
}
mode == "check" && FNR == 1 { end_paragraph(); infence = 0; page = FILENAME }
mode == "check" {
  if (is_fence($0)) { end_paragraph(); infence = !infence; next }
  if (infence) next
  if (match($0, /^ ? ? ?\[[^]]+\]:[ \t]*[^ \t]+/)) { # a reference definition
    t = substr($0, RSTART, RLENGTH); sub(/^[^]]*\]:[ \t]*/, "", t)
    check(FNR, "link", t)
    next
  }
  if ($0 ~ /^[ \t]*$/ || atx($0) != "") { end_paragraph(); scan(FNR, $0); next }
  if (para == "") { para_nr = FNR; para = $0 } else para = para "\n" $0
  next
}
mode == "doxygen" {
  line = $0
  if (is_fence(line)) { flush(); infence = !infence; print line; next }
  if (infence) { print line; next }
  if (held && is_underline(line, heldline)) {
    print label_links(heldline) label(heldline, line ~ /=/)
    held = 0
    print line
    next
  }
  flush()
  t = atx(line)
  if (t != "") {
    sub(/[ \t]+#+[ \t]*$/, "", line)
    print label_links(line) label(t, line ~ /^ *# /)
  } else if (line ~ /^[ \t]*$/) {
    print line
  } else {
    held = 1; heldline = line
  }
}
END {
  if (mode == "doxygen") flush()
  else { end_paragraph(); exit bad ? 1 : 0 }
}
'

if [ "${1:-}" = --doxygen ]; then
  file=$2
  # The page's path from the top, ".." taken out of both (a build's
  # abs_top_srcdir may read "build/..") as Doxygen takes it out of its
  # input's names, symbolic links kept as Doxygen keeps them.
  top=$(cd "${TAXI_SRCDIR:-$(dirname "$0")/..}" && pwd) || exit 1
  dir=$(cd "$(dirname "$file")" && pwd) || exit 1
  case $dir in
    "$top") rel=${file##*/} ;;
    "$top"/*) rel=${dir#"$top"/}/${file##*/} ;;
    *) rel=$file ;;
  esac
  exec awk -v mode=doxygen -v self="$rel" -v root="$top" "$awk_prog" "$file"
fi

top=${1:-$(dirname "$0")/..}
cd "$top" || exit 1
pages="README.md $(find docs examples -name '*.md' -type f | sort | tr '\n' ' ')"
[ -f vendor/README.md ] && pages="$pages vendor/README.md"
# The files the Doxyfile copies beside the pages, by name.
copied=$(sed -n 's/^HTML_EXTRA_FILES *=//p' docs/Doxyfile | tr ' ' '\n' |
  sed -n 's,.*/,,p' | tr '\n' ' ')
# shellcheck disable=SC2086
if awk -v mode=check -v page_list="$pages" -v copied_list="$copied" \
  "$awk_prog" $pages; then
  echo "check-links: every link of the $(echo $pages | wc -w) pages goes somewhere"
  exit 0
fi
echo "check-links: broken links above"
exit 1
