"""
scripts/reporting/common.py — what every section of REPORT.md uses: number formatting,
the spread of repeated runs (spread, speedup: one rule for every cell), markdown tables of
at most MAX_COLUMNS columns (the rest in a CSV beside the report, linked), one
configuration's runs (Agg; runs: its runs cell, with the count of disturbed runs), the
inputs of a results directory (Inputs: CSVs by column name, bench rounds, skipped.txt's
reasons, figures) and the document (Doc).
"""

import csv
import glob
import os
import re
import sys

import partrain

PROG = "report.py"
# from scripts/partrain.py, for the sections too
num, med, select, latest_config = partrain.num, partrain.median, partrain.select, partrain.latest_config

# run_all.sh step ids (its add_step names; skipped.txt's first column) that produce each
# input, and the trainer (run_all.sh group) they belong to: a missing input is explained by
# the skipped.txt line of one of these steps. Every id is checked against
# `./run_all.sh --list-steps` (check_steps).
STEPS = {
    "runs.csv": (["serial-curves"], "serial"),
    "bench-serial.csv": (["serial-vs-torch"], "serial"),
    "bench-openmp.csv": (["openmp-bench"], "openmp"),
    "openmp.csv": (["openmp-sweep"], "openmp"),
    "bench-mpi.csv": (["mpi-bench"], "mpi"),
    "mpi-strong.csv": (["mpi-sweep"], "mpi"),
    "mpi-weak.csv": (["mpi-sweep"], "mpi"),
    "mpi-pipeline.csv": (["mpi-sweep"], "mpi"),
    "bench-hybrid.csv": (["hybrid-bench"], "hybrid"),
    "hybrid-grid.csv": (["hybrid-grid"], "hybrid"),
    "hybrid-table4.md": (["hybrid-grid"], "hybrid"),
    "cnn-accuracy.csv": (["cnn-accuracy"], "cnn"),
    "cnn-timing.csv": (["cnn-timing"], "cnn"),
    "cnn-table3.md": (["cnn-tables"], "cnn"),
    "cnn-table4.md": (["cnn-tables"], "cnn"),
    "cnn-table5.md": (["cnn-tables"], "cnn"),
    "bench-cnn.csv": (["cnn-bench"], "cnn"),
    "imagesize.csv": (["imagesize"], None),
    "comm.csv": (["model"], "model"),
    "model-runs.csv": (["model"], "model"),
    "curves.png": (["plots"], None),
    "mpi-scaling.png": (["plots", "mpi-sweep"], "mpi"),
    "mpi-comm.png": (["plots", "mpi-sweep"], "mpi"),
    "openmp-threads.png": (["plots", "openmp-sweep"], "openmp"),
    "hybrid-grid.png": (["plots", "hybrid-grid"], "hybrid"),
    "cnn-speedup.png": (["plots", "cnn-tables"], "cnn"),
    "imagesize.png": (["imagesize", "plots"], None),
    "model.png": (["plots", "model"], "model"),
    "trace-summary.csv": (["timelines"], "trace"),
    **{f"timeline-{n}.png": (["plots", "timelines"], "trace") for n in (
        "serial", "openmp-critical", "openmp-reduction", "mpi-allreduce", "mpi-reduce-bcast", "mpi-overlap",
        "pipeline", "hybrid")},
    "cuda": (["cuda"], "cuda"),
    "tta.csv": (["tta"], "tta"),
    "tta.png": (["plots", "tta"], "tta"),
    "cuda.csv": (["cuda"], "cuda"),
}
HYPERFINE = ("serial", "openmp", "mpi", "hybrid", "cnn", "cuda")   # hyperfine-NAME.json, step hyperfine-NAME


def check_steps():
    """the step ids above that `./run_all.sh --list-steps` does not list (a note on stderr
    for each, or one when run_all.sh cannot be asked)"""
    try:
        known = set(partrain.run_all_steps())
    except (OSError, RuntimeError, ValueError) as e:
        print(f"{PROG}: note: cannot check the step ids against run_all.sh --list-steps: {e}", file=sys.stderr)
        return []
    ids = {st for hints, _ in STEPS.values() for st in hints} | {f"hyperfine-{t}" for t in HYPERFINE}
    bad = sorted(ids - known)
    for st in bad:
        print(f"{PROG}: error: step id '{st}' is not registered by run_all.sh (./run_all.sh --list-steps)",
              file=sys.stderr)
    return bad


# ---------------------------------------------------------------- formatting


