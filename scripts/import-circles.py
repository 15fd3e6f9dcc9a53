#!/usr/bin/env python3
"""Import circles between the files of a room: fails naming each circle.

A room is a module directory under src/ (src/storage, src/rpc, ...). For every room this
builds the graph of file -> file edges inside it and fails when the graph has a circle (`.ci/run`
runs it right after the layering rule, which covers the edges between rooms).

An edge A -> B means A's code names an item B defines:
- a `use` of a `crate::<room>::...`, `super::...`, `self::...` or child-module path;
- a path of the same kind written in the code (`super::file::Block`, `freeze::Merges`);
- a name a `pub use` brings in, where the file's own code uses it.
A path is followed through re-exports to the file that defines the item: `super::Segment`,
re-exported by `segments/mod.rs` from `segments/file.rs`, is an edge to `file.rs`. A `pub use`
alone (a module re-exporting its children's items) is not an edge. Comments, strings and the
paths to other rooms or crates are left out.

Usage: scripts/import-circles.py [SRC_DIR]   (default: src, from the repository root)
Python 3 standard library only.
"""

import re
import sys
from pathlib import Path

# Rooms whose circles are known and being removed elsewhere. Each line names the room and why it
# may still have circles; delete the line when they are gone (the check then says so).
KNOWN_CIRCLES: dict[str, str] = {}

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*)
  | (?P<raw>b?r\#*")
  | (?P<str>b?"(?:\\.|[^"\\])*")
  | (?P<char>b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])')
  | (?P<life>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>[0-9][A-Za-z0-9_]*)
  | (?P<path>::)
  | (?P<punct>.)
    """,
    re.X | re.S,
)

ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod"}
KEYWORDS = {"crate", "super", "self", "Self"}


def tokens(text):
    """The file's identifiers, `::` and punctuation, without comments, strings or numbers."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        m = TOKEN.match(text, i)
        if m is None:  # pragma: no cover (the last alternative matches any character)
            i += 1
            continue
        kind = m.lastgroup
        if kind == "block":
            depth, j = 1, m.end()
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        if kind == "raw":
            hashes = m.group("raw").count("#")
            end = text.find('"' + "#" * hashes, m.end())
            i = n if end < 0 else end + 1 + hashes
            continue
        if kind in ("id", "path", "punct"):
            out.append(m.group(kind))
        i = m.end()
    return out


def parse_use_tree(toks, i, prefix, out):
    """Parses a use tree from toks[i]; appends (path, bound name or '*') to out; returns the end."""
    path = list(prefix)
    while i < len(toks):
        t = toks[i]
        if t == "{":
            i += 1
            while i < len(toks) and toks[i] != "}":
                i = parse_use_tree(toks, i, path, out)
                if i < len(toks) and toks[i] == ",":
                    i += 1
            return i + 1
        if t == "*":
            out.append((path, "*"))
            return i + 1
        if t == "::":
            i += 1
            continue
        if t in (",", "}", ";"):
            if path:
                name = path[-1]
                if name == "self":
                    path = path[:-1]
                    name = path[-1] if path else "self"
                out.append((path, name))
            return i
        if t == "as":
            name = toks[i + 1] if i + 1 < len(toks) else "_"
            if path and path[-1] == "self":
                path = path[:-1]
            out.append((path, name))
            return i + 2
        path.append(t)
        i += 1
    return i


