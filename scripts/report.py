#!/usr/bin/python3
"""
scripts/report.py — results/REPORT.md assembled from whatever a run left behind.

  report.py [--results DIR] [--plots PLOTDIR] [--out FILE]
      --results DIR    the CSVs, hyperfine JSON, generated tables and skipped.txt of one
                       run_all.sh run (default results)
      --plots PLOTDIR  where that run's PNGs are (default plots; run_all.sh --quick and
                       --smoke keep them in DIR itself)
      --out FILE       the report (default DIR/REPORT.md)

Sections: the run, the machine (probed now, every probe with a timeout), one section per
seed report (/work/shared/seeds 000..004) with its tables and figures regenerated from
our measurements and the report's own published numbers beside ours, MPI scaling,
PyTorch side by side, what was skipped, and which timing is which. Every section with
numbers ends with a "What this shows" paragraph computed from those numbers.

Reads every CSV strictly by column name (schema: RESULTS_HEADER in common/results.h);
an input that is missing gives the line "not measured in this run: FILE missing (step
S skipped: REASON)" with the reason from DIR/skipped.txt (lines "STEP<TAB>reason")
when it has one, and the report goes on. Repeated runs of one configuration are
summarised by their median and counted. Seed report 003's tables are
scripts/cnn_tables.py's (DIR/cnn-table{3,4,5}.md, regenerated into a temporary
directory from the CSVs when only those exist).
Exit status: 0; 2 on a usage error or when FILE cannot be written.
Python 3 standard library only (Debian's /usr/bin/python3).
"""

import argparse
import csv
import datetime
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

PROG = "report.py"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# run_all.sh step ids (its add_step names; skipped.txt's first column) that produce each input, and the trainer they belong
# to: a missing input is explained by the skipped.txt line of one of these steps
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
    "imagesize.csv": (["imagesize", "image_size", "imagesize_sweep"], None),
    "curves.png": (["plots"], None),
    "mpi-scaling.png": (["plots", "mpi-sweep"], "mpi"),
    "mpi-comm.png": (["plots", "mpi-sweep"], "mpi"),
    "openmp-threads.png": (["plots", "openmp-sweep"], "openmp"),
    "hybrid-grid.png": (["plots", "hybrid-grid"], "hybrid"),
    "cnn-speedup.png": (["plots", "cnn-tables"], "cnn"),
    "imagesize.png": (["imagesize", "plots"], None),
    "cuda": (["cuda", "cuda-kernels", "gpu-check"], "cuda"),
    "cuda.csv": (["cuda", "cuda-kernels"], "cuda"),
}
MODES = ("critical", "reduction", "loop", "model")  # openmp --accum, in its order (others: from the data)
SYNCS = ("allreduce", "reduce-bcast", "overlap")    # mpi --sync, in its order

# ---------------------------------------------------------------- formatting


def num(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v else None    # NaN -> None


def med(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


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


def x(v):
    """a ratio (speedup, times as long) with the unit"""
    return "–" if v is None else f"{v:.2f}×"


def pct(v, digits=0):
    return "–" if v is None else f"{v:.{digits}f}%"


def pol(p):
    return p if p else "unset"


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


# ---------------------------------------------------------------- one configuration's runs


class Agg:
    """the rows of one configuration: medians over its repeated runs"""

    def __init__(self, rows, src):
        self.rows, self.src, self.n = rows, src, len(rows)
        self.epoch = med(num(r.get("epoch_seconds_median")) for r in rows)
        self.total = med(num(r.get("total_seconds")) for r in rows)
        self.comm = med(num(r.get("comm_seconds")) for r in rows)
        self.sync = med(num(r.get("sync_seconds")) for r in rows)
        self.gflops = med(num(r.get("gflops")) for r in rows)
        self.acc = med(num(r.get("test_accuracy")) for r in rows)
        self.loss = med(num(r.get("final_train_loss")) for r in rows)
        self.policy = ",".join(sorted({pol(r.get("omp_wait_policy", "")) for r in rows}))
        r0 = rows[0]
        self.program, self.variant = r0.get("program", ""), r0.get("variant", "")
        self.ranks, self.threads = int(num(r0.get("ranks")) or 1), int(num(r0.get("threads")) or 1)
        self.batch, self.train_n = r0.get("batch", ""), r0.get("train_n", "")
        self.epochs, self.image = r0.get("epochs", ""), r0.get("image_size", "")
        self.dataset = r0.get("dataset", "")

    @property
    def comm_share(self):
        return 100.0 * self.comm / self.epoch if self.comm is not None and self.epoch else None

    def cfg(self):
        return f"{self.ranks}×{self.threads}"


def select(rows, **eq):
    """rows whose columns equal the given values (compared as text; ints as ints)"""
    out = []
    for r in rows or []:
        ok = True
        for k, v in eq.items():
            cell = (r.get(k) or "").strip()
            if isinstance(v, (list, tuple, set)):
                if cell not in {str(i) for i in v}:
                    ok = False
            elif cell != str(v):
                ok = False
            if not ok:
                break
        if ok:
            out.append(r)
    return out


def agg(rows, src="", **eq):
    sel = select(rows, **eq)
    return Agg(sel, src) if sel else None


def best(aggs):
    aggs = [a for a in aggs if a is not None and a.epoch is not None]
    return min(aggs, key=lambda a: a.epoch) if aggs else None


def label(a):
    """how a configuration reads in a table"""
    if a.program == "openmp":
        return f"openmp --accum {a.variant}, T = {a.threads}"
    if a.program == "mpi":
        return f"mpi --sync {a.variant}, P = {a.ranks}"
    if a.program in ("hybrid", "cnn"):
        return f"{a.program} {a.cfg()} (ranks × threads)"
    if a.program == "pytorch":
        return f"PyTorch {a.variant.replace('torch-', '')}, {plural(a.threads, 'thread')}"
    if a.program == "serial":
        return f"serial --gemm {'own' if a.variant == 'own-gemm' else a.variant}"
    return f"{a.program} {a.variant} {a.cfg()}"


def latest_config(rows, keys=("dataset", "train_n", "hidden", "epochs", "image_size")):
    """the rows of the configuration of the newest row (a CSV appended to by several runs)"""
    if not rows:
        return rows
    last = max(enumerate(rows), key=lambda ir: (ir[1].get("timestamp", ""), ir[0]))[1]
    return [r for r in rows if all(r.get(k) == last.get(k) for k in keys)]


def modes_of(rows):
    """openmp's --accum modes present in rows, known ones in openmp's order"""
    seen = {r.get("variant", "") for r in rows or [] if r.get("program") == "openmp"}
    return [m for m in MODES if m in seen] + sorted(seen - set(MODES))


def serial_of(rows, batch=None):
    eq = {"program": "serial"}
    if batch is not None:
        eq["batch"] = batch
    return agg(rows, variant="own-gemm", **eq) or agg(rows, **eq)


# ---------------------------------------------------------------- the inputs


class Inputs:
    def __init__(self, results, plots, out):
        self.dir, self.plots, self.out = results, plots, out
        self.cores = os.cpu_count() or 1
        self.missing_seen = []
        self._csv = {}
        self.skipped, self.skipped_file = [], os.path.join(results, "skipped.txt")
        self.have_skipped = os.path.isfile(self.skipped_file)
        if self.have_skipped:
            try:
                with open(self.skipped_file, errors="replace") as f:
                    for line in f:
                        line = line.rstrip("\n")
                        if line.strip():
                            step, _, reason = line.partition("\t")
                            self.skipped.append((step.strip(), reason.strip()))
            except OSError:
                pass

    def path(self, name):
        return os.path.join(self.dir, name)

    def rows(self, name):
        """the CSV's rows (list of dicts), [] when it has a header only, None when missing"""
        if name not in self._csv:
            p = self.path(name)
            rows = None
            if os.path.isfile(p):
                try:
                    with open(p, newline="", errors="replace") as f:
                        rows = [r for r in csv.DictReader(f) if r.get("program")]
                except (OSError, csv.Error) as e:
                    print(f"{PROG}: {p}: {e}", file=sys.stderr)
            self._csv[name] = rows
        return self._csv[name]

    def all_rows(self):
        out = []
        for p in sorted(glob.glob(os.path.join(self.dir, "*.csv"))):
            for r in self.rows(os.path.basename(p)) or []:
                r.setdefault("_file", os.path.basename(p))
                out.append(r)
        return out

    def reasons(self, name):
        """skipped.txt lines explaining why NAME is missing: (step, reason) list"""
        hints, trainer = STEPS.get(name, ([os.path.splitext(name)[0]], None))
        if name.startswith("hyperfine-"):
            t = name[len("hyperfine-"):-len(".json")]
            hints, trainer = [f"hyperfine-{t}", f"{t}-hyperfine"], t
        norm = lambda t: re.sub(r"[^a-z0-9]+", "_", t.lower()).strip("_")
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

    def text(self, name):
        try:
            with open(self.path(name), errors="replace") as f:
                return f.read()
        except OSError:
            return None


# ---------------------------------------------------------------- probes


def probe(cmd, timeout=10, line="first"):
    """first/last non-empty output line of cmd, or None when the tool is absent or fails"""
    if not shutil.which(cmd[0]):
        return None
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           text=True, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [l.strip() for l in p.stdout.splitlines() if l.strip()]
    if p.returncode != 0 or not lines:
        return None
    return lines[0] if line == "first" else lines[-1] if line == "last" else lines


def machine():
    facts = []
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    model = l.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    flags = probe(["lscpu"], line="all") or []
    flag_line = next((l for l in flags if l.startswith("Flags:")), "")
    if not flag_line:
        try:
            with open("/proc/cpuinfo") as f:
                flag_line = next((l for l in f if l.startswith("flags")), "")
        except OSError:
            flag_line = ""
    avx = "AVX-512 (avx512f) yes" if " avx512f" in flag_line else "AVX-512 no" if flag_line else "flags unknown"
    facts.append(("CPU", f"{model or 'unknown'}; {avx}"))
    nproc = probe(["nproc"]) or str(os.cpu_count())
    facts.append(("cores", f"{nproc} (nproc)"))
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for l in f:
                if l.startswith("MemTotal:"):
                    mem = int(l.split()[1]) / 1024 / 1024
                    break
    except (OSError, ValueError):
        pass
    facts.append(("memory", f"{mem:.1f} GiB" if mem else "unknown"))
    osname = None
    try:
        with open("/etc/os-release") as f:
            for l in f:
                if l.startswith("PRETTY_NAME="):
                    osname = l.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    facts.append(("OS", osname or "unknown"))
    facts.append(("kernel", f"{os.uname().sysname} {os.uname().release} {os.uname().machine}"))
    facts.append(("compiler", probe(["cc", "--version"]) or "not installed (cc)"))
    facts.append(("MPI", probe(["mpirun", "--version"]) or "not installed (mpirun)"))
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.access(p, os.X_OK)), None)
    cuda = probe([nvcc, "--version"], line="all") if nvcc else None
    # nvcc's last line is the build id; the release line before it says more
    cuda = next((l for l in cuda if "release" in l), cuda[-1]) if cuda else None
    facts.append(("CUDA", f"{cuda} ({nvcc})" if cuda else "not installed (nvcc)"))
    gpus = probe(["nvidia-smi", "-L"], line="all")
    facts.append(("GPU", "; ".join(gpus) if gpus else "no GPU" + ("" if shutil.which("nvidia-smi")
                                                                   else " (nvidia-smi not installed)")))
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    pyver = probe([py, "-c", "import sys; print(sys.version.split()[0])"])
    torch = probe([py, "-c", "import torch; print(torch.__version__)"], timeout=60)
    facts.append(("Python / PyTorch", f"{py} {pyver or '?'}; PyTorch {torch or 'not installed'}"))
    tools = []
    for name, cmd in (("hyperfine", ["hyperfine", "--version"]), ("gnuplot", ["gnuplot", "--version"])):
        tools.append(probe(cmd) or f"{name} not installed")
    facts.append(("tools", "; ".join(tools)))
    return facts