def s(v):
    """seconds with the unit"""
    if v is None:
        return "–"
    a = abs(v)
    if a >= 100:
        return f"{v:.1f} s"
    if a >= 1:
        return f"{v:.2f} s"
    if a >= 0.01 or a == 0:
        return f"{v:.3f} s"
    return f"{v:.2g} s"


def g(v):
    """a published number of seconds as the report printed it (2.56 s, 0.37 s, 163.60 s)"""
    return f"{v:.2f} s"


def x(v):
    """a ratio (speedup, times as long) with the unit"""
    return "–" if v is None else f"{v:.2f}×"


def pct(v, digits=0):
    return "–" if v is None else f"{v:.{digits}f}%"


def pol(p):
    return p if p else "unset"


# ---------------------------------------------------------------- spread over runs
# One rule for every cell that summarises repeated runs (timings.py says it once in the
# report): fewer than MLPERF_RUNS runs, the median with the min–max of all runs; at least
# MLPERF_RUNS, MLPerf's rule: drop the fastest and the slowest run, the mean of the rest,
# with the range of the runs kept.

MLPERF_RUNS = 5


def kept(values):
    """the runs a cell summarises, sorted: all of them, or without the fastest and the
    slowest when there are at least MLPERF_RUNS"""
    vals = sorted(v for v in values if v is not None)
    return vals[1:-1] if len(vals) >= MLPERF_RUNS else vals


def center(values):
    """the central value of repeated runs by the rule above (None when there are none)"""
    vals = [v for v in values if v is not None]
    k = kept(vals)
    if not k:
        return None
    return sum(k) / len(k) if len(vals) >= MLPERF_RUNS else med(k)


UNIT_SUFFIXES = (" s", "×", "%")


def _bare(cell):
    """a formatted number without its unit, for the low end of a range"""
    for u in UNIT_SUFFIXES:
        if cell.endswith(u):
            return cell[:-len(u)]
    return cell


def spread(values, unit=None, mid=None):
    """a cell: the central value by the rule above and, when the runs differ, the range
    of the runs kept: "0.432 s (0.410–0.450 s)"; UNIT formats one number (default
    seconds); MID replaces the central value (a speedup: the ratio of two centres)"""
    unit = unit or s
    k = kept(values)
    c = center(values) if mid is None else mid
    if c is None:
        return "–"
    if len(k) < 2 or unit(k[0]) == unit(k[-1]):
        return unit(c)
    return f"{unit(c)} ({_bare(unit(k[0]))}–{unit(k[-1])})"


def speedup(base, a):
    """a speedup cell, BASE's epoch over A's: the ratio of their central values, and the
    range of the per-round ratios where both were measured in the same bench rounds
    (Inputs marks the rounds of bench-*.csv: every serial row of a batch starts one)"""
    if not base or not a:
        return x(None)
    return spread(round_ratios(base, a), x, mid=ratio(base.epoch, a.epoch))


def round_ratios(base, a):
    """BASE's epoch / A's within each bench round both have ([] when they share none)"""
    def by_round(agg_):
        out = {}
        for r in agg_.rows:
            if r.get("_round") is not None and num(r.get("epoch_seconds_median")):
                out.setdefault((r.get("_file"), r.get("batch"), r["_round"]), []).append(
                    num(r["epoch_seconds_median"]))
        return out
    b, t = by_round(base), by_round(a)
    return [med(b[k]) / med(t[k]) for k in sorted(b.keys() & t.keys(), key=str)]


# ---------------------------------------------------------------- tables

MAX_COLUMNS = 7   # a table wider than this shows MAX_COLUMNS chosen ones; all go to a CSV


def table(header, rows):
    """markdown table; cells are strings; columns after the first two right-aligned"""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return out


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def dname(d):
    return {"fashion": "Fashion-MNIST", "mnist": "MNIST digits"}.get(d, d or "?")


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def by_number(values):
    """CSV cells sorted as integers"""
    return sorted(values, key=lambda v: int(num(v) or 0))


# ---------------------------------------------------------------- one configuration's runs


