#!/usr/bin/env python3
"""No import circle between the Rust files of a crate, and each type's impl in its own file.

Each crate's files are the nodes. A file imports another when it names an item of the other's
module: through a `use` (globs included) or a path in its code beginning with `crate::`,
`super::` or `self::`, resolved to the longest module prefix that is a file of the crate. A
circle is a set of files each of which reaches every other through imports (a strongly
connected component of more than one file). A module and the files of its submodules are one
unit: imports between a file and its own ancestors or descendants (a parent that re-exports or
calls its parts, parts that use their parent's types) are not circles; imports between
siblings, cousins or unrelated files are.

A type's inherent `impl` blocks are in the file that defines the type, or in that file's own
submodules (a part of a module may add methods to its parent's types; a sibling may not).
Trait impls may be anywhere.

Prints every circle, with one import that closes each edge, and every impl out of place, and
exits 1 if there is any.
Usage: scripts/check-import-cycles.py [CRATE_DIR...]   (default: every crate of the workspace)
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def strip(text):
    """The code without comments and string literals (approximately: enough for paths), read
    left to right, so that `//` inside a string (a URL) is no comment and a raw string ends at
    its own number of `#`s."""
    token = re.compile(
        r'(?P<raw>\br(?P<hashes>#*)"(?:.|\n)*?"(?P=hashes))'
        r'|(?P<str>"(?:\\.|[^"\\])*")'
        r"|(?P<block>/\*.*?\*/)"
        r"|(?P<line>//[^\n]*)"
        r"|(?P<chr>'(?:\\.|[^'\\])')",
        re.S,
    )

    def replace(m):
        if m.group("raw") or m.group("str"):
            return '""'
        if m.group("chr"):
            return "' '"
        return " "

    return token.sub(replace, text)


def expand(tree):
    """The paths of a use tree (`a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e)."""
    tree = tree.strip()
    depth = 0
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                prefix = tree[:i]
                inner = tree[i + 1: tree.rindex("}")]
                out = []
                for part in split_top(inner):
                    if not part.strip():
                        continue
                    for p in expand(part):
                        out.append(prefix + p if p != "self" else prefix.rstrip(":"))
                return out
            depth += 1
    return [tree]


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def modules(src):
    """File → module path (a tuple) for every .rs file reachable from lib.rs/main.rs or a bin."""
    files = {}
    roots = [p for p in (src / "lib.rs", src / "main.rs") if p.exists()]
    roots += sorted((src / "bin").glob("*.rs")) if (src / "bin").is_dir() else []
    for root in roots:
        walk(root, (), files, root.parent, root.stem if root.parent.name == "bin" else None)
    return files


def walk(path, mod, files, dir_for_children, bin_name):
    if path in files or not path.exists():
        return
    files[path] = mod
    text = strip(path.read_text())
    for m in re.finditer(r'(?:#\[path\s*=\s*""\]\s*)?(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text):
        name = m.group(1)
        raw = path.read_text()
        pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+' + name + r'\s*;', raw)
        if pm:
            child = (path.parent / pm.group(1)).resolve()
            walk(child, mod + (name,), files, child.parent / child.stem, None)
            continue
        base = dir_for_children
        for cand in (base / f"{name}.rs", base / name / "mod.rs"):
            if cand.exists():
                nd = cand.parent if cand.name == "mod.rs" else cand.parent / cand.stem
                walk(cand, mod + (name,), files, nd, None)
                break


def use_paths(text):
    """(path, name it is bound to) for every path of every use tree of the file."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        for p in expand(m.group(1).replace("\n", " ")):
            p = p.strip()
            am = re.search(r"\s+as\s+(\w+)$", p)
            p = re.sub(r"\s+as\s+\w+$", "", p)
            out.append((p, am.group(1) if am else p.split("::")[-1].strip()))
    return out


def absolute(p, mod, mods=()):
    """`p` from the crate root, if it starts with crate, super or self, or names a module
    inside `mod` (a path relative to the module, as a `use` in it may be)."""
    segs = [s.strip() for s in p.split("::") if s.strip()]
    if not segs:
        return None
    if mod + (segs[0],) in mods:
        return mod + tuple(s for s in segs if s != "*")
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = mod
        i = 0
        while i < len(segs) and segs[i] in ("super", "self"):
            if segs[i] == "super":
                base = base[:-1]
            i += 1
        rest = segs[i:]
    else:
        return None
    return base + tuple(s for s in rest if s != "*")


def inline_modules(text, mod):
    """The file's text outside inline modules (`mod tests { ... }`), and each inline module's
    text with its module path, innermost first: `super` inside one is the file's module."""
    out = []
    while True:
        m = re.search(r"\bmod\s+(\w+)\s*\{", text)
        if not m:
            break
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        inner = text[m.end(): i]
        out += inline_modules(inner, mod + (m.group(1),))
        text = text[: m.start()] + text[i + 1:]
    return [(text, mod)] + out


def references(text, mod, mods=()):
    """Absolute module paths this file names (from its use trees and code)."""
    resolved = []
    for part, pmod in inline_modules(text, mod):
        resolved += part_references(part, pmod, mods)
    return resolved


def part_references(text, mod, mods):
    out = [p for p, _ in use_paths(text)]
    out += re.findall(r"\b(?:crate|super|self)(?:::(?:\w+|\*))+", text)
    resolved = []
    for p in out:
        a = absolute(p, mod, mods)
        if a is not None:
            resolved.append((a, p))
    return resolved


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    return out


def check(crate):
    src = crate / "src"
    files = modules(src)
    by_mod = {m: f for f, m in files.items()}
    # What each file's uses bind: a name in a file that only re-exports it stands for its origin.
    binds = {}
    mods = set(by_mod)
    for f, mod in files.items():
        text, _ = inline_modules(strip(f.read_text()), mod)[0]
        for p, name in use_paths(text):
            if name in ("*", "self"):
                continue
            # A name bound to another crate's item stands for nothing of this crate.
            binds.setdefault(f, {})[name] = absolute(p, mod, mods) or "extern"

    def owner(target):
        for _ in range(16):
            for k in range(len(target), -1, -1):
                g = by_mod.get(target[:k])
                if g is not None:
                    break
            if g is None:
                return None
            name = target[k] if k < len(target) else None
            again = binds.get(g, {}).get(name) if name else None
            if again == "extern":
                return None
            if again is None or again == target[: k + 1]:
                return g
            target = again + target[k + 1:]
        return g

    graph, why = {}, {}
    for f, mod in files.items():
        text = strip(f.read_text())
        for target, shown in references(text, mod, mods):
            g = owner(target)
            if g is None or g == f:
                continue
            # A module and its submodules' files are one unit: a parent that re-exports or calls
            # its parts, and parts that use their parent, are not a circle between units.
            a, b = files[f], files[g]
            if a[: len(b)] == b or b[: len(a)] == a:
                continue
            # A file's own descendants are its parts, not what it imports, unless it names them.
            graph.setdefault(f, set()).add(g)
            why.setdefault((f, g), shown)
        graph.setdefault(f, set())
    circles = [sorted(c) for c in sccs(graph) if len(c) > 1]
    misplaced = impls_out_of_place(crate, files)
    for c in circles:
        rel = [str(p.relative_to(ROOT)) for p in c]
        print(f"import circle in {crate.relative_to(ROOT)}: " + ", ".join(r.split("/src/", 1)[1] for r in rel))
        for a in c:
            for b in sorted(graph[a]):
                if b in c:
                    print(f"    {a.relative_to(src)} -> {b.relative_to(src)}  ({why[(a, b)]})")
    for f, ty, home in misplaced:
        print(f"impl out of place in {crate.relative_to(ROOT)}: {f.relative_to(src)} adds methods to "
              f"`{ty}`, defined in {home.relative_to(src)}")
    return len(circles) + len(misplaced)


def impls_out_of_place(crate, files):
    """(file, type, defining file) for each inherent impl outside its type's file and parts."""
    defined = {}
    texts = {f: strip(f.read_text()) for f in files}
    for f, t in texts.items():
        for name in re.findall(r"\b(?:struct|enum|union)\s+(\w+)", t):
            defined.setdefault(name, []).append(f)
    out = []
    for f, t in texts.items():
        for m in re.finditer(r"^\s*(?:unsafe\s+)?impl\b([^{;]*)\{", t, flags=re.M):
            head = re.sub(r"<[^<>]*(?:<[^<>]*>[^<>]*)*>", "", m.group(1))
            if re.search(r"\bfor\b", head):
                continue
            ty = head.split("where")[0].strip().split("::")[-1].strip()
            homes = defined.get(ty, [])
            if not homes or f in homes:
                continue
            # Its own part: the impl's file lies under a file that defines the type.
            if any(files[f][: len(files[h])] == files[h] for h in homes):
                continue
            out.append((f, ty, homes[0]))
    return out


def main():
    crates = [Path(a).resolve() for a in sys.argv[1:]] or sorted(
        p.parent for p in ROOT.glob("**/Cargo.toml")
        if (p.parent / "src").is_dir() and "target" not in p.parts and ".venv" not in p.parts
    )
    total = sum(check(c) for c in crates)
    if total:
        print(f"{total} import circle(s) or impl(s) out of place")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
