"""
scripts/partrain.py — what every partrain script needs to know about the suite, in one
place: the result CSVs (one schema: RESULTS_HEADER in common/results.h, plus the two
columns other_load_cores,disturbed that the benchmarks add), medians, which runs other
load disturbed, the variant names of each trainer (from the program's own
`--list-variants`), run_all.sh's step ids (from `./run_all.sh --list-steps`) and the
Python interpreter the benchmarks use.

Imported by scripts/report.py (and scripts/reporting/), summarize.py, openmp_sweep.py,
mpi_scaling.py, imagesize.py, cnn_tables.py and bench_tables.py (the bench/*.sh tables).
Python 3 standard library only.

  python3 scripts/partrain.py variants PROGRAM      print PROGRAM's variant names, one a line
  python3 scripts/partrain.py steps                 print run_all.sh's step ids, one a line
"""

import csv
import io
import functools
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# the CSV column "program" -> the binaries that print its variants (the first one built
# answers; the CUDA emulation build lists every kernel but cuBLAS)
BINARIES = {
    "serial": ("serial/serial",),
    "openmp": ("openmp/openmp",),
    "mpi": ("mpi/mpi",),
    "pipeline": ("mpi/pipeline",),
    "hybrid": ("hybrid/hybrid",),
    "cnn": ("cnn/cnn",),
    "cuda": ("cuda/cuda", "cuda/cuda-emu"),
}


class NotBuilt(RuntimeError):
    """a program whose variants were asked for is not built (or cannot list them)"""


# ---------------------------------------------------------------- numbers


def num(text):
    """a CSV cell as a float; None when empty, not a number or NaN"""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


def median(values):
    """median of the values that are not None; None when there are none"""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def col_median(rows, col):
    """median of a numeric column over rows (cells that are not numbers are left out)"""
    return median(num(r.get(col)) for r in rows)


# ---------------------------------------------------------------- CSVs


def results_header():
    """the column names of RESULTS_HEADER in common/results.h"""
    with open(os.path.join(REPO, "common", "results.h")) as f:
        text = f.read()
    m = re.search(r"#define RESULTS_HEADER((?:\s*\\?\s*\"[^\"]*\")+)", text)
    return "".join(re.findall(r"\"([^\"]*)\"", m.group(1))).split(",")


# a row's per-epoch curves grow with --epochs (a 100,000-epoch run writes a 3.9 MB row):
# no field limit below what the trainers can write
csv.field_size_limit(2**31 - 1)


class CSVError(Exception):
    """a result CSV that cannot be read or lacks a needed column"""