class Agg:
    """the rows of one configuration: medians over its repeated runs"""

    def __init__(self, rows, src):
        self.rows, self.src, self.n = rows, src, len(rows)
        self.disturbed = partrain.n_disturbed(rows)   # runs scripts/lib.sh marked disturbed
        for attr, col in (("epoch", "epoch_seconds_median"), ("total", "total_seconds"), ("comm", "comm_seconds"),
                          ("sync", "sync_seconds"), ("gflops", "gflops"), ("acc", "test_accuracy"),
                          ("loss", "final_train_loss")):
            setattr(self, attr, center(self.values(col)))
        self.policy = ",".join(sorted({pol(r.get("omp_wait_policy", "")) for r in rows}))
        r0 = rows[0]
        self.program, self.variant = r0.get("program", ""), r0.get("variant", "")
        self.ranks, self.threads = int(num(r0.get("ranks")) or 1), int(num(r0.get("threads")) or 1)
        self.batch, self.train_n = r0.get("batch", ""), r0.get("train_n", "")
        self.epochs, self.image = r0.get("epochs", ""), r0.get("image_size", "")
        self.dataset = r0.get("dataset", "")

    def values(self, col):
        """the runs' numbers in column COL"""
        return [num(r.get(col)) for r in self.rows]

    def cell(self, col="epoch_seconds_median", unit=None):
        """COL over the runs as a spread cell (central value and range)"""
        return spread(self.values(col), unit)

    @property
    def comm_share(self):
        return 100.0 * self.comm / self.epoch if self.comm is not None and self.epoch else None

    def cfg(self):
        return f"{self.ranks}×{self.threads}"


def runs(*aggs, sep="/"):
    """a runs cell: the run counts of AGGS joined by SEP ("3", "3/3"), followed by
    "(K disturbed)" when other load disturbed K of those runs (scripts/lib.sh's column)"""
    aggs = [a for a in aggs if a]
    k = sum(a.disturbed for a in aggs)
    cell = sep.join(str(a.n) for a in aggs) or "0"
    return f"{cell} ({k} disturbed)" if k else cell


def agg(rows, src="", **eq):
    sel = select(rows, **eq)
    return Agg(sel, src) if sel else None


def best(aggs):
    aggs = [a for a in aggs if a is not None and a.epoch is not None]
    return min(aggs, key=lambda a: a.epoch) if aggs else None


def flags(program, variant):
    """the command-line flags of a variant (`--accum loop`), from the program's
    --list-variants; the bare name when the program is not built"""
    return partrain.variant_flags(program, variant) or variant


def label(a):
    """how a configuration reads in a table"""
    if a.program == "openmp":
        return f"openmp {flags('openmp', a.variant)}, T = {a.threads}"
    if a.program == "mpi":
        return f"mpi {flags('mpi', a.variant)}, P = {a.ranks}"
    if a.program in ("hybrid", "cnn"):
        return f"{a.program} {a.cfg()} (ranks × threads)"
    if a.program == "pytorch":
        return f"PyTorch {a.variant.replace('torch-', '')}, {plural(a.threads, 'thread')}"
    if a.program == "serial":
        return f"serial {flags('serial', a.variant)}"
    return f"{a.program} {a.variant} {a.cfg()}"


def variants_of(rows, program):
    """the variants of PROGRAM present in rows, in the program's own order (its
    --list-variants), others after them"""
    seen = {r.get("variant", "") for r in rows or [] if r.get("program") == program}
    return partrain.ordered_variants(program, seen, PROG)


def modes_of(rows):
    """openmp's --accum modes present in rows"""
    return variants_of(rows, "openmp")


def syncs_of(rows):
    """mpi's --sync variants present in rows"""
    return variants_of(rows, "mpi")


def serial_of(rows, batch=None):
    """serial/serial's runs: those of its default variant (the first it lists) when there
    are any, else all of them"""
    eq = {"program": "serial"}
    if batch is not None:
        eq["batch"] = batch
    try:
        default = partrain.variant_names("serial")[0]
    except partrain.NotBuilt as e:
        partrain.warn_once(PROG, f"{e}; every serial run counts as the baseline")
        default = None
    return (agg(rows, variant=default, **eq) if default else None) or agg(rows, **eq)


# ---------------------------------------------------------------- the inputs


def split_md_row(line):
    """the cells of one markdown table row ('\\|' inside a cell is a '|' of the cell)"""
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip().replace("\\|", "|") for c in cells[1:-1]]


def read_skipped(path):
    """skipped.txt's (step, reason) lines"""
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.strip():
                    step, _, reason = line.partition("\t")
                    out.append((step.strip(), reason.strip()))
    except OSError:
        pass
    return out


def norm(t):
    return re.sub(r"[^a-z0-9]+", "_", t.lower()).strip("_")


