"""
scripts/reporting/machine.py — what the machine of a run was: collect() probes it (each probe
with a timeout, an absent tool named instead of failing; run_all.sh stores the result in
DIR/machine.json through scripts/machine-info.py at the start of a run), facts() turns
machine.json into the report's machine table and one_line() into the first page's line.
The report reads what the run had; it probes now only when machine.json lacks the fields
(a run of an older suite) and says so.
"""

import datetime
import os
import shutil
import subprocess
import sys

import partrain

# the CPU flags that matter to the trainers' kernels (the rest of /proc/cpuinfo's list is noise here)
RELEVANT_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
                  "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "asimd", "sve")
PROBED = ("cpu_model", "compiler", "kernel", "memory_gib")   # present when run_all.sh stored collect()
# every key collect() gives
FIELDS = ("cpu_model", "cpu_family_model_stepping", "cpu_flags", "real_cores_online", "sockets_cores_threads",
          "caches", "frequency_governor", "memory_gib", "os", "kernel", "compiler", "mpi", "python", "pytorch",
          "gpu", "git_commit", "date", "c2c_latency_ns")


def probe(cmd, timeout=10, line="first"):
    """first/last non-empty output line of cmd (all of them with line="all"), or None when
    the tool is absent, fails or times out"""
    if not cmd[0] or not shutil.which(cmd[0]):
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


