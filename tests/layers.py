#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The library's structure as its compiler sees it: which file calls which.

Every library source is compiled once more with gcc's -fcallgraph-info,
which writes each translation unit's functions and the direct calls they
make.  From those, this prints:

  - the files of each wing of core/ (and of backends/, ports/, ext/) with
    their sizes, and every file over the size limit;
  - the calls between wings, and every call that points the wrong way
    (core/stream -> core/pools, core/proactor -> core/reactor ->
    core/common -> ports: a wing may call the ones to its right only;
    core/pools may call core/proactor);
  - the circles between files: files that call each other, directly or
    through others (strongly connected components of the file graph);
  - with --walk FUNCTION: the path of that function's calls through the
    files (depth first, each function shown once), and, over every chain
    of calls it can make, how often a call enters another file and how
    often it returns to a file the chain had left (A -> B -> A).

Calls through function pointers (backend tables, hooks) are not edges:
that is how a lower layer hands work back up without naming it.

With --check it fails (exit status 1) on a wrong-way call between wings,
a circle between files of core/, or a library file over the limit.

Usage (the build tree's `make layers` passes the arguments):
  layers.py --cc CC --flags "CPPFLAGS" --srcdir DIR [--check]
            [--walk FUNCTION]... [--limit 800] FILE.c...
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

# A wing may call the wings of lower rank.  Wings of equal rank may not
# call each other.  ports/ and backends/ are below core/; the completion
# backends that build on the reactor (emulated) or read an operation's
# progress (core/proactor/proactor_op.c) are listed as known exceptions.
RANKS = {
    'ext': 7,
    'core/stream': 6,
    'core/pools': 5,
    'core/proactor': 4,
    'core/reactor': 3,
    'core/common': 2,
    'backends': 1,
    'ports': 0,
}

# Calls from a lower wing to a higher one that the design allows, each
# with its reason.
ALLOWED_UP = {
    ('backends', 'core/reactor'):
        'a completion backend emulated over a reactor uses the reactor API',
    ('backends', 'core/proactor'):
        'completion backends read what is left of an operation '
        '(core/proactor/proactor_op.h)',
    ('backends', 'core/common'):
        'backends allocate, back off and record refusals through common',
    ('ports', 'core/common'):
        'ports allocate and record refusals through common',
}

NODE = re.compile(r'node: \{ title: "([^"]*)" label: "([^"\\]*)\\n([^":]*):(\d+):\d+"'
                  r'( shape : ellipse)?')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]*)" targetname: "([^"]*)"')


def wing_of(path):
    parts = path.split('/')
    if parts[0] == 'core' and len(parts) > 2:
        return 'core/' + parts[1]
    return parts[0]


def compile_one(args, src, outdir, n):
    obj = os.path.join(outdir, 'u%d.o' % n)
    cmd = [*args.cc.split(), *args.flags.split(), '-O0', '-w', '-c',
           '-fcallgraph-info', '-o', obj, os.path.join(args.srcdir, src)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.stderr.write(r.stdout.decode(errors='replace'))
        raise SystemExit('layers: cannot compile %s' % src)
    return src, os.path.join(outdir, 'u%d.ci' % n)


def rel(path, srcdir):
    """A path gcc recorded (as the compiler was given it: relative to the
    directory it ran in, which is ours) as a path of the source tree."""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(srcdir))


def read_graph(args, sources):
    """Returns (functions, calls): functions maps a function's key to
    (name, file); calls maps a key to the ordered list of keys it calls."""
    functions = {}
    local_calls = []
    external = {}  # name -> file, for functions defined with external linkage
    with tempfile.TemporaryDirectory() as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
            units = list(ex.map(lambda a: compile_one(args, a[1], tmp, a[0]),
                                enumerate(sources)))
        for src, ci in units:
            text = open(ci, encoding='utf-8', errors='replace').read()
            unit = {}
            for m in NODE.finditer(text):
                title, name, where, line, ellipse = m.groups()
                if ellipse:
                    unit.setdefault(title, ('extern', name))
                    continue
                f = rel(where, args.srcdir)
                if f.startswith('..') or os.path.isabs(f):
                    unit[title] = ('extern', name)  # a system header's inline
                    continue
                key = title if ':' not in title else src + ':' + name
                if f.endswith('.h'):
                    key = f + ':' + name  # an inline function of a header
                unit[title] = ('def', key)
                functions[key] = (name, f)
                if ':' not in title:
                    external[name] = key
            for m in EDGE.finditer(text):
                local_calls.append((unit, m.group(1), m.group(2)))
    calls = {}
    for unit, s, t in local_calls:
        sk = unit.get(s)
        tk = unit.get(t)
        if not sk or sk[0] != 'def' or not tk:
            continue
        target = tk[1] if tk[0] == 'def' else external.get(tk[1])
        if not target:
            continue  # the C library, the OS, another library
        lst = calls.setdefault(sk[1], [])
        if target not in lst:
            lst.append(target)
    return functions, calls


def file_edges(functions, calls):
    edges = {}
    for s, ts in calls.items():
        fs = functions[s][1]
        for t in ts:
            ft = functions[t][1]
            if fs != ft:
                edges.setdefault((fs, ft), []).append((functions[s][0], functions[t][0]))
    return edges


def circles(files, edges):
    """Tarjan's strongly connected components over the file graph."""
    succ = {f: [] for f in files}
    for (a, b) in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(succ[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return sorted(out)


def walk(functions, calls, start, cap=500000):
    """The calls of start through the files.  Returns the tree of first
    calls (depth first, each function shown once) as (depth, file, name),
    and two counts taken over every chain of calls (a function at most once
    in a chain): the calls into another file, and the returns, calls into a
    file that is still on the chain below a call into another file: a
    round trip A -> B -> A, which a layered design does not make."""
    keys = [k for k, v in functions.items() if v[0] == start]
    if not keys:
        raise SystemExit('layers: no function named %s' % start)
    tree = []
    shown = set()

    def show(key, depth):
        shown.add(key)
        f = functions[key][1]
        for t in calls.get(key, []):
            if t in shown:
                continue
            ft = functions[t][1]
            if ft != f:
                tree.append((depth + 1, ft, functions[t][0]))
            show(t, depth + 1 if ft != f else depth)

    counts = {'entries': 0, 'returns': 0, 'chains': 0}

    def chains(key, on_chain, files):
        counts['chains'] += 1
        if counts['chains'] > cap:
            return
        f = functions[key][1]
        for t in calls.get(key, []):
            if t in on_chain:
                continue
            ft = functions[t][1]
            if ft != f:
                counts['entries'] += 1
                if ft in files:
                    counts['returns'] += 1
            on_chain.add(t)
            chains(t, on_chain, files + [ft] if ft != f else files)
            on_chain.discard(t)

    f0 = functions[keys[0]][1]
    tree.append((0, f0, start))
    show(keys[0], 0)
    chains(keys[0], {keys[0]}, [f0])
    if counts['chains'] > cap:
        counts['entries'] = counts['returns'] = -1  # too many chains to count
    return tree, counts['entries'], counts['returns']


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--cc', default='gcc')
    ap.add_argument('--flags', default='')
    ap.add_argument('--srcdir', default='.')
    ap.add_argument('--check', action='store_true')
    ap.add_argument('--walk', action='append', default=[])
    ap.add_argument('--limit', type=int, default=800)
    ap.add_argument('--files', action='store_true',
                    help='list every call between two files of core/')
    ap.add_argument('sources', nargs='+')
    args = ap.parse_args()
    sources = sorted(set(s for s in args.sources if s.endswith('.c')))
    functions, calls = read_graph(args, sources)
    edges = file_edges(functions, calls)
    if len(functions) < len(sources) or not edges:
        # Nothing recognised: a check that sees nothing must not pass.
        raise SystemExit('layers: %d functions and %d calls between files read from '
                         '%d sources: the call graph was not understood' %
                         (len(functions), len(edges), len(sources)))

    files = sorted(set(f for _, f in functions.values()) | set(sources))
    problems = 0

    print('== files by wing (lines)')
    by_wing = {}
    for f in files:
        by_wing.setdefault(wing_of(f), []).append(f)
    for w in sorted(by_wing, key=lambda w: -RANKS.get(w, -1)):
        sizes = []
        for f in by_wing[w]:
            try:
                n = sum(1 for _ in open(os.path.join(args.srcdir, f), encoding='utf-8'))
            except OSError:
                n = 0
            sizes.append((f, n))
        print('%-14s %3d files %6d lines' % (w, len(sizes), sum(n for _, n in sizes)))
    print()

    print('== calls between wings (calls, wrong-way ones marked !)')
    wing_calls = {}
    for (a, b), lst in edges.items():
        wa, wb = wing_of(a), wing_of(b)
        if wa != wb:
            wing_calls.setdefault((wa, wb), []).extend((a, b, s, t) for s, t in lst)
    for (wa, wb) in sorted(wing_calls, key=lambda p: (-RANKS.get(p[0], -1), -RANKS.get(p[1], -1))):
        lst = wing_calls[(wa, wb)]
        up = RANKS.get(wa, 9) <= RANKS.get(wb, 9) and (wa, wb) not in ALLOWED_UP
        if wa in ('core/pools',) and wb == 'core/proactor':
            up = False
        mark = '!' if up else ' '
        note = ''
        if (wa, wb) in ALLOWED_UP:
            note = '  (allowed: %s)' % ALLOWED_UP[(wa, wb)]
        print('%s %-14s -> %-14s %4d%s' % (mark, wa, wb, len(lst), note))
        if up:
            problems += 1
            for a, b, s, t in sorted(lst):
                print('      %s:%s -> %s:%s' % (a, s, b, t))
    print()

    core_files = [f for f in files if f.startswith('core/')]
    print('== calls between files of core/: %d pairs of files' %
          sum(1 for (a, b) in edges if a.startswith('core/') and b.startswith('core/')))
    if args.files:
        for (a, b) in sorted(edges):
            if a.startswith('core/') and b.startswith('core/'):
                print('   %s -> %s (%s)' % (a, b, ', '.join(sorted(set(t for _, t in edges[(a, b)])))))
    print()

    print('== circles between files')
    cs = circles(files, edges)
    if not cs:
        print('   none')
    for comp in cs:
        in_core = any(f.startswith('core/') for f in comp)
        print('%s  %s' % ('!' if in_core else ' ', '  '.join(comp)))
        if in_core:
            problems += 1
            members = set(comp)
            for (a, b), lst in sorted(edges.items()):
                if a in members and b in members:
                    print('      %s -> %s: %s' % (a, b, ', '.join(sorted(set(t for _, t in lst)))))
    print()

    # Every file of the library, whichever the configuration compiles.
    long_files = []
    for top in ('core', 'backends', 'ports', 'include'):
        for dirpath, _, names in os.walk(os.path.join(args.srcdir, top)):
            for name in sorted(names):
                if not name.endswith(('.c', '.h')):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8', errors='replace') as fh:
                    n = sum(1 for _ in fh)
                if n > args.limit:
                    long_files.append((os.path.relpath(path, args.srcdir), n))
    print('== library files over %d lines (core/, backends/, ports/, include/)' %
          args.limit)
    if not long_files:
        print('   none')
    for f, n in long_files:
        print('!  %s %d' % (f, n))
        problems += 1
    print()

    for start in args.walk:
        path, entries, returns = walk(functions, calls, start)
        print('== the calls of %s through the files' % start)
        print('   over every chain of calls: %d calls into another file, %d returns '
              'to a file the chain had left' % (entries, returns))
        for depth, f, name in path:
            print('   %s%s (%s)' % ('  ' * depth, f, name))
        print()

    if args.check and problems:
        print('layers: %d problem(s) above (marked !)' % problems)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