def mark_rounds(rows):
    """'_round' of each row of a bench CSV: rows are appended in run order and every
    serial row of a batch starts a round (scripts/lib.sh's bench loop runs serial, then
    each configuration, once per round), so serial and a configuration with the same
    (batch, round) ran back to back"""
    current = {}
    for r in rows:
        b = r.get("batch")
        if r.get("program") == "serial":
            current[b] = current.get(b, -1) + 1
        r["_round"] = current.get(b)


class Inputs:
    """one results directory: its CSVs (by name), skipped.txt, tables and figures"""

    def __init__(self, results, plots, out):
        self.dir, self.plots, self.out = results, plots, out
        # the cores (and nodes, rank slots) the run's sweeps assumed: DIR/machine.json,
        # written by run_all.sh; this machine's cores when it is missing
        self.machine = partrain.sweep_machine(results)
        self.cores, self.nodes, self.slots = self.machine["cores"], self.machine["nodes"], self.machine["slots"]
        self.missing_seen = []
        self.bad_inputs = 0   # files and rows left out (one line each on stderr): exit 2
        self.tables_written = []   # DIR/report-tables/*.csv this report wrote
        self._csv = {}
        self.skipped_file = os.path.join(results, "skipped.txt")
        self.have_skipped = os.path.isfile(self.skipped_file)
        self.skipped = read_skipped(self.skipped_file) if self.have_skipped else []

    def path(self, name):
        return os.path.join(self.dir, name)

    def rows(self, name):
        """the CSV's rows (list of dicts), [] when it has a header only, None when missing"""
        if name not in self._csv:
            p = self.path(name)
            rows = None
            if os.path.isfile(p):
                try:
                    rows = [r for r in partrain.read_csv(p, errors="replace")
                            if r.get("program") and self.finite_row(p, r)]
                    for r in rows:
                        r["_file"] = name
                    if name.startswith("bench-"):
                        mark_rounds(rows)
                except (partrain.CSVError, csv.Error) as e:
                    print(f"{PROG}: {e}" if str(e).startswith(p) else f"{PROG}: {p}: {e}", file=sys.stderr)
                    self.bad_inputs += 1
            self._csv[name] = rows
        return self._csv[name]

    COUNTS = ("ranks", "threads", "image_size", "train_n", "test_n", "batch", "epochs")

    def finite_row(self, path, r):
        """False (one line on stderr naming the file, line and cell) for a row whose counts
        are not whole numbers or whose figures are not finite: inf, 1e999, nan"""
        for k, v in r.items():
            if not isinstance(k, str) or k.startswith("_") or v in (None, ""):
                continue
            try:
                f = float(v)
            except ValueError:
                if k in self.COUNTS:
                    break
                continue
            if f != f or f in (float("inf"), float("-inf")) or (k in self.COUNTS and (f < 0 or f != int(f))):
                break
        else:
            return True
        print(f"{PROG}: {path}: line {r.get('_line', '?')}: {k}={v} is not a finite "
              f"{'count' if k in self.COUNTS else 'number'}; row left out", file=sys.stderr)
        self.bad_inputs += 1
        return False

    def all_rows(self):
        return [r for p in sorted(glob.glob(os.path.join(self.dir, "*.csv")))
                for r in self.rows(os.path.basename(p)) or []]

    def reasons(self, name):
        """skipped.txt lines explaining why NAME is missing: (step, reason) list"""
        hints, trainer = STEPS.get(name, ([os.path.splitext(name)[0]], None))
        if name.startswith("hyperfine-"):
            t = name[len("hyperfine-"):-len(".json")]
            hints, trainer = [f"hyperfine-{t}"], t
        want = [norm(h) for h in hints]
        found = [(st, rs) for st, rs in self.skipped if norm(st) in want]
        if name.endswith(".png") and found:
            # the plots step has one line per figure not drawn, plus general ones (no gnuplot)
            own = [(st, rs) for st, rs in found if name in rs]
            found = own or [(st, rs) for st, rs in found if norm(st) != "plots" or ".png" not in rs]
        if not found and trainer:
            found = [(st, rs) for st, rs in self.skipped if norm(st) == trainer]
        if not found and trainer:
            found = [(st, rs) for st, rs in self.skipped if norm(st).startswith(trainer + "_")
                     and any(norm(st).startswith(w.split("_")[0]) for w in want)]
        return found, hints[0]

    def missing(self, name, where=None):
        """the one line for a missing input"""
        shown = os.path.join(where, name) if where else self.path(name)
        found, step = self.reasons(name)
        if found:
            why = "; ".join(f"step {st} skipped: {rs or 'no reason given'}" for st, rs in found)
        elif self.have_skipped:
            why = f"step {step} skipped: no reason in {self.skipped_file}"
        else:
            why = f"step {step} skipped: reason unknown, {self.skipped_file} missing"
        self.missing_seen.append(shown)
        return f"not measured in this run: {shown} missing ({why})"

    def figure(self, name, caption):
        """![caption](relative path) when the PNG exists (plots dir, then results dir)"""
        for d in (self.plots, self.dir):
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.path.getsize(p) > 0:
                rel = os.path.relpath(os.path.abspath(p), os.path.dirname(os.path.abspath(self.out)))
                return f"![{caption}]({rel})"
        return self.missing(name, where=self.plots)

    TABLES = "report-tables"   # DIR's subdirectory of table CSVs: DIR/*.csv are result CSVs to every reader

    def write_table(self, name, header, rows):
        """every column of a table as DIR/report-tables/NAME.csv (written whole, then renamed
        into place); the line that links it relative to the report, or says why there is none"""
        fname = f"{name}.csv"
        where = os.path.join(self.dir, self.TABLES)
        path = os.path.join(where, fname)
        if not os.path.isdir(self.dir):   # report.py has said so once; every input is missing
            return f"(all columns: not written, {self.dir} is not a directory)"
        try:
            os.makedirs(where, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", newline="") as f:
                w = csv.writer(f, lineterminator="\n")
                w.writerow(header)
                w.writerows(rows)
            os.replace(tmp, path)
        except OSError as e:
            print(f"{PROG}: {path}: {e.strerror}", file=sys.stderr)
            self.bad_inputs += 1
            return f"(all columns: not written, {path}: {e.strerror})"
        self.tables_written.append(path)
        rel = os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.abspath(self.out)))
        return f"all columns: [{self.TABLES}/{fname}]({rel})"

    def text(self, name):
        try:
            with open(self.path(name), errors="replace") as f:
                return f.read()
        except OSError:
            return None