def read_first(path, prefix):
    """the value after ':' (or '=') of the first line of PATH that starts with PREFIX"""
    try:
        with open(path, errors="replace") as f:
            for l in f:
                if l.startswith(prefix):
                    return l.split(":" if ":" in l else "=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def c2c_latency(c2c_bin):
    """bench/c2c's median round trip between the first two CPUs (ns), or the reason it is not measured"""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    if allowed < 2:
        return "not measured (one core)"
    if not os.access(c2c_bin, os.X_OK):
        return f"not measured ({os.path.relpath(c2c_bin, partrain.REPO)} not built: make)"
    out = probe([c2c_bin, "--rounds", "50", "--csv"], timeout=30)   # a second or two; more on a loaded machine
    try:
        return float(out.split(",")[2])
    except (AttributeError, IndexError, ValueError):
        return "not measured (bench/c2c failed)"


def getconf_caches():
    """the data caches as glibc's getconf reports them (lscpu has none in some VMs), or unknown"""
    got = []
    for name, key in (("L1d", "LEVEL1_DCACHE_SIZE"), ("L2", "LEVEL2_CACHE_SIZE"), ("L3", "LEVEL3_CACHE_SIZE")):
        v = probe(["getconf", key])
        if v and v.isdigit() and int(v) > 0:
            got.append(f"{name} {int(v) // 1024} KiB (getconf)")
    return ", ".join(got) or "unknown"


def git_commit():
    sha = probe(["git", "-C", partrain.REPO, "rev-parse", "--short=12", "HEAD"])
    if not sha:
        return "unknown (not a git checkout)"
    dirty = probe(["git", "-C", partrain.REPO, "status", "--porcelain", "--untracked-files=no"], line="all")
    return sha + (" dirty" if dirty else "")


def collect(c2c_bin=None):
    """the machine as a dict of JSON-able values; every value a string or number, "unknown" or
    "not installed" where a probe had nothing"""
    m = {}
    m["cpu_model"] = read_first("/proc/cpuinfo", "model name") or probe(["uname", "-p"]) or "unknown"
    fam = [read_first("/proc/cpuinfo", k) for k in ("cpu family", "model\t", "stepping")]
    m["cpu_family_model_stepping"] = "/".join(v or "?" for v in fam) if any(fam) else "unknown"
    flags = (read_first("/proc/cpuinfo", "flags") or read_first("/proc/cpuinfo", "Features") or "").split()
    m["cpu_flags"] = " ".join(f for f in RELEVANT_FLAGS if f in flags) if flags else "unknown"
    lscpu = probe(["lscpu"], line="all") or []
    lsv = {l.split(":", 1)[0].strip(): l.split(":", 1)[1].strip() for l in lscpu if ":" in l}
    m["real_cores_online"] = os.cpu_count() or 1
    m["sockets_cores_threads"] = "/".join(lsv.get(k, "?") for k in
                                          ("Socket(s)", "Core(s) per socket", "Thread(s) per core"))
    m["caches"] = ", ".join(f"{k.split()[0]} {lsv[k]}" for k in ("L1d cache", "L2 cache", "L3 cache")
                            if k in lsv) or getconf_caches()
    gov = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    try:
        with open(gov) as f:
            m["frequency_governor"] = f.read().strip() or "unknown"
    except OSError:
        m["frequency_governor"] = "unknown (no cpufreq: a VM or a container)"
    kib = read_first("/proc/meminfo", "MemTotal")
    try:
        m["memory_gib"] = round(int(kib.split()[0]) / 1024 / 1024, 1)
    except (AttributeError, ValueError, IndexError):
        m["memory_gib"] = "unknown"
    m["os"] = read_first("/etc/os-release", "PRETTY_NAME") or "unknown"
    u = os.uname()
    m["kernel"] = f"{u.sysname} {u.release} {u.machine}"
    m["compiler"] = probe([os.environ.get("CC", "cc"), "--version"]) or "not installed (cc)"
    m["mpi"] = probe(["mpirun", "--version"]) or "not installed (mpirun)"
    py = partrain.python_interpreter()
    py = py if os.access(py, os.X_OK) else sys.executable
    m["python"] = probe([py, "-c", "import sys; print(sys.version.split()[0])"]) or "unknown"
    m["pytorch"] = probe([py, "-c", "import torch; print(torch.__version__)"], timeout=60) or "not installed"
    gpus = probe(["nvidia-smi", "-L"], line="all")
    m["gpu"] = "; ".join(gpus) if gpus else "none"
    m["git_commit"] = git_commit()
    m["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    m["c2c_latency_ns"] = c2c_latency(c2c_bin or os.path.join(partrain.REPO, "bench", "c2c"))
    return m


def have_probed(m):
    return all(k in m for k in PROBED)


def _gib(v):
    return f"{v} GiB" if isinstance(v, (int, float)) else str(v)


def _c2c(v):
    return f"{v:.0f} ns round trip (bench/c2c, median)" if isinstance(v, (int, float)) else str(v)


def core_name(m):
    """the suffix ': Zen 3' (and so on) for an AMD CPU whose family and model name its core,
    else the empty string (scripts/lib.sh's cpu_kind has the same table; family 25 is Zen 3
    or Zen 4 by model)"""
    try:
        fam, mod = (int(v) for v in str(m.get("cpu_family_model_stepping", "")).split("/")[:2])
    except ValueError:
        return ""
    if "AMD" not in str(m.get("cpu_model", "")):
        return ""
    if fam == 23:
        return ": Zen 2" if mod >= 48 else ": Zen or Zen+"
    if fam == 25:
        return ": Zen 4" if 16 <= mod <= 31 or 96 <= mod <= 127 or 160 <= mod <= 175 else ": Zen 3"
    return ": Zen 5" if fam == 26 else ""


def facts(m, sweep):
    """the machine table's (item, value) rows from machine.json's dict M (collect()'s keys)
    and the sweep's cores SWEEP (partrain.sweep_machine)"""
    return [("CPU", f"{m.get('cpu_model', 'unknown')} (family/model/stepping {m.get('cpu_family_model_stepping', '?')}"
                    f"{core_name(m)})"),
            ("CPU flags", m.get("cpu_flags", "unknown")),
            ("cores", f"{m.get('real_cores_online', '?')} online (sockets/cores/threads "
                      f"{m.get('sockets_cores_threads', '?')}); the sweeps assumed {sweep['cores']} "
                      f"({sweep['cores_from']}), {sweep['nodes']} node(s), up to {sweep['slots']} ranks"),
            ("caches", m.get("caches", "unknown")),
            ("frequency governor", m.get("frequency_governor", "unknown")),
            ("memory", _gib(m.get("memory_gib", "unknown"))),
            ("OS / kernel", f"{m.get('os', 'unknown')}; {m.get('kernel', 'unknown')}"),
            ("compiler", m.get("compiler", "unknown")),
            ("MPI", m.get("mpi", "unknown")),
            ("Python / PyTorch", f"{m.get('python', '?')}; PyTorch {m.get('pytorch', 'unknown')}"),
            ("GPU", m.get("gpu", "unknown")),
            ("core-to-core latency", _c2c(m.get("c2c_latency_ns", "not measured"))),
            ("git commit", m.get("git_commit", "unknown")),
            ("date", m.get("date", "unknown"))]


def one_line(m):
    """the machine in one line: CPU model, family, CPUs (and the sweep's cores when they
    differ), memory, compiler, date"""
    comp = str(m.get("compiler", "unknown compiler"))
    comp = comp.split(" (")[0] + (" " + comp.split()[-1] if "(" in comp else "")
    cpus = m.get("real_cores_online", m.get("real_cores", "?"))
    swept = m.get("cores")
    # CPUs: what the machine has; the sweep's cores (--cores N) said beside them when they differ
    cores = f"{cpus} CPUs" + (f" (the sweeps assumed {swept} cores)" if isinstance(swept, int) and swept != cpus else "")
    return (f"{m.get('cpu_model', 'unknown CPU')} (family/model/stepping {m.get('cpu_family_model_stepping', '?')}"
            f"{core_name(m)}), "
            f"{cores}, {_gib(m.get('memory_gib', '?'))}, {comp}, {m.get('date', 'date unknown')}")
