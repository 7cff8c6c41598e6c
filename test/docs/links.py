#!/usr/bin/env python3
"""links.py SOURCE_DIR: every relative link in the repository's Markdown files resolves: the file or
folder exists, and a #fragment names a heading of the target file (GitHub's anchors). Links to web
addresses are not followed. Prints each broken link as FILE:LINE: TARGET (why) and exits 1 if any."""
import os
import re
import sys

SKIP_DIRS = {".git", "corpus", "raw"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(top):
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(root, f)


def prose_lines(path):
    """(line number, text) of each line outside fenced code, with inline code taken out."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield n, re.sub(r"`[^`]*`", "", line)


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        fenced = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    base = slug(m.group(1))
                    k = seen.get(base, 0)
                    seen[base] = k + 1
                    out.add(base if k == 0 else f"{base}-{k}")
        _anchors[path] = out
    return _anchors[path]


def check(top):
    broken = []
    for md in markdown_files(top):
        for n, line in prose_lines(md):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                where = f"{os.path.relpath(md, top)}:{n}: {target}"
                if not os.path.exists(dest):
                    broken.append(f"{where} (no such file)")
                elif frag and (not dest.endswith(".md") or frag not in anchors(dest)):
                    broken.append(f"{where} (no heading #{frag} there)")
    return broken


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: links.py SOURCE_DIR")
    broken = check(sys.argv[1])
    for b in broken:
        print(b)
    if broken:
        sys.exit(1)
    print("every relative link resolves")


if __name__ == "__main__":
    main()