class File:
    """One source file: the module path it defines, its uses, items and code paths."""

    def __init__(self, path, module):
        self.path = path
        self.module = module  # tuple: ("storage", "segments", "freeze")
        self.uses = []  # (scope module, path, bound name, is pub)
        self.code_paths = []  # (scope module, path)
        self.names = []  # identifiers in the code (outside use statements)
        self.items = set()  # names of top-level items
        self.children = set()  # `mod x;` at the top level
        self.test_children = set()  # `#[cfg(test)] mod x;` at the top level
        self.bindings = {}  # top-level use: name -> (scope, path)
        self.globs = []  # top-level `use path::*`: (scope, path)
        self.parse(tokens(path.read_text(encoding="utf-8")))

    def parse(self, toks):
        depth = 0
        inline = []  # (name, depth at its opening brace, under #[cfg(test)])
        i = 0
        while i < len(toks):
            t = toks[i]
            scope = self.module + tuple(name for name, _, _ in inline)
            in_test = any(test for _, _, test in inline)
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if inline and inline[-1][1] == depth:
                    inline.pop()
            elif t == "mod" and i + 2 < len(toks) and re.match(r"[A-Za-z_]", toks[i + 1]):
                test = toks[max(0, i - 7) : i] == ["#", "[", "cfg", "(", "test", ")", "]"]
                if toks[i + 2] == "{":
                    inline.append((toks[i + 1], depth, test))
                    depth += 1
                    i += 3
                    continue
                if toks[i + 2] == ";" and not inline:
                    self.children.add(toks[i + 1])
                    if test:
                        self.test_children.add(toks[i + 1])
                if not inline:
                    self.items.add(toks[i + 1])
            elif t == "use" and (i == 0 or toks[i - 1] != "::"):
                public = self.is_pub(toks, i)
                trees = []
                end = parse_use_tree(toks, i + 1, [], trees)
                for path, name in trees:
                    if in_test:
                        continue
                    self.uses.append((scope, path, name, public))
                    if not inline:
                        if name == "*":
                            self.globs.append((scope, path))
                        else:
                            self.bindings[name] = (scope, path)
                while end < len(toks) and toks[end] != ";":
                    end += 1
                i = end + 1
                continue
            elif t in ITEM_KEYWORDS and depth == 0 and i + 1 < len(toks):
                self.items.add(toks[i + 1])
            elif t == "macro_rules" and depth == 0 and i + 2 < len(toks):
                self.items.add(toks[i + 2])
            elif re.match(r"[A-Za-z_]", t) and (i == 0 or toks[i - 1] != "::"):
                path = [t]
                j = i + 1
                while j + 1 < len(toks) and toks[j] == "::" and re.match(r"[A-Za-z_]", toks[j + 1]):
                    path.append(toks[j + 1])
                    j += 2
                # `pub(in crate::x)` names where an item is visible, not what it uses.
                visibility = i >= 2 and toks[i - 1] == "in" and toks[i - 2] == "("
                if not in_test:
                    self.names.append(t)
                if len(path) > 1 and not in_test and not visibility:
                    self.code_paths.append((scope, path))
                i = j
                continue
            i += 1

    @staticmethod
    def is_pub(toks, i):
        """Whether the `use` at toks[i] is `pub` or `pub(...)`."""
        j = i - 1
        if j >= 0 and toks[j] == ")":
            while j >= 0 and toks[j] != "(":
                j -= 1
            j -= 1
        return j >= 0 and toks[j] == "pub"


