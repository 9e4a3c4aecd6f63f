#!/usr/bin/env python3
"""
scripts/summarize.py — tables (and plot data) from partrain result CSVs.

Reads the CSVs that every trainer appends to (schema: RESULTS_HEADER in
common/results.h) strictly by column NAME, never by position (scripts/partrain.py), so
columns may be added to the schema without breaking it. Python 3 standard library only.

  summarize.py table CSV... [--where COL=VAL]... [--since ISO] [--by COLS]
                            [--show COLS] [--baseline COL=VAL] [--target R] [--stretch R]
      Groups the rows by --by (default program,variant), prints per group the
      number of runs ("3*": the median includes runs that scripts/lib.sh marked
      disturbed, counted in a line under the table) and the median of each --show
      column over those runs (the default shows epoch_seconds_median, gflops,
      samples_per_second, test_accuracy). With --baseline (e.g. program=pytorch) a column
      "ratio" = group median of the first --show column / the baseline group's,
      and with --target/--stretch a verdict line per non-baseline group.

  summarize.py bench CSV... [--since ISO] [...]
      The serial-vs-torch table: `table` with --baseline program=pytorch
      --target 0.7 --stretch 0.6 as defaults.

  summarize.py curves CSV --outdir DIR [--prefix P] [--where COL=VAL]...
      For plots: the latest row (by timestamp, then file order) of each
      configuration — (dataset, program, variant, ranks, threads, image_size,
      train_n, hidden, activation, batch, lr, lr_schedule) — goes to DIR/P-NN.dat (P: curves)
      with whitespace columns "epoch train_loss test_acc epoch_seconds", and
      DIR/P-index.dat lists "file<TAB>title" per curve (old DIR/P-*.dat are removed). Titles name the dataset,
      program and variant, plus whichever configuration fields differ between the
      plotted curves. Prints the number of curves written.

--where COL=VAL keeps rows whose COL equals VAL (repeatable; COL!=VAL excludes);
--since ISO keeps rows whose timestamp (ISO 8601 UTC) is >= ISO.
Exit status: 0, 1 when no rows match, 2 on a usage or file error.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402

PROG = "summarize.py"
CONFIG_KEY = ("dataset", "program", "variant", "ranks", "threads", "image_size",
              "train_n", "hidden", "activation", "batch", "lr", "lr_schedule")
DEFAULT_SHOW = "epoch_seconds_median,gflops,samples_per_second,test_accuracy"
HEADINGS = {
    "epoch_seconds_median": "epoch s (median)",
    "total_seconds": "total s",
    "samples_per_second": "samples/s",
    "gflops": "GFLOP/s",
    "test_accuracy": "test acc %",
    "final_train_loss": "final loss",
    "comm_seconds": "comm s",
    "sync_seconds": "sync s",
    "epochs_to_target": "epochs to target",
    "seconds_to_target": "s to target",
}


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def read_rows(paths, need=()):
    """All rows of the CSV files as dicts (column name -> text), with '_file'/'_line'."""
    rows = []
    for path in paths:
        try:
            rows += partrain.read_csv(path, need)
        except partrain.CSVError as e:
            die(str(e))
    return rows


def parse_where(items):
    out = []
    for w in items or []:
        neg = "!=" in w
        col, sep, val = w.partition("!=" if neg else "=")
        if not sep or not col:
            die(f"--where {w!r}: expected COL=VAL or COL!=VAL")
        out.append((col, val, neg))
    return out


def select(rows, where, since):
    kept = []
    for r in rows:
        ok = True
        for col, val, neg in where:
            if col not in r:
                die(f"--where: no column {col!r} in {r['_file']}")
            if (r[col] == val) == neg:
                ok = False
                break
        if ok and since and (r.get("timestamp") or "") < since:
            ok = False
        if ok:
            kept.append(r)
    return kept


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    return f"{v:.3f}"


def print_table(header, body, n_left):
    """Aligned text table; the first n_left columns (names) left-aligned, the rest right."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    def line(cells):
        return "  ".join(str(c).ljust(w) if i < n_left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for b in body:
        print(line(b))


def cmd_table(args):
    by = [c for c in args.by.split(",") if c]
    show = [c for c in args.show.split(",") if c]
    rows = select(read_rows(args.csv, need=by + show), parse_where(args.where), args.since)
    if not rows:
        print(f"{PROG}: no matching rows in {', '.join(args.csv)}", file=sys.stderr)
        return 1
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in by), []).append(r)

    def med(rs, col):
        return partrain.col_median(rs, col)

    base_key, base_val = None, None
    if args.baseline:
        bcol, _, bval = args.baseline.partition("=")
        if bcol not in by:
            die(f"--baseline {args.baseline}: {bcol!r} must be one of the --by columns")
        base = [k for k in groups if k[by.index(bcol)] == bval]
        if len(base) == 1:
            base_key = base[0]
            base_val = med(groups[base_key], show[0])
        elif base:
            print(f"{PROG}: note: {len(base)} groups match --baseline {args.baseline}; no ratio", file=sys.stderr)
        else:
            print(f"{PROG}: note: no rows for the baseline {args.baseline}; no ratio", file=sys.stderr)

    header = by + ["runs"] + [HEADINGS.get(c, c) for c in show]
    if base_val:
        header.append(f"ratio vs {args.baseline.partition('=')[2]}")
    body, verdicts = [], []
    for key in sorted(groups, key=lambda k: (k == base_key, k)):
        rs = groups[key]
        vals = [med(rs, c) for c in show]
        line = list(key) + [partrain.runs_cell(rs)] + [fmt(v) for v in vals]
        if base_val:
            ratio = vals[0] / base_val if vals[0] is not None else None
            line.append(f"{ratio:.3f}" if ratio is not None else "-")
            if key != base_key and ratio is not None and (args.target or args.stretch):
                verdicts.append((key, ratio))
        body.append(line)
    print_table(header, body, len(by))
    note = partrain.disturbed_note(rows)
    if note:
        print(note)
    for key, ratio in verdicts:
        name = " ".join(key)
        parts = []
        if args.target:
            parts.append(f"target <= {args.target:g}: {'met' if ratio <= args.target else 'NOT met'}")
        if args.stretch:
            parts.append(f"stretch <= {args.stretch:g}: {'met' if ratio <= args.stretch else 'not met'}")
        print(f"{name} / {args.baseline.partition('=')[2]} {HEADINGS.get(show[0], show[0])}: "
              f"{ratio:.3f}  ({'; '.join(parts)})")
    return 0


