#!/usr/bin/env python3
"""The include graph of src/'s layers, read from the sources, against the layer table.

usage: scripts/layer-includes.py [--check] [SRC_DIR]

Prints, per layer, the layers its files include (with how many includes and the first file
that makes each), and marks an include that the table of docs/ARCHITECTURE.md ("Layers")
does not allow: "UP" for a known exception being removed, "NOT ALLOWED" for any other (a
folder of src/ missing from the table included). With --check it exits 1 on an include the
table does not allow. It also names a known exception that no longer occurs, and a layer
the table lets a layer stand on that it does not include, so that table and list follow
the code. Includes of include/mcpwarden/ (the public API's value types) are left out:
every layer may use them.
"""
import os
import re
import sys

# What each layer stands on: docs/ARCHITECTURE.md's table, bottom to top.
STANDS_ON = {
    "fault": set(),  # the tests' negative controls: a leaf, read where a guard can be switched off
    "sys": set(),
    "proc": {"sys"},
    "sandbox": {"sys"},
    "contain": {"sys", "proc", "sandbox", "fault"},
    "rpc": {"sys", "fault"},
    "journal": {"sys", "proc", "fault"},
    "record": {"proc", "contain", "journal"},  # the teardown on record: the engine's report, journaled
    "shim": {"sys", "proc", "sandbox", "contain", "rpc", "journal", "record"},
    "clients": {"sys"},
    "inventory": {"sys", "proc", "journal", "clients", "fault"},
    "reap": {"sys", "proc", "contain", "journal", "record", "clients", "inventory"},
    "drill": {"sys", "proc", "contain", "journal", "record"},  # the shim is run as `mcpwarden run`
    "share": {"sys", "proc", "rpc", "journal", "shim", "fault"},
    "export": {"sys", "journal", "fault"},
    "api": {"sys", "proc", "contain", "journal", "record", "shim", "clients", "inventory", "reap",
            "drill", "share", "export", "fault"},
    "cli": set(),  # the public API alone: src/ is not on its include path
}

# Arrows that run up today, each being removed (docs/ARCHITECTURE.md, "Layers").
KNOWN_UP = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def layers(src):
    return sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))


def edges(src):
    found = {}
    known = set(layers(src))
    for layer in sorted(known):
        for dirpath, _, files in os.walk(os.path.join(src, layer)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp", ".h", ".inc")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for to in INCLUDE.findall(text):
                    if to == layer or to not in known:
                        continue
                    rel = os.path.relpath(path, os.path.dirname(src))
                    found.setdefault((layer, to), []).append(rel)
    return found


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.normpath(args[0] if args else os.path.join(here, "..", "src"))
    graph = edges(src)
    order = list(STANDS_ON) + [d for d in layers(src) if d not in STANDS_ON]
    new = []
    for (frm, to), files in sorted(graph.items(),
                                   key=lambda e: (order.index(e[0][0]), order.index(e[0][1]))):
        mark = ""
        if to not in STANDS_ON.get(frm, set()):
            if (frm, to) in KNOWN_UP:
                mark = "  UP (known: %s)" % KNOWN_UP[(frm, to)]
            else:
                mark = "  NOT ALLOWED"
                new.append((frm, to, files[0]))
        print("%-9s -> %-9s %3d  %s%s" % (frm, to, len(files), files[0], mark))
    for frm, to in KNOWN_UP:
        if (frm, to) not in graph:
            print("known exception gone: %s -> %s (remove it here and from the docs)" % (frm, to))
    for frm, tos in STANDS_ON.items():
        for to in sorted(tos - {t for (f, t) in graph if f == frm}):
            print("the table lets %s stand on %s, which it does not include" % (frm, to))
    for frm, to, first in new:
        print("layer-includes: %s includes %s, which docs/ARCHITECTURE.md's table does not "
              "allow (%s)" % (frm, to, first), file=sys.stderr)
    return 1 if check and new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