# ---------------------------------------------------------------- the report

SEED000 = [  # Table 1: configuration, time per epoch (s), MPI cost (s)
    ("CUDA only", 0.23, None), ("OpenMP only (4 threads)", 1.24, None), ("Naive (no OpenMP or CUDA)", 2.56, None),
    ("CUDA + MPI", 0.52, 0.29), ("OpenMP + MPI (4 threads)", 1.60, 0.36), ("Naive + MPI", 2.93, 0.37)]
SEED001 = {  # Table 4: expected speedup ranges
    ("OpenMP", 1, 4): (2.5, 3.5), ("OpenMP", 1, 8): (3.5, 5.0), ("MPI", 4, 1): (2.0, 3.0), ("MPI", 8, 1): (2.5, 4.0),
    ("Hybrid", 2, 2): (2.5, 3.5), ("Hybrid", 2, 4): (3.5, 5.5)}


class Report:
    def __init__(self, inp):
        self.i = inp
        self.lines = []

    def add(self, *lines):
        self.lines.extend(lines)

    def para(self, text):
        self.lines += [text, ""]

    def shows(self, sentences):
        sentences = [t for t in sentences if t]
        if sentences:
            self.para("**What this shows:** " + " ".join(sentences))

    # ------------------------------------------------------------ header, machine
    def header(self, facts):
        i = self.i
        rows = i.all_rows()
        stamps = sorted(r.get("timestamp", "") for r in rows if r.get("timestamp"))
        hosts = sorted({r.get("host", "") for r in rows if r.get("host")})
        mode, why = None, ""
        mt = i.text("mode.txt")
        if mt and mt.split():
            mode, why = mt.split()[0], f"from {i.path('mode.txt')}"
        else:
            ns = [int(num(r.get("train_n")) or 0) for r in rows]
            if ns:
                n = max(ns)
                mode = "full" if n >= 60000 else "quick" if n >= 3000 else "smoke"
                why = f"inferred from the data sizes: at most {n:,} training samples per run"
            else:
                mode, why = "unknown", "no result rows to infer it from"
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        span = f"measured {stamps[0]} … {stamps[-1]}" if stamps else "no measurements found"
        on = f" on host {', '.join(hosts)}" if hosts else ""
        self.add("# partrain report", "")
        self.para(
            f"Generated {now} by `scripts/report.py` from `{i.dir}/` ({plural(len(rows), 'result row')} in "
            f"{plural(len(glob.glob(os.path.join(i.dir, '*.csv'))), 'CSV file')}, {span}{on}). Mode: **{mode}** "
            f"({why}); quick and smoke runs use training subsets and fewer repetitions, so their times are "
            "indicative only. Regenerate everything with `make all && ./run_all.sh` (`--quick` or `--smoke` for "
            "a short run); `make plots` redraws the figures from the CSVs alone and `make report-md` rebuilds "
            "this file from existing results without rerunning anything. Times are medians over repeated runs "
            "(the **runs** columns count them) of each run's median epoch (epochs 2..E, evaluation excluded) "
            "unless a table says otherwise; speedups divide serial's time by the configuration's, "
            "measured in the same sweep.")
        self.add("## Machine", "")
        self.add(*table(["item", "value"], facts), "")
        self.para(f"Probed when this report was generated; the measurements come from host(s) "
                  f"{', '.join(hosts) or 'unknown'} (CSV column `host`).")

    # ------------------------------------------------------------ seed 000
    def seed000(self):
        i, cores = self.i, self.i.cores
        self.add("## Seed report 000", "")
        self.para("Pilarski (Georgia Tech, \"MNIST With Parallelism\") trained an MLP on MNIST in modular C with "
                  "OpenMP (4 threads), a tiled CUDA matrix product and OpenMPI data parallelism (4 machines, each "
                  "on a quarter of the 60,000 images), and reported time per epoch per configuration with the "
                  "added \"MPI cost\" (Table 1), a U-shaped time-vs-threads curve (Figure 6) and accuracy/loss "
                  "curves (Figures 4–5).")
        # ---- Table 1
        self.add("### Table 1 — time per epoch per configuration, with the MPI cost", "")
        srcs = {n: i.rows(n) for n in ("bench-mpi.csv", "bench-openmp.csv", "bench-hybrid.csv", "mpi-strong.csv",
                                       "hybrid-grid.csv", "openmp.csv")}
        present = {n: latest_config(r) for n, r in srcs.items() if r}
        cuda_rows = [r for r in i.all_rows() if r.get("program") == "cuda"]
        batches = sorted({int(num(r["batch"])) for n in ("bench-mpi.csv", "bench-openmp.csv", "bench-hybrid.csv")
                          for r in present.get(n, []) if num(r.get("batch"))})
        if not batches:
            batches = sorted({int(num(r["batch"])) for rs in present.values() for r in rs if num(r.get("batch"))})
        if not batches:
            for n in ("bench-mpi.csv", "bench-openmp.csv", "bench-hybrid.csv"):
                self.para(i.missing(n))
            self.shows([])
            return
        T = min(4, cores)        # the report's 4 threads / 4 machines, capped at this machine's cores
        P = min(4, max(2, cores))
        body, facts = [], {}
        for b in batches:
            def first(cands):
                for name, fn in cands:
                    rows = present.get(name)
                    a = fn(rows, name) if rows else None
                    if a and a.epoch is not None:
                        return a
                return None
            naive = first([(n, lambda r, n_: serial_of(r, b) and Agg(serial_of(r, b).rows, n_))
                           for n in ("bench-mpi.csv", "bench-hybrid.csv", "bench-openmp.csv", "mpi-strong.csv",
                                     "hybrid-grid.csv", "openmp.csv")])
            omp = first([("bench-openmp.csv", lambda r, n: best([agg(r, n, program="openmp", variant=m, threads=T,
                                                                    batch=b) for m in modes_of(r)])),
                         ("openmp.csv", lambda r, n: best([agg(r, n, program="openmp", variant=m, threads=T,
                                                              batch=b) for m in modes_of(r)])),
                         ("bench-hybrid.csv", lambda r, n: agg(r, n, program="hybrid", ranks=1, threads=T, batch=b)),
                         ("hybrid-grid.csv", lambda r, n: agg(r, n, program="hybrid", ranks=1, threads=T, batch=b))])
            mpi = first([("bench-mpi.csv", lambda r, n: agg(r, n, program="mpi", variant="allreduce", ranks=P, batch=b)),
                         ("mpi-strong.csv", lambda r, n: agg(r, n, program="mpi", variant="allreduce", ranks=P,
                                                             batch=b))])
            hyb = first([("bench-hybrid.csv", lambda r, n: agg(r, n, program="hybrid", ranks=P, threads=T, batch=b)),
                         ("hybrid-grid.csv", lambda r, n: agg(r, n, program="hybrid", ranks=P, threads=T, batch=b))])
            # the report's CUDA code is a tiled matrix product: our best tiled kernel, else any
            kinds = sorted({r["variant"] for r in cuda_rows})
            tiled = [v for v in kinds if v.startswith("tiled")] or kinds
            cu1 = best([agg(cuda_rows, "", ranks=1, batch=b, variant=v) for v in tiled])
            cu2 = best([agg(cuda_rows, "", ranks=P, batch=b, variant=v) for v in tiled])
            for a_ in (cu1, cu2):
                if a_:
                    a_.src = a_.rows[0].get("_file", "")
            cu1same = agg(cuda_rows, "", ranks=1, batch=b, variant=cu2.variant) if cu2 else None

            def base_in(a, **eq):   # the non-MPI counterpart from the same file, else None
                rows = present.get(a.src) if a else None
                return agg(rows, a.src, **eq) if rows else None

            def excess(a, base, workers_a, workers_b):
                if not a or not base or a.epoch is None or base.epoch is None:
                    return None
                return a.epoch - base.epoch * min(workers_b, cores) / min(workers_a, cores)

            def same_serial(a):   # serial/serial of the sweep that measured a, for its speedup
                return serial_of(present[a.src], b) if a and present.get(a.src) else None
            ser_same = same_serial(mpi) or naive
            omp_same = (base_in(hyb, program="hybrid", ranks=1, threads=T, batch=b) if hyb else None) or omp
            ex_mpi = excess(mpi, ser_same, P, 1)
            ex_hyb = excess(hyb, omp_same, P * T, T)
            # one device per rank, as the report's one GPU per machine
            ex_cu = cu2.epoch - cu1same.epoch / P if cu2 and cu1same and cu1same.epoch else None
            facts[b] = dict(naive=naive, omp=omp, mpi=mpi, hyb=hyb, cu1=cu1, cu2=cu2, ser_same=ser_same,
                            ser_omp=same_serial(omp),
                            ex_mpi=ex_mpi, ex_hyb=ex_hyb)
            gpu_note = "no GPU row (no cuda program in the CSVs)"
            ours = {
                "CUDA only": (cu1, f"cuda/cuda --kernel {cu1.variant}" if cu1 else gpu_note, None),
                "OpenMP only (4 threads)": (omp, f"openmp --accum {omp.variant}, T = {T}" if omp and omp.program ==
                                            "openmp" else f"hybrid 1×{T}", None),
                "Naive (no OpenMP or CUDA)": (naive, "serial/serial, 1 core", None),
                "CUDA + MPI": (cu2, f"cuda-mpi, P = {P}" if cu2 else gpu_note, ex_cu),
                "OpenMP + MPI (4 threads)": (hyb, f"hybrid {P}×{T}", ex_hyb),
                "Naive + MPI": (mpi, f"mpi --sync allreduce, P = {P}", ex_mpi),
            }
            for name, rep_t, rep_c in SEED000:
                a, lab, ex = ours[name]
                if a is None:
                    body.append([str(b), name, s(rep_t), s(rep_c) if rep_c else "N/A", lab if "GPU" in lab
                                 else "not measured", "–", "–", "–", "–", "0", ""])
                    continue
                mpi_cell = s(a.comm) if a.ranks > 1 else "N/A"
                body.append([str(b), name, s(rep_t), s(rep_c) if rep_c else "N/A", lab, s(a.epoch), mpi_cell,
                             s(ex) if ex is not None else "N/A", pol(a.policy) if a.threads * a.ranks > 1 else "–",
                             str(a.n), f"{a.src}, {dname(a.dataset)} {a.train_n}"])
        self.add(*table(["batch", "configuration (report)", "report: epoch", "report: MPI cost", "ours",
                         "ours: epoch", "ours: in MPI calls", "ours: MPI cost", "OMP_WAIT_POLICY", "runs", "source"],
                        body), "")
        for n in ("bench-mpi.csv", "bench-openmp.csv", "bench-hybrid.csv"):
            if n not in present:
                self.add(f"- {i.missing(n)}")
        self.add("")
        self.para(f"The report: MNIST, 15,000 images per machine (the MPI rows: 4 machines × 15,000; the others: one "
                  f"machine × 15,000), so its MPI cost is the time the MPI version adds for the same work per "
                  f"machine. Ours: {'/'.join(sorted({dname(a.dataset) for f in facts.values() for a in f.values() if isinstance(a, Agg)}))}, "
                  f"the whole training set split over the ranks (strong scaling) on "
                  f"{cores} cores, so \"4 threads\" and \"4 machines\" become {T} threads and {P} ranks. "
                  f"*In MPI calls* is `comm_seconds` (seconds inside MPI per epoch, mean over ranks); *MPI cost* "
                  f"is the report's definition for our setup: our epoch minus the non-MPI configuration's epoch "
                  f"scaled to the cores the MPI run adds (serial / {min(P, cores)} for {P} ranks; hybrid 1×{T} × "
                  f"{min(T, cores)}/{min(P * T, cores)} for {P}×{T}).")
        sent = []
        f64 = facts.get(64) or facts[batches[0]]
        b0 = 64 if 64 in facts else batches[0]
        if f64["naive"]:
            scaled = f64["naive"].epoch * 15000 / float(f64["naive"].train_n or 60000)
            sent.append(f"Scaled to the report's 15,000 images, our serial epoch at batch {b0} takes {s(scaled)} "
                        f"against its naive 2.56 s ({2.56 / scaled:.0f}× less; a different machine and network).")
        for b in batches:
            f = facts[b]
            if f["mpi"] and f["ser_same"]:
                m, sp = f["mpi"], ratio(f["ser_same"].epoch, f["mpi"].epoch)
                share = m.comm_share
                cmp = ("a larger share than" if share is not None and share > 12.63 else "a smaller share than")
                sent.append(f"At batch {b}, {m.ranks} MPI ranks give {x(sp)} over serial ({s(m.epoch)} vs "
                            f"{s(f['ser_same'].epoch)}, {m.src}); {s(m.comm)} of the epoch is spent in MPI calls "
                            f"({pct(share, 1)}), {cmp} the report's 0.37 s of 2.93 s (12.6%); the epoch is "
                            f"{s(f['ex_mpi'])} {'longer' if (f['ex_mpi'] or 0) >= 0 else 'shorter'} than a perfect "
                            f"split of serial's.")
        for b in batches:
            f = facts[b]
            if f["omp"] and f["ser_omp"]:
                sp = ratio(f["ser_omp"].epoch, f["omp"].epoch)
                sent.append(f"OpenMP with {f['omp'].threads} threads ({f['omp'].variant}) is {x(sp)} serial at batch "
                            f"{b} ({'more' if sp and sp > 2.06 else 'less'} than the report's 1.24 s vs 2.56 s = "
                            f"2.06× with 4 threads{'' if cores >= 4 else f'; this machine has {cores} cores'}).")
                break
        for b in batches:
            f = facts[b]
            if f["hyb"] and f["ex_hyb"] is not None:
                h = f["hyb"]
                over = h.ranks * h.threads > cores
                sent.append(f"Hybrid {h.cfg()} at batch {b}{' (oversubscribed, ' + pol(h.policy) + ')' if over else ''}"
                            f" takes {s(h.epoch)}, {s(abs(f['ex_hyb']))} "
                            f"{'more' if f['ex_hyb'] >= 0 else 'less'} than OpenMP alone on the same cores.")
                break
        if len(batches) > 1 and all(facts[b]["mpi"] for b in batches[:2]):
            c1, c2 = facts[batches[0]]["mpi"].comm, facts[batches[1]]["mpi"].comm
            if c1 is not None and c2 is not None:
                sent.append(f"Going from batch {batches[0]} to {batches[1]} {'cuts' if c2 < c1 else 'raises'} the time "
                            f"in MPI calls from {s(c1)} to {s(c2)} per epoch ({int(batches[1] / batches[0])}× fewer "
                            f"gradient exchanges).")
        gb = next((b for b in batches if facts[b]["cu1"]), None)
        if gb is not None:
            g = facts[gb]["cu1"]
            scaled = g.epoch * 15000 / float(g.train_n or 60000)
            sent.append(f"On the GPU, cuda --kernel {g.variant} takes {s(g.epoch)} per epoch at batch {gb}, "
                        f"{s(scaled)} scaled to 15,000 images: {'faster' if scaled < 0.23 else 'slower'} than the "
                        f"report's 0.23 s.")
        else:
            sent.append("The CUDA rows are empty: no GPU measurement is in this run, so the report's 0.23 s CUDA "
                        "epoch has no counterpart here.")
        self.shows(sent)

        # ---- Figure 6
        self.add("### Figure 6 — time per epoch vs OpenMP threads", "")
        self.add(i.figure("openmp-threads.png", "openmp/openmp: epoch time and speedup vs threads"), "")
        rows = latest_config(i.rows("openmp.csv"))
        if rows is None:
            self.para(i.missing("openmp.csv"))
        else:
            b = max({r["batch"] for r in rows if r.get("program") == "openmp"} or {""},
                    key=lambda bb: len(select(rows, program="openmp", batch=bb)))
            ser = serial_of(rows, b)
            ts = sorted({int(r["threads"]) for r in select(rows, program="openmp", batch=b)})
            body, curve = [], {}
            for t in ts:
                cells, pols, ns = [], set(), set()
                for m in modes_of(rows):
                    a = agg(rows, "openmp.csv", program="openmp", variant=m, threads=t, batch=b)
                    if a:
                        curve.setdefault(m, {})[t] = a.epoch
                        pols.add(pol(a.policy))
                        ns.add(a.n)
                        cells.append(f"{s(a.epoch)} ({x(ratio(ser.epoch, a.epoch) if ser else None)})")
                    else:
                        cells.append("not run")
                body.append([str(t), ",".join(sorted(pols))] + cells + [",".join(str(n) for n in sorted(ns))])
            self.add(*table(["threads", "OMP_WAIT_POLICY"] + [f"--accum {m}" for m in modes_of(rows)] + ["runs"],
                            body), "")
            r0 = select(rows, program="openmp")[0] if select(rows, program="openmp") else {}
            self.para(f"Epoch time (speedup over serial/serial {s(ser.epoch) if ser else '–'} in the same sweep), "
                      f"{r0.get('train_n', '?')} samples ({dname(r0.get('dataset'))}), batch {b}, {cores} cores. The report "
                      f"published this figure without numbers: time fell from 1 to 8 threads (little from 4 to 8) "
                      f"and rose above 8; its Table 1 gives 1.24 s at 4 threads against 2.56 s naive (2.06×).")
            sent, u_modes, mono = [], [], []
            for m in modes_of(rows):
                c = curve.get(m)
                if not c or len(c) < 2:
                    continue
                tb, tmax, tmin = min(c, key=lambda t: c[t]), max(c), min(c)
                sp = ratio(ser.epoch, c[tb]) if ser else None
                clause = f"`{m}` is fastest at T = {tb} ({s(c[tb])}, {x(sp)} serial)"
                if tb == tmax:
                    mono.append(m)
                    clause += f", still improving at the largest count tried"
                else:
                    clause += f" and {x(ratio(c[tmax], c[tb]))} slower at T = {tmax}"
                    if c[tmin] > c[tb]:
                        u_modes.append(m)
                if tb > cores and cores in c:
                    nruns = min(a_.n for a_ in [agg(rows, program="openmp", variant=m, threads=tt, batch=b)
                                                for tt in (tb, cores)] if a_)
                    clause += (f"; T = {tb} beats T = {cores} by {pct(100 * (c[cores] / c[tb] - 1), 1)}"
                               + (", within run-to-run noise" if c[cores] / c[tb] < 1.05 else
                                  f" ({plural(nruns, 'run')} each)"))
                sent.append(clause + ".")
            if u_modes:
                sent.append(f"{'All ' + str(len(u_modes)) + ' modes are' if len(u_modes) == len(curve) > 1 else ', '.join(f'`{m}`' for m in u_modes) + (' is' if len(u_modes) == 1 else ' are')} "
                            f"U-shaped like the report's figure, with the bottom at "
                            f"{'/'.join(str(min(curve[m], key=lambda t: curve[m][t])) for m in u_modes)} threads on "
                            f"this {cores}-core machine instead of the report's 8.")
            elif mono:
                sent.append("No mode is U-shaped here yet: more threads kept helping up to the largest count tried.")
            self.shows(sent)

        # ---- curves
        self.add("### Figures 4–5 — loss and accuracy curves", "")
        self.add(i.figure("curves.png", "training loss and test accuracy per epoch"), "")
        rows = i.rows("runs.csv")
        if rows is None:
            self.para(i.missing("runs.csv"))
            return
        latest = {}
        for r in rows:
            k = (r.get("dataset"), r.get("program"), r.get("variant"), r.get("train_n"), r.get("batch"))
            if k not in latest or r.get("timestamp", "") >= latest[k].get("timestamp", ""):
                latest[k] = r
        body, sent = [], []
        for k in sorted(latest):
            r = latest[k]
            accs = [num(v) for v in (r.get("test_acc_curve") or "").split(";") if num(v) is not None]
            bi = max(range(len(accs)), key=lambda j: accs[j]) if accs else None
            body.append([r["dataset"], f"{r['program']} {r['variant']}", r["train_n"], r["epochs"], r["batch"],
                         f"{num(r['final_train_loss']):.4f}" if num(r.get("final_train_loss")) is not None else "–",
                         pct(num(r.get("test_accuracy")), 2),
                         f"{pct(accs[bi], 2)} (epoch {bi + 1})" if accs else "–"])
            if accs:
                sent.append(f"{r['program']} reaches {pct(num(r['test_accuracy']), 2)} test accuracy on "
                            f"{r['dataset']} after {r['epochs']} epochs (best {pct(accs[bi], 2)} at epoch {bi + 1}"
                            f"{', still rising' if bi == len(accs) - 1 else ''}).")
        self.add(*table(["data", "program", "samples", "epochs", "batch", "final loss", "test accuracy",
                         "best test accuracy"], body), "")
        self.para("The report: 95.3% for its unoptimized model on the whole MNIST set (baseline), 96.8% for one "
                  "machine on a quarter of it and 97.4% with MPI after 100 epochs — its MPI gain came from each "
                  "machine seeing the other quarters' gradients, i.e. from more data.")
        mnist = [r for r in latest.values() if r.get("dataset") == "mnist" and num(r.get("test_accuracy"))]
        if mnist:
            a = num(mnist[0]["test_accuracy"])
            sent.append(f"On the MNIST digits that is {abs(a - 95.3):.1f} points {'above' if a >= 95.3 else 'below'}"
                        f" the report's 95.3% baseline, after {mnist[0]['epochs']} instead of 100 epochs on "
                        f"{int(num(mnist[0]['train_n'])):,} images.")
        bm = latest_config(i.rows("bench-mpi.csv"))
        for b in sorted({r["batch"] for r in bm or []}, key=lambda v: int(num(v) or 0))[:1]:
            ser, m2 = serial_of(bm, b), agg(bm, program="mpi", ranks=2, variant="allreduce", batch=b)
            if ser and m2 and ser.acc is not None and m2.acc is not None:
                d = m2.acc - ser.acc
                sent.append(f"With our global-batch semantics 2 MPI ranks end at {pct(m2.acc, 2)} vs serial's "
                            f"{pct(ser.acc, 2)} after the same {ser.epochs} epochs at batch {b} ({d:+.2f} points, "
                            f"bench-mpi.csv): "
                            f"{'distribution itself changes nothing, unlike in the report' if abs(d) <= 0.2 else 'a difference larger than rounding explains'}.")
        self.shows(sent)

    # ------------------------------------------------------------ seed 001
    def seed001(self):
        i, cores = self.i, self.i.cores
        self.add("## Seed report 001", "")
        self.para("A master's assignment report (\"Parallelization of Deep Learning Models\") describing data "
                  "parallelism of the 784-256-128-10 MLP with OpenMP (thread-local gradients summed in a critical "
                  "section), MPI_Allreduce and hybrid MPI+OpenMP (MPI_THREAD_FUNNELED); its Table 4 lists *expected* "
                  "speedups, not measurements.")
        self.add("### Table 4 — expected vs measured speedup", "")
        md = i.text("hybrid-table4.md")
        grid = latest_config(i.rows("hybrid-grid.csv"))
        if md:
            body = md.splitlines()
            if body and body[0].startswith("# "):
                body = body[1:]
            self.add(*[l for l in body], "")
        else:
            self.para(i.missing("hybrid-table4.md"))
        self.add(i.figure("hybrid-grid.png", "hybrid/hybrid: epoch time and speedup over P ranks × T threads"), "")
        # the rows the grid leaves out, from the dedicated trainers' sweeps
        omp, strong = latest_config(i.rows("openmp.csv")), latest_config(i.rows("mpi-strong.csv"))
        extra, measured = [], {}
        if grid:
            ser = serial_of(grid)
            for (kind, p, t), rng in SEED001.items():
                a = agg(grid, program="hybrid", ranks=p, threads=t)
                if a and ser:
                    measured[(kind, p, t)] = (ratio(ser.epoch, a.epoch), f"hybrid {p}×{t}", a)
        if omp:
            for t in (4, 8):
                b_ = best([agg(omp, program="openmp", variant=m, threads=t) for m in modes_of(omp)])
                ser = serial_of(omp, b_.batch) if b_ else None
                if b_ and ser:
                    sp = ratio(ser.epoch, b_.epoch)
                    extra.append(["OpenMP", f"{t} threads", "{:.1f}–{:.1f}×".format(*SEED001[("OpenMP", 1, t)]),
                                  f"{x(sp)} ({s(b_.epoch)}, openmp --accum {b_.variant}, batch {b_.batch})",
                                  pol(b_.policy), str(b_.n), "openmp.csv"])
                    if ("OpenMP", 1, t) not in measured or sp > measured[("OpenMP", 1, t)][0]:
                        measured[("OpenMP", 1, t)] = (sp, f"openmp T = {t}", b_)
        elif omp is None:
            self.para(i.missing("openmp.csv"))
        if strong:
            for p in (4, 8):
                b_ = best([agg(strong, program="mpi", variant=v, ranks=p) for v in SYNCS])
                ser = serial_of(strong, b_.batch) if b_ else None
                if b_ and ser:
                    sp = ratio(ser.epoch, b_.epoch)
                    extra.append(["MPI", f"{p} processes", "{:.1f}–{:.1f}×".format(*SEED001[("MPI", p, 1)]),
                                  f"{x(sp)} ({s(b_.epoch)}, mpi --sync {b_.variant}, batch {b_.batch})",
                                  "unset (no OpenMP; mpi_yield_when_idle)" if p > cores else pol(b_.policy),
                                  str(b_.n), "mpi-strong.csv"])
                    if ("MPI", p, 1) not in measured or sp > measured[("MPI", p, 1)][0]:
                        measured[("MPI", p, 1)] = (sp, f"mpi P = {p}", b_)
        elif strong is None:
            self.para(i.missing("mpi-strong.csv"))
        if extra:
            self.add("The same rows measured by the dedicated trainers' sweeps (the grid stops at 4 workers per "
                     "dimension; these include 8):", "")
            self.add(*table(["implementation", "configuration", "expected (report)", "measured here", "OMP_WAIT_POLICY",
                             "runs", "source"], extra), "")
        sent = []
        if grid:
            ser = serial_of(grid)
            cells = [a for a in (agg(grid, program="hybrid", ranks=p, threads=t) for p in (1, 2, 4, 8)
                                 for t in (1, 2, 4, 8)) if a]
            if ser and cells:
                top = best(cells)
                within = [a for a in cells if a.ranks * a.threads <= cores]
                over = [a for a in cells if a.ranks * a.threads > cores]
                sent.append(f"The best grid point is {top.cfg()} at {x(ratio(ser.epoch, top.epoch))} serial "
                            f"({s(top.epoch)} vs {s(ser.epoch)} per epoch, batch {top.batch}).")
                if over and within:
                    bo = best(over)
                    sent.append(f"Above the {cores} cores the best is {bo.cfg()} at "
                                f"{x(ratio(ser.epoch, bo.epoch))}; the worst, {max(over, key=lambda a: a.epoch).cfg()}, "
                                f"{x(ratio(ser.epoch, max(over, key=lambda a: a.epoch).epoch))} (OMP_WAIT_POLICY "
                                f"{','.join(sorted({pol(a.policy) for a in over}))}).")
        if measured:
            met = [(k, v) for k, v in measured.items() if v[0] is not None and v[0] >= SEED001[k][0]]
            sent.append(f"{len(met)} of the {len(measured)} expected ranges we could measure "
                        f"{'is' if len(met) == 1 else 'are'} reached"
                        f"{' (' + ', '.join(v[1] for k, v in met) + ')' if met else ''}; the ranges assume 4–8 cores, "
                        f"this machine has {cores}, so {cores}× is the ceiling"
                        f"{'; the closest of those configurations reaches ' + x(max(v[0] for v in measured.values() if v[0])) if any(v[0] for v in measured.values()) else ''}.")
        if grid is None:
            self.para(i.missing("hybrid-grid.csv"))
        self.shows(sent)

    # ------------------------------------------------------------ seed 002
    def seed002(self):
        i, cores = self.i, self.i.cores
        self.add("## Seed report 002", "")
        self.para("França Sobreira and Guedes Carneiro (Unicamp, \"Distributed Neural Network Training\") trained a "
                  "single-layer network (no hidden layer) on MNIST with OpenMP, MPI+OpenMP (MPI_Reduce to a root, "
                  "MPI_Bcast of the parameters) and OmpCluster on up to 4 cluster nodes, enlarging the images "
                  "(784, 3,249, 12,544 inputs) to raise the work per sample; they plot duration and speedup against "
                  "image size (Figure 5) and against the node count for each size (Figures 6–8).")
        self.add("### Figure 5 — duration and speedup vs image size", "")
        png = next((os.path.basename(p) for d in (i.plots, i.dir)
                    for p in sorted(glob.glob(os.path.join(d, "imagesize*.png")))), "imagesize.png")
        self.add(i.figure(png, "epoch time and speedup vs image size"), "")
        rows = i.rows("imagesize.csv")
        sizes = {}
        if rows is None:
            self.para(i.missing("imagesize.csv"))
        else:
            body = []
            for sz in sorted({int(num(r["image_size"])) for r in rows if num(r.get("image_size"))}):
                rs = select(rows, image_size=sz)
                ser = serial_of(rs)
                omp = best([agg(rs, program="openmp", variant=v, threads=t) for v in
                            sorted({r["variant"] for r in select(rs, program="openmp")})
                            for t in sorted({r["threads"] for r in select(rs, program="openmp")}) if int(t) > 1])
                mpi = best([agg(rs, program="mpi", variant=v, ranks=p) for v in
                            sorted({r["variant"] for r in select(rs, program="mpi")})
                            for p in sorted({r["ranks"] for r in select(rs, program="mpi")}) if int(p) > 1])
                sizes[sz] = (ser, omp, mpi)
                n = ",".join(str(a.n) for a in (ser, omp, mpi) if a) or "0"
                pols = ",".join(sorted({pol(a.policy) for a in (omp, mpi) if a})) or "–"
                body.append([f"{sz}×{sz}", f"{sz * sz:,}", s(ser.epoch) if ser else "not run",
                             f"{ser.gflops:.1f}" if ser and ser.gflops else "–",
                             f"{s(omp.epoch)} ({x(ratio(ser.epoch, omp.epoch) if ser else None)}, T = {omp.threads})"
                             if omp else "not run",
                             f"{s(mpi.epoch)} ({x(ratio(ser.epoch, mpi.epoch) if ser else None)}, P = {mpi.ranks})"
                             if mpi else "not run",
                             pct(mpi.comm_share) if mpi else "–", pols, n])
            self.add(*table(["image", "inputs", "serial epoch", "serial GFLOP/s", "OpenMP epoch (speedup)",
                             "MPI epoch (speedup)", "MPI comm share", "OMP_WAIT_POLICY", "runs (serial,omp,mpi)"],
                            body), "")
            r0 = rows[0] if rows else {}
            self.para(f"Ours: {r0.get('dataset', '?')} {r0.get('train_n', '?')} samples resampled (bilinear) to each "
                      f"size, MLP {r0.get('hidden', '?')}, batch {r0.get('batch', '?')}; speedup over serial at the "
                      "same size. The report (1 node, MNIST, its 2-layer net): about 10× for OpenMP and MPI+OpenMP "
                      "at every image size on its multi-core node, about 4× on the GPU; serial 2.14 s per epoch at "
                      "784 inputs (gprof, 213.9 s / 100 epochs). Its Figure 7 caption says 3,248; 57² = 3,249.")
        self.add("### Figures 6–8 — speedup vs node count", "")
        strong = latest_config(i.rows("mpi-strong.csv"))
        sent = []
        if strong is None:
            self.para(i.missing("mpi-strong.csv"))
        else:
            ser = serial_of(strong)
            body = []
            for p in sorted({int(r["ranks"]) for r in select(strong, program="mpi")}):
                a = best([agg(strong, program="mpi", variant=v, ranks=p) for v in SYNCS])
                if a:
                    body.append([str(p), f"--sync {a.variant}", s(a.epoch), x(ratio(ser.epoch, a.epoch) if ser else None),
                                 pct(a.comm_share), "yes" if p > cores else "no", str(a.n)])
            self.add(*table(["ranks", "fastest variant", "epoch", "speedup vs serial", "comm share",
                             "oversubscribed", "runs"], body), "")
            self.para(f"{strong[0].get('train_n')} samples of {strong[0].get('image_size')}×"
                      f"{strong[0].get('image_size')} images (784 inputs), batch {strong[0].get('batch')}, one rank "
                      f"per core up to {cores} ranks; the full strong and weak tables are in *Scaling*. The report: "
                      "MPI+OpenMP near-linear up to 4 nodes at every image size (no numbers published).")
            sp2 = [(p, ratio(ser.epoch, best([agg(strong, program="mpi", variant=v, ranks=p) for v in SYNCS]).epoch))
                   for p in sorted({int(r["ranks"]) for r in select(strong, program="mpi")}) if ser and p > 1]
            if sp2:
                inside = [(p, v) for p, v in sp2 if p <= cores]
                if inside:
                    p, v = inside[-1]
                    sent.append(f"At {p} ranks (this machine's {cores} cores) the best variant reaches {x(v)}, "
                                f"{pct(100 * v / p)} of linear — {'near-linear, as the report found' if v >= 0.85 * p else 'short of the near-linear scaling the report found'}.")
                beyond = [(p, v) for p, v in sp2 if p > cores]
                if beyond:
                    sent.append("Beyond the cores the speedup " + ", ".join(f"at {p} ranks is {x(v)}" for p, v in beyond)
                                + ": extra ranks share cores, they add no compute.")
        if sizes:
            sp = {sz: ratio(t[0].epoch, t[2].epoch) for sz, t in sizes.items() if t[0] and t[2]}
            so = {sz: ratio(t[0].epoch, t[1].epoch) for sz, t in sizes.items() if t[0] and t[1]}
            gf = {sz: t[0].gflops for sz, t in sizes.items() if t[0] and t[0].gflops}
            if len(sp) >= 2:
                lo, hi = min(sp), max(sp)
                sent.append(f"MPI with {sizes[hi][2].ranks} ranks: " + ", ".join(f"{x(sp[k])} at {k * k:,}"
                                                                                  for k in sorted(sp))
                            + " inputs "
                            f"({'more work per sample amortises the exchange, as the report argued' if sp[hi] > sp[lo] else 'larger images do not help here, unlike the report’s granularity argument'}).")
            if len(so) >= 2:
                th = sizes[max(so)][1].threads
                sent.append(f"OpenMP with {th} threads: " + ", ".join(f"{x(so[k])} at {k * k:,}" for k in sorted(so))
                            + " inputs.")
            if len(gf) >= 2:
                lo, hi = min(gf), max(gf)
                sent.append(f"Serial runs at {gf[lo]:.0f} GFLOP/s at {lo}×{lo} and {gf[hi]:.0f} GFLOP/s at {hi}×{hi}"
                            f"{': the bigger first layer does not make it more efficient' if gf[hi] < 0.9 * gf[lo] else ''}.")
            best_any = max(list(sp.values()) + list(so.values()) or [0])
            if best_any:
                sent.append(f"The best speedup here is {x(best_any)} on {cores} cores against the report's ≈10× on "
                            f"one node of its cluster.")
        self.shows(sent)

    # ------------------------------------------------------------ seed 003
    def seed003(self):
        i, cores = self.i, self.i.cores
        self.add("## Seed report 003", "")
        self.para("Senay (Addis Ababa University, \"Distributed CNN using OpenMP and MPI\") trained a one-convolution "
                  "CNN (8 filters 3×3, max-pool, dense 1352→10) on MNIST with 4 MPI ranks × OpenMP over (sample × "
                  "filter), 32 samples per rank, on an Apple M4, and reported loss/accuracy per epoch (Table 3), "
                  "serial vs distributed time (Table 4: 163.60 s vs 45.97 s, 3.56×), convergence (Table 5) and "
                  "speedup vs cores (Figures 1–2).")
        names = ["cnn-table3.md", "cnn-table4.md", "cnn-table5.md"]
        texts = {n: i.text(n) for n in names}
        tmp = None
        if not all(texts.values()) and i.rows("cnn-accuracy.csv") is not None and i.rows("cnn-timing.csv") is not None:
            tmp = tempfile.mkdtemp(prefix="partrain-report-")
            try:
                subprocess.run([sys.executable, os.path.join(HERE, "cnn_tables.py"), "--accuracy",
                                i.path("cnn-accuracy.csv"), "--timing", i.path("cnn-timing.csv"), "--outdir", tmp,
                                "--dat", os.path.join(tmp, "cnn-speedup.dat")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
                for n in names:
                    if not texts[n] and os.path.isfile(os.path.join(tmp, n)):
                        with open(os.path.join(tmp, n)) as f:
                            texts[n] = f.read()
            except (OSError, subprocess.SubprocessError):
                pass
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        for n in names:
            t = texts[n]
            if not t:
                self.add(f"### {n.replace('cnn-table', 'Table ').replace('.md', '')}", "")
                self.para(i.missing(n))
                continue
            lines = t.rstrip("\n").splitlines()
            if lines and lines[0].startswith("# "):
                lines[0] = "### " + re.sub(r"^# Seed report 003, ", "", lines[0])
            self.add(*lines, "")
        self.add("### Figures 1–2 — speedup vs cores", "")
        self.add(i.figure("cnn-speedup.png", "cnn/cnn: speedup vs cores, with seed report 003's"), "")
        sent = []
        tim = i.rows("cnn-timing.csv")
        if tim is None:
            self.para(i.missing("cnn-timing.csv"))
        else:
            base = agg(tim, program="cnn", ranks=1, threads=1)
            others = [agg(tim, program="cnn", ranks=p, threads=t) for p, t in {(int(r["ranks"]), int(r["threads"]))
                                                                                for r in tim} if (p, t) != (1, 1)]
            others = [a for a in others if a and a.total]
            if base and base.total and others:
                top = min(others, key=lambda a: a.total)
                sp = base.total / top.total
                used = min(top.ranks * top.threads, cores)
                sent.append(f"Our best configuration, {top.cfg()} ranks × threads, runs {top.epochs} epochs of "
                            f"{int(num(top.train_n) or 0):,} images in {s(top.total)} vs {s(base.total)} for 1×1: "
                            f"{x(sp)} on {used} cores, {pct(100 * sp / used)} parallel efficiency, against the "
                            f"report's 3.56× on 4 ranks (89%).")
                work = (num(base.epochs) or 0) * (num(base.train_n) or 0)
                if work:
                    scaled = base.total * 5 * 60000 / work
                    sent.append(f"Scaled to the report's 5 epochs of 60,000 images, our 1×1 would take {s(scaled)} "
                                f"where the report's serial code took 163.60 s ({163.60 / scaled:.0f}× less"
                                f"{'; measured on ' + format(int(work), ',') + ' image-epochs only' if work < 5 * 60000 else ''}).")
        acc = i.rows("cnn-accuracy.csv")
        if acc is None:
            self.para(i.missing("cnn-accuracy.csv"))
        else:
            def last(p, t, b):
                r = select(acc, program="cnn", ranks=p, threads=t, batch=b)
                return num(max(r, key=lambda r_: r_.get("timestamp", ""))["test_accuracy"]) if r else None
            ser, glob2, per4 = last(1, 1, 32), last(2, 2, 32), last(4, 1, 128)
            if ser is not None and per4 is not None:
                d = per4 - ser
                sent.append(f"With the report's 32 samples per rank, 4 ranks end {abs(d):.2f} points "
                            f"{'below' if d < 0 else 'above'} serial ({pct(per4, 2)} vs {pct(ser, 2)}; the report: "
                            f"−2.42)")
                if glob2 is not None:
                    sent[-1] += (f", while the global batch of 32 on 2×2 ends {abs(glob2 - ser):.2f} points from "
                                 f"serial" + (": the loss comes from 4× fewer SGD steps per epoch, not from "
                                              "distribution." if abs(glob2 - ser) <= 0.2 else
                                              ", more than float rounding of the split sums explains."))
                else:
                    sent[-1] += "."
        self.shows(sent)

    # ------------------------------------------------------------ seed 004
    def seed004(self):
        i, cores = self.i, self.i.cores
        self.add("## Seed report 004", "")
        self.para("Mekbib (Addis Ababa University, \"Parallelization of Deep Learning Models\") trained a small "
                  "sigmoid MLP on Fashion-MNIST in Python with mpi4py data parallelism (Scatter, Gather, Bcast) on "
                  "CPU and on GPU, and reports \"nearly 50%\" speedup of the parallel over the sequential model on "
                  "CPU, \"more than 50%\" on GPU, and the GPU slower than the CPU overall (Figure 4, no numbers).")
        self.add("### Sequential vs parallel on the CPU", "")
        body, cands = [], []
        for name, prog, pick in (("bench-openmp.csv", "openmp", lambda r, b: best(
                                    [agg(r, name_, program="openmp", variant=m, threads=cores, batch=b) for m in modes_of(r)
                                     for name_ in ("bench-openmp.csv",)])),
                                 ("bench-mpi.csv", "mpi", lambda r, b: best(
                                     [agg(r, "bench-mpi.csv", program="mpi", variant=v, ranks=cores, batch=b)
                                      for v in SYNCS])),
                                 ("bench-hybrid.csv", "hybrid", lambda r, b: best(
                                     [agg(r, "bench-hybrid.csv", program="hybrid", ranks=p, threads=t, batch=b)
                                      for p in range(1, cores + 1) for t in range(1, cores + 1)
                                      if p * t == cores]))):
            rows = latest_config(i.rows(name))
            if rows is None:
                self.para(i.missing(name))
                continue
            for b in sorted({r["batch"] for r in rows}, key=lambda v: int(num(v) or 0)):
                ser, a = serial_of(rows, b), pick(rows, b)
                if ser and a:
                    sp = ratio(ser.epoch, a.epoch)
                    cands.append((sp, a, ser, b))
                    body.append([b, label(a), s(ser.epoch), s(a.epoch), x(sp), pol(a.policy), f"{ser.n}/{a.n}", name])
        body.sort(key=lambda r: int(num(r[0]) or 0))
        if body:
            self.add(*table(["batch", "parallel (best of its kind on all cores)", "sequential (serial)", "parallel",
                             "speedup", "OMP_WAIT_POLICY", "runs (serial/parallel)", "source"], body), "")
        gpu = [r for r in i.all_rows() if r.get("program") == "cuda"]
        sent, cands_gpu = [], []
        if cands:
            sp, a, ser, b = max(cands, key=lambda c: c[0] or 0)
            sent.append(f"The fastest parallel CPU configuration is {label(a)} "
                        f"at batch {b}: {x(sp)} over sequential ({s(a.epoch)} vs {s(ser.epoch)}), "
                        f"{'more than' if sp > 1.5 else 'less than'} the report's ≈1.5× (\"nearly 50%\") on "
                        f"{cores} cores.")
            worst = min(cands, key=lambda c: c[0] or 0)
            if worst[0] is not None and worst[0] < 1:
                sent.append(f"Not every strategy pays: {label(worst[1])} at batch {worst[3]} is {x(worst[0])} "
                            f"serial.")
        if gpu:
            body = []
            for f in sorted({r["_file"] for r in gpu}):
                rows = latest_config(i.rows(f))
                for b in sorted({r["batch"] for r in select(rows, program="cuda")}, key=lambda v: int(num(v) or 0)):
                    ser = serial_of(rows, b)
                    for v in sorted({r["variant"] for r in select(rows, program="cuda", batch=b)}):
                        for p in sorted({r["ranks"] for r in select(rows, program="cuda", batch=b, variant=v)}):
                            g = agg(rows, f, program="cuda", variant=v, ranks=p, batch=b)
                            sp = ratio(ser.epoch, g.epoch) if ser else None
                            body.append([b, f"cuda --kernel {v}" + (f", P = {p}" if p != "1" else ""), s(g.epoch),
                                         s(ser.epoch) if ser else "–", x(sp), str(g.n),
                                         f"{f}, {dname(g.dataset)} {g.train_n}"])
                            if p == "1" and sp is not None:
                                cands_gpu.append((sp, g, ser))
            self.add("### The GPU", "")
            self.add(*table(["batch", "GPU", "epoch", "serial (CPU, 1 core)", "GPU speedup", "runs", "source"],
                            body), "")
            if cands_gpu:
                sp, g, ser = max(cands_gpu, key=lambda c: c[0])
                sent.append(f"On the GPU, cuda --kernel {g.variant} takes {s(g.epoch)} per epoch: {x(sp)} one CPU "
                            f"core's serial epoch ({s(ser.epoch)}) — "
                            + ("the opposite of the report, whose GPU run was slower than its CPU run."
                               if sp > 1 else "like the report, the GPU is slower than the CPU here."))
        else:
            found, _ = i.reasons("cuda")
            why = "; ".join(f"{st}: {rs}" for st, rs in found) or ("no GPU on the machine that generated this "
                                                                    "report" if not shutil.which("nvidia-smi") else
                                                                    "no cuda rows in the CSVs")
            self.para(f"GPU: no GPU measurement in this run ({why}). The report's GPU remark (slower than the CPU "
                      "because of host-device copies for a small network) cannot be checked here; "
                      "`scripts/gpu-check.sh` measures cuda/cuda on a GPU machine.")
        self.shows(sent)

    # ------------------------------------------------------------ scaling
    def scaling(self):
        i, cores = self.i, self.i.cores
        self.add("## Scaling", "")
        self.add(i.figure("mpi-scaling.png", "mpi/mpi: epoch time and speedup vs ranks, strong and weak scaling"), "")
        self.add(i.figure("mpi-comm.png", "mpi/mpi: share of the epoch spent in MPI calls per --sync"), "")
        sent = []
        strong = latest_config(i.rows("mpi-strong.csv"))
        self.add("### Strong scaling (fixed training set)", "")
        if strong is None:
            self.para(i.missing("mpi-strong.csv"))
        else:
            ser = serial_of(strong)
            body, sp = [], {}
            for v in SYNCS:
                for p in sorted({int(r["ranks"]) for r in select(strong, program="mpi", variant=v)}):
                    a = agg(strong, program="mpi", variant=v, ranks=p)
                    sp[(v, p)] = (ratio(ser.epoch, a.epoch) if ser else None, a)
                    body.append([v, str(p), s(a.epoch), x(sp[(v, p)][0]), s(a.comm), pct(a.comm_share),
                                 ("oversubscribed, " if p > cores else "") + pol(a.policy), str(a.n)])
            self.add(*table(["--sync", "ranks", "epoch", "speedup vs serial", "in MPI calls", "comm share",
                             "OMP_WAIT_POLICY", "runs"], body), "")
            r0 = strong[0]
            self.para(f"{r0.get('train_n')} {r0.get('dataset')} samples, global batch {r0.get('batch')}, "
                      f"{r0.get('epochs')} epochs per run; serial/serial {s(ser.epoch) if ser else '–'} per epoch. "
                      f"Ranks above the {cores} cores run oversubscribed with `mpi_yield_when_idle` (no OpenMP in "
                      "these runs, so OMP_WAIT_POLICY does not apply).")
            if sp:
                (bv, bp), (bs, ba) = max(sp.items(), key=lambda kv: kv[1][0] or 0)
                if bp > 1:
                    sent.append(f"Strong scaling peaks at {bp} ranks with `{bv}`: {x(bs)} over serial, "
                                f"{pct(ba.comm_share)} of its epoch in MPI calls.")
                else:
                    multi = max(((k, v) for k, v in sp.items() if k[1] > 1), key=lambda kv: kv[1][0] or 0,
                                default=None)
                    sent.append("No rank count beats one rank here" + (
                        f": the best with more ranks is {multi[0][1]} ranks with `{multi[0][0]}` at "
                        f"{x(multi[1][0])} serial, {pct(multi[1][1].comm_share)} of its epoch in MPI calls."
                        if multi else "."))
                stops = {}
                for v in SYNCS:
                    ps = sorted(p for (vv, p) in sp if vv == v)
                    stop = next((p for a_, p in zip(ps, ps[1:]) if (sp[(v, p)][0] or 0) < (sp[(v, a_)][0] or 0)), None)
                    if stop:
                        stops.setdefault(stop, []).append(v)
                for stop, vs in sorted(stops.items()):
                    shares = [sp[(v, stop)][1].comm_share for v in vs if sp[(v, stop)][1].comm_share is not None]
                    sent.append(f"{'All ' + str(len(vs)) + ' variants stop' if len(vs) == len({k[0] for k in sp}) > 1 else ', '.join(f'`{v}`' for v in vs) + (' stops' if len(vs) == 1 else ' stop')} "
                                f"scaling at {stop} ranks ({', '.join(x(sp[(v, stop)][0]) for v in vs)}"
                                f"{'; ' + pct(min(shares)) + '–' + pct(max(shares)) + ' of the epoch in MPI calls' if shares else ''}"
                                f"{'; ' + str(stop) + ' ranks share ' + str(cores) + ' cores' if stop > cores else ''}).")
                if ("overlap", 2) in sp and ("allreduce", 2) in sp:
                    o, a_ = sp[("overlap", 2)][1], sp[("allreduce", 2)][1]
                    if o.comm is not None and a_.comm is not None:
                        sent.append(f"At 2 ranks `overlap` leaves {s(o.comm)} of communication exposed vs "
                                    f"{s(a_.comm)} inside `allreduce` ("
                                    + (f"it hides {pct(100 * (1 - o.comm / a_.comm))} of it)." if o.comm < a_.comm else
                                       "it hides nothing here; its epoch is "
                                       f"{x(ratio(o.epoch, a_.epoch))} allreduce's)."))
        weak = latest_config(i.rows("mpi-weak.csv"), keys=("dataset", "hidden", "epochs", "image_size"))
        self.add("### Weak scaling (fixed samples per rank)", "")
        if weak is None:
            self.para(i.missing("mpi-weak.csv"))
        else:
            body, eff = [], {}
            t1 = best([agg(weak, program="mpi", variant=v, ranks=1) for v in SYNCS])
            for v in SYNCS:
                ps = sorted({int(r["ranks"]) for r in select(weak, program="mpi", variant=v)})
                for p in ps:
                    a = agg(weak, program="mpi", variant=v, ranks=p)
                    e = ratio(t1.epoch, a.epoch) if t1 else None
                    eff[(v, p)] = (e, a)
                    body.append([v, str(p), a.train_n, a.batch, s(a.epoch), pct(100 * e if e else None),
                                 s(a.comm), pct(a.comm_share), ("oversubscribed, " if p > cores else "") + pol(a.policy),
                                 str(a.n)])
            self.add(*table(["--sync", "ranks", "samples", "global batch", "epoch", "efficiency",
                             "in MPI calls", "comm share", "OMP_WAIT_POLICY", "runs"], body), "")
            self.para(f"Efficiency = the fastest 1-rank epoch ({s(t1.epoch) if t1 else '–'}, every rank's share "
                      "of the work) / the epoch at P ranks: 100% means P ranks do P times the work in the same "
                      "time.")
            inside = [(k, v) for k, v in eff.items() if 1 < k[1] <= cores and v[0]]
            if inside:
                (bv, bp), (be, ba) = max(inside, key=lambda kv: kv[1][0])
                sent.append(f"Weak scaling keeps {pct(100 * be)} efficiency at {bp} ranks at best (`{bv}`, "
                            f"{pct(ba.comm_share)} of the epoch in MPI calls); seed report 001's claim of "
                            f"near-constant time per sample {'holds' if be >= 0.9 else 'does not hold'} here.")
        pipe = latest_config(i.rows("mpi-pipeline.csv"), keys=("dataset", "train_n", "hidden", "epochs", "batch"))
        self.add("### Pipeline bubble (mpi/pipeline, GPipe)", "")
        if pipe is None:
            self.para(i.missing("mpi-pipeline.csv"))
        else:
            body, worst = [], None
            for p in sorted({int(r["ranks"]) for r in pipe}):
                for v in sorted({r["variant"] for r in select(pipe, ranks=p)},
                                key=lambda v: int(re.sub(r"\D.*", "", v[len("gpipe-m"):]) or 0)):
                    a = agg(pipe, program="pipeline", variant=v, ranks=p) or agg(pipe, variant=v, ranks=p)
                    m = re.match(r"gpipe-m(\d+)", v)
                    if not a or not m:
                        continue
                    M = int(m.group(1))
                    theo = (p - 1) / (M + p - 1)
                    meas = a.sync / (p * a.epoch) if a.sync is not None and a.epoch else None
                    base = agg(pipe, variant=v, ranks=1)
                    body.append([str(p), str(M), s(a.epoch), x(ratio(base.epoch, a.epoch) if base else None),
                                 pct(100 * meas if meas is not None else None), pct(100 * theo), s(a.comm),
                                 ("oversubscribed, " if p > cores else "") + pol(a.policy), str(a.n)])
                    if p > 1 and meas is not None and (worst is None or meas - theo > worst[0]):
                        worst = (meas - theo, p, M, meas, theo)
            self.add(*table(["stages P", "micro-batches M", "epoch", "vs 1 stage", "measured bubble",
                             "theory (P−1)/(M+P−1)", "in MPI calls", "OMP_WAIT_POLICY", "runs"], body), "")
            self.para("Measured bubble = idle seconds summed over the stages (`sync_seconds`) / (P × epoch); the "
                      "theory assumes equally heavy stages.")
            pbest = best([agg(pipe, variant=r["variant"], ranks=r["ranks"]) for r in pipe if r["ranks"] != "1"])
            p1 = agg(pipe, variant=pbest.variant, ranks=1) if pbest else None
            if pbest and p1:
                r_ = ratio(p1.epoch, pbest.epoch)
                sent.append(f"The fastest pipeline is P = {pbest.ranks}, {pbest.variant}: {x(r_)} "
                            f"{'over' if r_ >= 1 else 'of'} one stage's speed ({s(pbest.epoch)} vs {s(p1.epoch)})"
                            f"{'' if r_ >= 1 else ', so splitting the layers does not pay here'}.")
            if worst:
                _, p, M, meas, theo = worst
                sent.append(f"The pipeline's measured bubble exceeds GPipe's formula most at P = {p}, M = {M}: "
                            f"{pct(100 * meas)} idle vs {pct(100 * theo)} — "
                            f"{'the stages are unequal (the first layer holds most of the FLOPs), so more micro-batches cannot fill it' if meas - theo > 0.1 else 'close to the formula'}.")
        self.shows(sent)

    # ------------------------------------------------------------ PyTorch
    def torch(self):
        i = self.i
        self.add("## What else would you use", "")
        self.para("PyTorch 1.13 (CPU, `bench/torch_mlp.py`) trains the same network on the same data, batch and "
                  "thread count in the same benchmark invocation; ratio = partrain's epoch / PyTorch's (below 1: "
                  "partrain is faster).")
        body, sent = [], []
        for name, what in (("bench-serial.csv", "MLP"), ("bench-openmp.csv", "MLP"), ("bench-cnn.csv", "CNN")):
            rows = latest_config(i.rows(name))
            if rows is None:
                self.para(i.missing(name))
                continue
            torch_rows = select(rows, program="pytorch")
            for b in sorted({r["batch"] for r in rows}, key=lambda v: int(num(v) or 0)):
                tor = {int(t): agg(rows, name, program="pytorch", threads=t, batch=b)
                       for t in {r["threads"] for r in select(torch_rows, batch=b)}}
                tor = {t: a for t, a in tor.items() if a}
                if not tor:
                    continue
                tbest = min(tor.values(), key=lambda a: a.epoch)
                ours = [agg(rows, name, program=p, variant=v, ranks=r, threads=t, batch=b) for p, v, r, t in
                        sorted({(r_["program"], r_["variant"], r_["ranks"], r_["threads"]) for r_ in
                                select(rows, batch=b) if r_["program"] != "pytorch"})]
                for a in [a for a in ours if a]:
                    workers = a.ranks * a.threads
                    same = tor.get(workers) or tor.get(min(tor, key=lambda t: abs(t - workers)))
                    body.append([what, b, label(a), s(a.epoch),
                                 f"{s(same.epoch)} ({plural(same.threads, 'thread')})", x(ratio(a.epoch, same.epoch)),
                                 x(ratio(a.epoch, tbest.epoch)), pol(a.policy) if workers > 1 else "–",
                                 f"{a.n}/{same.n}", name])
                for t in sorted(tor):
                    body.append([what, b, label(tor[t]), s(tor[t].epoch), "–", "1.00×",
                                 x(ratio(tor[t].epoch, tbest.epoch)), pol(tor[t].policy) if t > 1 else "–",
                                 str(tor[t].n), name])
                fastest = best([a for a in ours if a])
                if fastest:
                    r_ = ratio(tbest.epoch, fastest.epoch)
                    sent.append(f"{what}, batch {b} ({name}): partrain's fastest, {label(fastest)}, takes "
                                f"{s(fastest.epoch)} per epoch vs PyTorch's best {s(tbest.epoch)} "
                                f"({plural(tbest.threads, 'thread')}): "
                                + (f"{x(r_)} faster." if r_ >= 1 else f"PyTorch is {x(1 / r_)} faster."))
                if 1 in tor and 2 in tor:
                    r2 = ratio(tor[2].epoch, tor[1].epoch)
                    sent.append(f"PyTorch's {what} with 2 threads takes {x(r2)} its 1-thread time"
                                f"{' (slower with more threads)' if r2 > 1 else ''}.")
        if body:
            self.add(*table(["model", "batch", "program", "epoch", "PyTorch, same threads", "ratio (same threads)",
                             "ratio to PyTorch's best", "OMP_WAIT_POLICY", "runs (ours/torch)", "source"], body), "")
        self.shows(sent)

    # ------------------------------------------------------------ skipped
    def skipped(self):
        i = self.i
        self.add("## Skipped", "")
        if not i.have_skipped:
            self.para(f"`{i.skipped_file}` is missing (run_all.sh writes one line per skipped or failed step), so "
                      "this report cannot say which steps were skipped.")
        elif not i.skipped:
            self.para("nothing was skipped")
        else:
            self.add(*[f"- `{st}`: {rs or 'no reason given'}" for st, rs in i.skipped], "")
        if i.missing_seen:
            seen = list(dict.fromkeys(i.missing_seen))
            self.para("Inputs this report looked for and did not find: " + ", ".join(f"`{m}`" for m in seen) + ".")

    # ------------------------------------------------------------ timings
    def timings(self):
        i, cores = self.i, self.i.cores
        self.add("## Which timing is which", "")
        self.para("Three different clocks appear in this report. **Per-epoch median** (`epoch_seconds_median`, "
                  "every table above unless it says otherwise): the training time of one epoch, median of epochs "
                  "2..E (epoch 1 only when E = 1), test evaluation excluded, taken inside the trainer. "
                  "**total_seconds**: the trainer's whole training loop, first epoch and per-epoch test evaluation "
                  "included (seed report 003's Table 4 uses it, like the report's \"total training time\"). "
                  "**hyperfine**: the whole process from the outside — start-up, `mpirun`, reading and decompressing "
                  "the data, training, evaluation — mean ± standard deviation over its runs after warm-up.")
        files = sorted(glob.glob(os.path.join(i.dir, "hyperfine-*.json")))
        sent = []
        have = {os.path.basename(p) for p in files}
        gone = [f"hyperfine-{t}.json" for t in ("serial", "openmp", "mpi", "hybrid", "cnn", "cuda")
                if f"hyperfine-{t}.json" not in have]
        if gone:
            self.add(*[f"- {i.missing(n)}" for n in gone], "")
        body, spreads = [], []
        for p in files:
            try:
                with open(p) as f:
                    res = json.load(f).get("results", [])
            except (OSError, ValueError) as e:
                self.para(f"`{p}`: unreadable ({e}).")
                continue
            for r in res:
                times = r.get("times") or []
                mean, sd = num(r.get("mean")), num(r.get("stddev"))
                body.append([os.path.basename(p), f"`{r.get('command', '?')}`", str(len(times)),
                             f"{s(mean)} ± {s(sd)}" if sd is not None else f"{s(mean)} (one run: no σ)",
                             s(num(r.get("min"))),
                             s(num(r.get("max"))), s(med(num(t) for t in times))])
                if mean and sd is not None:
                    spreads.append((100 * sd / mean, r.get("command", "?"), mean))
        if body:
            self.add(*table(["file", "command", "runs", "mean ± σ", "min", "max", "median"], body), "")
        rows = i.all_rows()
        over = []
        for r in rows:
            e, t, n = num(r.get("epoch_seconds_median")), num(r.get("total_seconds")), num(r.get("epochs"))
            if e and t and n:
                over.append(100 * (t / (n * e) - 1))
        if spreads:
            hi = max(spreads)
            sent.append(f"hyperfine's run-to-run spread is at most {pct(hi[0], 1)} of the mean (`{hi[1]}`, "
                        f"{s(hi[2])}).")
        if over:
            sent.append(f"Over the {len(over)} CSV rows, total_seconds exceeds epochs × per-epoch median by a median "
                        f"{pct(med(over), 0)} (range {pct(min(over), 0)} … {pct(max(over), 0)}): the first epoch and "
                        f"the test evaluations.")
        # OMP_WAIT_POLICY per figure/table
        uses = [("openmp-threads.png / Figure 6", "openmp.csv"), ("OpenMP benchmark, seeds 000/004", "bench-openmp.csv"),
                ("hybrid grid, seed 001 Table 4", "hybrid-grid.csv"), ("hybrid benchmark, seed 000 Table 1", "bench-hybrid.csv"),
                ("CNN Table 4 / speedup figure", "cnn-timing.csv"), ("CNN Tables 3, 5", "cnn-accuracy.csv"),
                ("CNN vs PyTorch", "bench-cnn.csv"), ("image size, seed 002", "imagesize.csv"),
                ("MPI strong scaling", "mpi-strong.csv"), ("MPI weak scaling", "mpi-weak.csv"),
                ("pipeline bubble", "mpi-pipeline.csv"), ("MPI benchmark", "bench-mpi.csv")]
        body, bad = [], []
        for what, name in uses:
            rs = i.rows(name)
            if not rs:
                continue
            by = {}
            for r in rs:
                w = int(num(r.get("ranks")) or 1) * int(num(r.get("threads")) or 1)
                key = "≤ cores" if w <= cores else "> cores"
                by.setdefault(key, set()).add(pol(r.get("omp_wait_policy", "")))
                if w > cores and int(num(r.get("threads")) or 1) > 1 and not r.get("omp_wait_policy"):
                    bad.append(f"{name}: {r.get('program')} {r.get('variant')} {r.get('ranks')}×{r.get('threads')}")
            body.append([what, name] + [",".join(sorted(by.get(k, set()))) or "–" for k in ("≤ cores", "> cores")])
        if body:
            self.add(f"OMP_WAIT_POLICY per figure and table (from the CSV column `omp_wait_policy`; \"unset\" = the "
                     f"OpenMP runtime's default, which spins before sleeping), split by ranks × threads against the "
                     f"{cores} cores:", "")
            self.add(*table(["figure / table", "source", f"ranks × threads ≤ {cores}", f"ranks × threads > {cores}"],
                            body), "")
            if bad:
                sent.append(f"{len(bad)} oversubscribed threaded run(s) had OMP_WAIT_POLICY unset (spinning waits "
                            f"starve the threads that have work; their times are pessimistic): "
                            + "; ".join(bad[:5]) + ("…" if len(bad) > 5 else "") + ".")
            else:
                sent.append("Every threaded run with more ranks × threads than cores used OMP_WAIT_POLICY=passive; "
                            "runs within the cores used the runtime's default.")
        self.shows(sent)


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description="assemble REPORT.md from a run_all.sh results directory")
    ap.add_argument("--results", default="results", metavar="DIR")
    ap.add_argument("--plots", default=None, metavar="PLOTDIR")
    ap.add_argument("--out", default=None, metavar="FILE")
    a = ap.parse_args(argv)
    results = a.results.rstrip("/") or "/"
    plots = (a.plots or "plots").rstrip("/") or "/"
    out = a.out or os.path.join(results, "REPORT.md")
    if not os.path.isdir(results):
        print(f"{PROG}: note: {results} is not a directory; every input will be reported missing", file=sys.stderr)
    inp = Inputs(results, plots, out)
    rep = Report(inp)
    facts = machine()
    rep.header(facts)
    for sec in (rep.seed000, rep.seed001, rep.seed002, rep.seed003, rep.seed004, rep.scaling, rep.torch,
                rep.skipped, rep.timings):
        mark = len(rep.lines)
        try:
            sec()
        except Exception as e:    # one broken input must not cost the whole report
            import traceback
            traceback.print_exc()
            del rep.lines[mark + 2:]
            rep.para(f"(this section could not be completed: {type(e).__name__}: {e}; see {PROG}'s stderr)")
    text = "\n".join(rep.lines).rstrip("\n") + "\n"
    text = re.sub(r"\n{3,}", "\n\n", text)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, out)
    except OSError as e:
        print(f"{PROG}: {out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"{PROG}: {out} ({len(text.splitlines())} lines; {len(set(inp.missing_seen))} input(s) missing)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
