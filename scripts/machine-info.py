#!/usr/bin/env python3
"""
scripts/machine-info.py — adds what the machine is (CPU model, family and flags, cores,
caches, frequency governor, memory, kernel, compiler, MPI and PyTorch versions, git commit,
date, core-to-core latency: scripts/reporting/machine.py's collect()) to a run's
machine.json, so that the report describes the machine the run had, not the one it is
read on.

  machine-info.py FILE [--c2c BIN] [--keep-from OLD]
      FILE         DIR/machine.json as run_all.sh wrote it (the sweep's cores); rewritten
                   atomically with the probed fields added
      --c2c        bench/c2c (default: the repository's)
      --keep-from  a resumed run's previous machine.json: when it has the probed fields,
                   they are kept (the machine and date of the run's start), not probed again
Exit 0; 2 (one line) when FILE cannot be read or written. Every probe has a timeout.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reporting.machine import FIELDS, collect, have_probed  # noqa: E402

PROG = "machine-info.py"


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description="add the probed machine to DIR/machine.json")
    ap.add_argument("file")
    ap.add_argument("--c2c", default=None)
    ap.add_argument("--keep-from", default=None)
    a = ap.parse_args(argv)
    try:
        with open(a.file) as f:
            text = f.read()
        m = json.loads(text)
        if not isinstance(m, dict) or not text.rstrip().endswith("}"):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        print(f"{PROG}: {a.file}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return 2
    old = {}
    if a.keep_from:
        try:
            with open(a.keep_from) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
    if isinstance(old, dict) and have_probed(old):
        added = {k: old[k] for k in FIELDS if k in old and k not in m}
    else:
        added = {k: v for k, v in collect(a.c2c).items() if k not in m}
    try:
        with open(a.file + ".tmp", "w") as f:
            # run_all.sh's lines as they were (scripts/plot.sh and tests read them with sed), then
            # one probed key a line
            f.write(text.rstrip()[:-1].rstrip() + (",\n" if m else "\n") +
                    ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in added.items()) + "\n}\n")
        os.replace(a.file + ".tmp", a.file)
    except OSError as e:
        print(f"{PROG}: {a.file}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
