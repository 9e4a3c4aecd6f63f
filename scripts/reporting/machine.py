"""
scripts/reporting/machine.py — the machine table of REPORT.md: every fact probed now, each
probe with a timeout, an absent tool named instead of failing.
"""

import os
import shutil
import subprocess
import sys

import partrain


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
    py = partrain.python_interpreter()          # the benchmarks' interpreter (scripts/lib.sh)
    py = py if os.access(py, os.X_OK) else sys.executable
    pyver = probe([py, "-c", "import sys; print(sys.version.split()[0])"])
    torch = probe([py, "-c", "import torch; print(torch.__version__)"], timeout=60)
    facts.append(("Python / PyTorch", f"{py} {pyver or '?'}; PyTorch {torch or 'not installed'}"))
    tools = []
    for name, cmd in (("hyperfine", ["hyperfine", "--version"]), ("gnuplot", ["gnuplot", "--version"])):
        tools.append(probe(cmd) or f"{name} not installed")
    facts.append(("tools", "; ".join(tools)))
    return facts