def cmd_curves(args):
    need = list(CONFIG_KEY) + ["train_loss_curve", "test_acc_curve", "epoch_seconds", "timestamp"]
    rows = select(read_rows([args.csv], need=need), parse_where(args.where), None)
    latest = {}
    for r in rows:   # later rows win ties: file order is append order
        k = tuple(r[c] for c in CONFIG_KEY)
        if k not in latest or r["timestamp"] >= latest[k]["timestamp"]:
            latest[k] = r
    os.makedirs(args.outdir, exist_ok=True)
    for old in os.listdir(args.outdir):
        if old.startswith(args.prefix + "-") and old.endswith(".dat"):
            os.remove(os.path.join(args.outdir, old))
    chosen = sorted(latest.values(), key=lambda r: tuple(r[c] for c in CONFIG_KEY))
    # which configuration fields (besides dataset/program/variant) tell the curves apart
    varying = [c for c in CONFIG_KEY[3:] if len({r[c] for r in chosen}) > 1]
    short = {"ranks": "ranks", "threads": "threads", "image_size": "px", "train_n": "train",
             "hidden": "hidden", "activation": "", "batch": "batch", "lr": "lr"}
    index = []
    for i, r in enumerate(chosen, start=1):
        loss = r["train_loss_curve"].split(";") if r["train_loss_curve"] else []
        acc = r["test_acc_curve"].split(";") if r["test_acc_curve"] else []
        sec = r["epoch_seconds"].split(";") if r["epoch_seconds"] else []
        if not loss or len(loss) != len(acc):
            print(f"{PROG}: {r['_file']}:{r['_line']}: curve lengths differ; skipped", file=sys.stderr)
            continue
        path = os.path.join(args.outdir, f"{args.prefix}-{i:02d}.dat")
        with open(path, "w") as f:
            f.write(f"# {r['dataset']} {r['program']} {r['variant']} run_id {r.get('run_id', '')} "
                    f"({r['_file']} line {r['_line']})\n# epoch train_loss test_acc epoch_seconds\n")
            for e, (l, a) in enumerate(zip(loss, acc), start=1):
                f.write(f"{e} {l} {a} {sec[e - 1] if e - 1 < len(sec) else 'NaN'}\n")
        extra = ", ".join(f"{short[c]} {r[c]}".strip() for c in varying)
        title = f"{r['dataset']}: {r['program']} {r['variant']}" + (f" ({extra})" if extra else "")
        index.append(f"{path}\t{title}")
    with open(os.path.join(args.outdir, f"{args.prefix}-index.dat"), "w") as f:
        f.write("".join(line + "\n" for line in index))
    print(len(index))
    return 0 if index else 1


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0].split("—")[1].strip(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp, many=True):
        sp.add_argument("csv", nargs="+" if many else None, metavar="CSV")
        sp.add_argument("--where", action="append", metavar="COL=VAL", help="keep rows with COL == VAL (or COL!=VAL)")

    for name in ("table", "bench"):
        sp = sub.add_parser(name, help="grouped medians" if name == "table" else "serial-vs-torch table")
        common(sp)
        sp.add_argument("--since", metavar="ISO", help="only rows with timestamp >= ISO (UTC, 2025-01-31T12:00:00Z)")
        sp.add_argument("--by", default="program,variant", metavar="COLS")
        sp.add_argument("--show", default=DEFAULT_SHOW, metavar="COLS")
        sp.add_argument("--baseline", default="program=pytorch" if name == "bench" else None, metavar="COL=VAL")
        sp.add_argument("--target", type=float, default=0.7 if name == "bench" else None, metavar="R")
        sp.add_argument("--stretch", type=float, default=0.6 if name == "bench" else None, metavar="R")
    sp = sub.add_parser("curves", help="per-configuration curve .dat files for gnuplot")
    common(sp, many=False)
    sp.add_argument("--outdir", required=True, metavar="DIR")
    sp.add_argument("--prefix", default="curves", metavar="P", help="file names P-NN.dat, P-index.dat")

    args = p.parse_args(argv)
    return cmd_curves(args) if args.cmd == "curves" else cmd_table(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