def read_csv(path, need=(), errors=None):
    """the rows of a result CSV as dicts (column name -> text), each with '_file' (path)
    and '_line' (line number); columns in NEED must be in the header (CSVError if not).
    A file with no header gives []. A row with fewer or more fields than the header (a
    torn row, a stray '"' that swallowed the lines after it), bytes that are not UTF-8
    (unless ERRORS says how to decode them) or a line the csv module refuses: CSVError
    naming the file and the line."""
    line = 1
    try:
        with open(path, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8", errors or "strict")
        except UnicodeDecodeError as e:
            bad_line = data.count(b"\n", 0, e.start) + 1
            raise CSVError(f"{path}: line {bad_line}: bytes that are not UTF-8 ({data[e.start:e.start + 4]!r})") from e
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if not reader.fieldnames:
            return []
        missing = [c for c in need if c not in reader.fieldnames]
        if missing:
            raise CSVError(f"{path}: no column(s) {', '.join(missing)} in the header")
        rows = []
        line = reader.line_num + 1
        for row in reader:
            if None in row or None in row.values():
                n = len(row) - (None in row) + len(row.get(None) or ()) - sum(v is None for v in row.values())
                raise CSVError(f"{path}: line {line}: {n} fields, the header has {len(reader.fieldnames)}"
                               " (a torn row, or a stray '\"')")
            row["_file"], row["_line"] = path, line
            rows.append(row)
            line = reader.line_num + 1
        return rows
    except OSError as e:
        raise CSVError(f"{path}: {e.strerror}") from e
    except csv.Error as e:
        raise CSVError(f"{path}: line {line}: {e}") from e


def select(rows, **eq):
    """rows whose columns equal the given values (compared as text; a list, tuple or set
    of values: any of them)"""
    out = []
    for r in rows or []:
        ok = True
        for k, v in eq.items():
            cell = (r.get(k) or "").strip()
            if isinstance(v, (list, tuple, set)):
                ok = cell in {str(i) for i in v}
            else:
                ok = cell == str(v)
            if not ok:
                break
        if ok:
            out.append(r)
    return out


def newest(rows):
    """the newest row: latest timestamp, later in the file on a tie"""
    return max(enumerate(rows), key=lambda ir: (ir[1].get("timestamp", ""), ir[0]))[1]


def latest_config(rows, keys=("dataset", "train_n", "hidden", "epochs", "image_size")):
    """the rows of the configuration of the newest row (a CSV appended to by several runs)"""
    if not rows:
        return rows
    last = newest(rows)
    return [r for r in rows if all(r.get(k) == last.get(k) for k in keys)]


# ---------------------------------------------------------------- disturbed runs
# scripts/lib.sh's bench_run adds two columns after the schema to every row a benchmark
# writes: other_load_cores (the other processes' load during the run, in cores) and
# disturbed ("1" when that exceeded the benchmark's --max-other, default 0.05 cores; "0"
# when not). Rows without them (older CSVs, run_all.sh's own runs) count as not disturbed.
BENCH_COLS = ("other_load_cores", "disturbed")
DISTURBED_MARK = "*"


def disturbed(row):
    """whether a row was measured while other processes loaded the machine"""
    return (row.get("disturbed") or "").strip() == "1"


def n_disturbed(rows):
    return sum(1 for r in rows or [] if disturbed(r))


def runs_cell(rows):
    """a text table's runs count: "3", or "3*" when the median includes disturbed rows"""
    return f"{len(rows)}{DISTURBED_MARK if n_disturbed(rows) else ''}"


def runs_md(rows):
    """a markdown table's runs count: "3", or "3 (1 disturbed)" """
    k = n_disturbed(rows)
    return f"{len(rows)} ({k} disturbed)" if k else str(len(rows))


def disturbed_note(rows):
    """the line under a text table whose rows are ROWS (None when none was disturbed)"""
    k = n_disturbed(rows)
    if not k:
        return None
    return (f"{DISTURBED_MARK} the median includes disturbed runs: {k} of the {len(rows)} runs in this table had "
            f"other processes' load above --max-other cores during them (CSV columns other_load_cores, disturbed)")


def disturbed_count(rows):
    """' (K of N runs disturbed)' for a title, '' when none was"""
    k = n_disturbed(rows)
    return f" ({k} of {len(rows)} runs disturbed)" if k else ""


# ---------------------------------------------------------------- variants


@functools.lru_cache(maxsize=None)
def list_variants(binary):
    """[(name, flags, description)] from `BINARY --list-variants` (BINARY relative to the
    repository root); NotBuilt when it is not built or does not answer"""
    path = os.path.join(REPO, binary)
    if not os.access(path, os.X_OK):
        raise NotBuilt(f"{binary} is not built (make all): its variants come from `{binary} --list-variants`")
    try:
        p = subprocess.run([path, "--list-variants"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise NotBuilt(f"{binary} --list-variants: {e}") from e
    out = []
    for line in p.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0]:
            out.append(tuple(parts))
    if p.returncode != 0 or not out:
        last = (p.stdout.strip().splitlines() or ["no output"])[-1]
        raise NotBuilt(f"{binary} --list-variants failed (exit {p.returncode}: {last}); rebuild it (make all)")
    return out


def variants(program):
    """[(name, flags, description)] of a CSV program name (serial, openmp, mpi, ...), from
    the first of its binaries that is built; NotBuilt when none is"""
    errors = []
    for b in BINARIES.get(program, (program,)):
        try:
            return list_variants(b)
        except NotBuilt as e:
            errors.append(str(e))
    raise NotBuilt("; ".join(errors) or f"no binary known for {program}")


def variant_names(program):
    """the variant names of a program, in its own order (NotBuilt when not built)"""
    return [v[0] for v in variants(program)]


_warned = set()


def warn_once(prog, msg):
    if msg not in _warned:
        _warned.add(msg)
        print(f"{prog}: note: {msg}", file=sys.stderr)


def ordered_variants(program, seen, prog="partrain"):
    """the variant names in SEEN (an iterable of names found in the data) in the program's
    own order, names it does not list after them, sorted; when the program is not built,
    SEEN sorted, with a note on stderr"""
    seen = set(seen)
    try:
        known = variant_names(program)
    except NotBuilt as e:
        warn_once(prog, f"{e}; variants in the order of their names")
        known = []
    return [v for v in known if v in seen] + sorted(seen - set(known))


def variant_flags(program, name):
    """the command-line flags that select a variant (e.g. '--accum loop'); None when the
    program is not built or does not list the name"""
    try:
        return next((f for n, f, _ in variants(program) if n == name), None)
    except NotBuilt:
        return None


# ---------------------------------------------------------------- run_all.sh, Python


@functools.lru_cache(maxsize=None)
# ---------------------------------------------------------------- the machine a run assumed
# run_all.sh writes DIR/machine.json: the cores C its sweeps were derived from (--cores,
# PARTRAIN_CORES, Slurm or nproc), the nodes, the rank slots, the real nproc and the lists.
# The report's and the figures' words take the core count from it, never from a literal.
def sweep_machine(results):
    """{"cores", "nodes", "slots", "cores_from", ...} of the run in RESULTS (a directory);
    without a readable machine.json: this machine's cores (as nproc), 1 node"""
    import json
    try:
        here = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        here = os.cpu_count() or 1
    m = {"cores": here, "nodes": 1, "slots": here, "cores_from": "nproc", "real_cores": here}
    try:
        with open(os.path.join(results, "machine.json")) as f:
            got = json.load(f)
        for k in ("cores", "nodes", "slots", "real_cores"):
            if isinstance(got.get(k), int) and got[k] > 0:
                m[k] = got[k]
        m["cores_from"] = str(got.get("cores_from", "machine.json"))
        if "slots" not in got:
            m["slots"] = m["cores"]
    except (OSError, ValueError, AttributeError):
        pass
    return m


def run_all_steps():
    """run_all.sh's step ids, in order (`./run_all.sh --list-steps`: every step of every
    group, whatever this machine has)"""
    p = subprocess.run([os.path.join(REPO, "run_all.sh"), "--list-steps"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"run_all.sh --list-steps failed (exit {p.returncode}): {p.stderr.strip()}")
    return [line.strip() for line in p.stdout.splitlines() if line.strip()]


@functools.lru_cache(maxsize=None)
def python_interpreter():
    """the interpreter the benchmarks run PyTorch with: $PARTRAIN_PYTHON, else the default
    of scripts/lib.sh (the one place it is chosen)"""
    if os.environ.get("PARTRAIN_PYTHON"):
        return os.environ["PARTRAIN_PYTHON"]
    try:
        p = subprocess.run(["bash", "-c", '. scripts/lib.sh && printf %s "$PARTRAIN_PYTHON"'], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10)
        if p.returncode == 0 and p.stdout:
            return p.stdout
    except (OSError, subprocess.SubprocessError):
        pass
    return sys.executable


def main(argv):
    if len(argv) == 2 and argv[0] == "variants":
        try:
            print("\n".join(variant_names(argv[1])))
        except NotBuilt as e:
            print(f"partrain.py: {e}", file=sys.stderr)
            return 1
        return 0
    if argv == ["steps"]:
        print("\n".join(run_all_steps()))
        return 0
    print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