# ---------------------------------------------------------------- the document


class Doc:
    """the report's lines, and the inputs every section reads"""

    def __init__(self, inp):
        self.i = inp
        self.cores, self.nodes, self.slots = inp.cores, inp.nodes, inp.slots
        self.lines = []

    def add(self, *lines):
        self.lines.extend(lines)

    def para(self, text):
        self.lines += [text, ""]

    def table(self, header, rows, name=None, keep=None):
        """a markdown table of at most MAX_COLUMNS columns. When HEADER is wider (or KEEP is
        given), the columns named in KEEP (else the first MAX_COLUMNS) are shown and every
        column goes to DIR/report-tables/NAME.csv, linked below the table relative to the report"""
        keep = list(keep or header[:MAX_COLUMNS]) if keep or len(header) > MAX_COLUMNS else list(header)
        idx = [header.index(k) for k in keep][:MAX_COLUMNS]
        self.add(*table([header[j] for j in idx], [[r[j] for j in idx] for r in rows]), "")
        if len(idx) < len(header):
            self.para(self.i.write_table(name or "table", header, rows))

    def embed(self, lines, name, drop=()):
        """markdown LINES (a generated table file) into the report; a table in them wider
        than MAX_COLUMNS loses the columns named in DROP (then the last ones) to
        DIR/report-tables/NAME.csv, linked"""
        out, k = [], 0
        while k < len(lines):
            if not (lines[k].startswith("|") and k + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[k + 1])):
                out.append(lines[k])
                k += 1
                continue
            block = [lines[k]]
            j = k + 2
            while j < len(lines) and lines[j].startswith("|"):
                block.append(lines[j])
                j += 1
            header, *body = [split_md_row(ln) for ln in block]
            if len(header) <= MAX_COLUMNS:
                out += lines[k:j]
            else:
                keep = [h for h in header if h not in drop][:MAX_COLUMNS]
                idx = [header.index(h) for h in keep]
                out += table(keep, [[r[i] if i < len(r) else "" for i in idx] for r in body])
                out += ["", self.i.write_table(name, header, body)]
            k = j
        self.add(*out, "")

    def shows(self, sentences):
        sentences = [t for t in sentences if t]
        if sentences:
            self.para("**What this shows:** " + " ".join(sentences))


# the first page's figure (scripts/plot.sh plot_headline, from the sweeps' CSVs)
STEPS["headline.png"] = (["plots"], None)