class Crate:
    """Every file of the crate, by module path; resolves paths to the file defining the item."""

    def __init__(self, src):
        self.src = src
        self.files = {}
        for path in sorted(src.rglob("*.rs")):
            rel = path.relative_to(src).with_suffix("")
            parts = list(rel.parts)
            if parts in (["lib"], ["main"]):
                continue
            if parts[-1] == "mod":
                parts = parts[:-1]
            self.files[tuple(parts)] = File(path, tuple(parts))
        # Unit-test files (`#[cfg(test)] mod tests;`) are left out, as test modules inside files.
        for module, f in list(self.files.items()):
            for child in f.test_children:
                self.files.pop(module + (child,), None)

    def file_of(self, module):
        """The file that holds `module` (itself, or the file its inline module sits in)."""
        for k in range(len(module), 0, -1):
            if module[:k] in self.files:
                return self.files[module[:k]], module[k:]
        return None, ()

    def absolute(self, scope, path, local):
        """`path` written in `scope` as a path from the crate root, or None (another crate)."""
        if not path:
            return None
        head = path[0]
        if head == "crate":
            return tuple(path[1:])
        if head in ("super", "self"):
            base = list(scope)
            rest = list(path)
            while rest and rest[0] in ("super", "self"):
                if rest.pop(0) == "super":
                    if not base:
                        return None
                    base.pop()
            return tuple(base + rest)
        if head in local.children and scope == local.module:
            return scope + tuple(path)
        return None  # another crate (or `Self`)

    def resolve(self, target, seen=None):
        """The file defining the item (or module) at the crate path `target`."""
        seen = set() if seen is None else seen
        if target in seen or target is None:
            return None
        seen.add(target)
        f, rest = self.file_of(target)
        if f is None:
            return None
        if not rest or rest[0] in f.items and rest[0] not in f.bindings:
            return f
        name = rest[0]
        if name in f.bindings:
            scope, path = f.bindings[name]
            absolute = self.absolute(scope, path, f)
            if absolute is None:
                return f
            found = self.resolve(absolute + tuple(rest[1:]), seen)
            return found or f
        if name in f.children:
            return self.resolve(f.module + tuple(rest), seen)
        for scope, path in f.globs:
            absolute = self.absolute(scope, path, f)
            if absolute is None:
                continue
            g, grest = self.file_of(absolute)
            if g is None or grest:
                continue
            if name in g.items or name in g.bindings or name in g.children:
                found = self.resolve(absolute + tuple(rest), seen)
                if found:
                    return found
        return f

    def edges(self, f):
        """The files of f's room that f uses, with one path that names each."""
        out = {}
        room = f.module[0]

        def add(scope, path):
            absolute = self.absolute(scope, path, f)
            if absolute is None or not absolute or absolute[0] != room:
                return
            g = self.resolve(absolute)
            if g is not None and g is not f and g.module[0] == room:
                out.setdefault(g.path, "::".join(path))

        names = set(f.names)
        for scope, path, name, public in f.uses:
            if name == "*" or not public or name in names:
                add(scope, path)
        for scope, path in f.code_paths:
            add(scope, path)
        # A name bound by a `use` of a module (`use super::segments;`) then used as `segments::X`.
        for scope, path in f.code_paths:
            head = path[0]
            if head in f.bindings and head not in KEYWORDS:
                bscope, bpath = f.bindings[head]
                add(bscope, list(bpath) + list(path[1:]))
        return out


def circles(nodes, edges):
    """Strongly connected components of more than one file, each with one circle through it."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    found = []
    for comp in comps:
        members = set(comp)
        start = comp[0]
        # Shortest circle through `start` inside the component (breadth first).
        parent = {start: None}
        queue = [start]
        cycle = None
        while queue and cycle is None:
            nxt = []
            for v in queue:
                for w in sorted(edges.get(v, ())):
                    if w not in members:
                        continue
                    if w == start:
                        back = []
                        u = v
                        while u is not None:
                            back.append(u)
                            u = parent[u]
                        cycle = back[::-1] + [start]
                        break
                    if w not in parent:
                        parent[w] = v
                        nxt.append(w)
                if cycle:
                    break
            queue = nxt
        found.append((comp, cycle))
    return found


def main():
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    crate = Crate(src)
    rooms = sorted({m[0] for m in crate.files if len(m) > 1})
    failed = False
    for room in rooms:
        files = [f for m, f in crate.files.items() if m[0] == room]
        edges, why = {}, {}
        for f in files:
            used = crate.edges(f)
            edges[f.path] = set(used)
            for g, path in used.items():
                why[(f.path, g)] = path
        found = circles([f.path for f in files], edges)
        if not found:
            if room in KNOWN_CIRCLES:
                print(f"import circles: src/{room} has none left: delete its line in "
                      f"KNOWN_CIRCLES ({Path(__file__).name})")
            continue
        allowed = room in KNOWN_CIRCLES
        for comp, cycle in found:
            rel = lambda p: str(p.relative_to(src / room))
            label = "known (allowed: " + KNOWN_CIRCLES[room] + ")" if allowed else "import circle"
            print(f"{label} in src/{room}: " + " -> ".join(rel(p) for p in cycle))
            for a, b in zip(cycle, cycle[1:]):
                print(f"    {rel(a)} -> {rel(b)}: {why.get((a, b), '?')}")
            if len(comp) > len(cycle) - 1:
                print("    the same circle also takes in: "
                      + ", ".join(rel(p) for p in comp if p not in cycle))
        failed = failed or not allowed
    if failed:
        print("import circles: each file of a room must only use files that do not use it back "
              "(move the shared items to a file both use)")
        return 1
    print(f"import circles: none in {len(rooms) - len(KNOWN_CIRCLES)} rooms "
          f"(known and allowed: {', '.join(sorted(KNOWN_CIRCLES)) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
