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
from reporting.machine import collect, have_probed  # noqa: E402

PROG = "machine-info.py"


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description="add the probed machine to DIR/machine.json")
    ap.add_argument("file")
    ap.add_argument("--c2c", default=None)
    ap.add_argument("--keep-from", default=None)
    a = ap.parse_args(argv)
    try:
        with open(a.file) as f:
            m = json.load(f)
        if not isinstance(m, dict):
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
        m.update({k: v for k, v in old.items() if k not in m})
    else:
        m.update(collect(a.c2c))
    try:
        with open(a.file + ".tmp", "w") as f:
            json.dump(m, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(a.file + ".tmp", a.file)
    except OSError as e:
        print(f"{PROG}: {a.file}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
