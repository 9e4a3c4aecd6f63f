#!/usr/bin/env python3
"""
tests/check_links.py — the links of markdown files: every image and link resolves relative
to the file's directory (an in-page #anchor: to one of its headings), and, with --no-abs,
no absolute path of a machine (/work/..., /tmp/..., /home/..., /root/...) appears anywhere.

  check_links.py [--no-abs] FILE.md...
One line per problem ("FILE:LINE: ..."), exit 1 when there is any; 0 when none; 2 when a
FILE cannot be read. Used by tests/test_report_links.sh and tests/test_run_all.sh.
"""

import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
ABSOLUTE = re.compile(r"(?<![\w.~-])/(work|tmp|home|root)/")


def anchors(text):
    out = set()
    for line in text.splitlines():
        if line.startswith("#"):
            t = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            out.add(t.replace(" ", "-"))
    return out


def check(path, no_abs):
    with open(path, errors="replace") as f:
        text = f.read()
    here, heads, bad = os.path.dirname(os.path.abspath(path)), anchors(text), []
    in_code = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if no_abs and ABSOLUTE.search(line):
            bad.append(f"{path}:{n}: an absolute path: {line.strip()[:120]}")
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):      # http:, https:, mailto:
                continue
            target, _, frag = target.partition("#")
            if not target:
                if frag not in heads:
                    bad.append(f"{path}:{n}: #{frag} is no heading of the file")
                continue
            if os.path.isabs(target):
                bad.append(f"{path}:{n}: link to an absolute path {target}")
            elif not os.path.exists(os.path.join(here, target)):
                bad.append(f"{path}:{n}: {target} does not exist (relative to {os.path.dirname(path) or '.'})")
    return bad


def main(argv):
    no_abs = "--no-abs" in argv
    files = [a for a in argv if a != "--no-abs"]
    bad = []
    for p in files:
        try:
            bad += check(p, no_abs)
        except OSError as e:
            print(f"check_links.py: {p}: {e.strerror}", file=sys.stderr)
            return 2
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
