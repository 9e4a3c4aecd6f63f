#!/usr/bin/env python3
"""
scripts/launch-estimate.py — launches per training step of cuda/cuda, counted by the CPU
emulation's launch counter (CUDA_EMU_STATS, cuda/cuda_emu.h), with and without --graph,
and a paper estimate of the epoch per kernel on an H100-class GPU (docs/cuda.md).

Counting: cuda/cuda-emu trains 2 and then 4 steps of one epoch (tiny images: the count
does not depend on the sizes, only on the layers); launches per step = the difference /
2 steps, so the warm-up and the evaluation cancel out. cuBLAS is not in the emulation:
its count is the tiled kernels' plus one epilogue kernel per product that has one (each
forward product: bias + activation; each delta product: the derivative), as
matmul_cublas() in cuda/cuda.cu launches them.

Estimate per epoch (60,000 images, batch 64, 784-256-128-10, 938 steps):
  plain:  steps x launches x t_launch   +  FLOPs / (peak x efficiency)
  graph:  1 graph launch + steps x nodes x t_node  +  the same FLOPs term
t_launch, t_node, the peak and the efficiencies are the flags below (defaults and their
sources: docs/cuda.md). A paper estimate, not a measurement: scripts/gpu-check.sh measures.

Usage: scripts/launch-estimate.py [--emu cuda/cuda-emu] [--launch-us 2,4] [--node-us 1]
         [--peak-tflops 67] [--eff naive=0.0065,tiled16=0.064,tiled32=0.064,cublas=0.5]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BATCH, TRAIN, LAYERS = 64, 60000, (784, 256, 128, 10)


def count(emu, flags, steps, graph):
    with tempfile.TemporaryDirectory() as t:
        stats = os.path.join(t, "stats")
        cmd = [emu, "--data", "data/mnist", "--image-size", "8", "--train", str(steps * 8), "--batch", "8",
               "--test", "8", "--epochs", "1", "--csv", "none", "--quiet"] + flags + (["--graph"] if graph else [])
        p = subprocess.run(cmd, env=dict(os.environ, CUDA_EMU_STATS=stats), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            sys.exit(f"launch-estimate: {' '.join(cmd)} failed (exit {p.returncode}): {p.stdout.strip()[-300:]}")
        with open(stats) as f:
            return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", f.read())}


def main(argv):
    ap = argparse.ArgumentParser(prog="launch-estimate.py", description=__doc__.split("\n")[1])
    ap.add_argument("--emu", default="cuda/cuda-emu")
    ap.add_argument("--launch-us", default="2,4", help="time per plain launch, a range LO,HI (µs)")
    ap.add_argument("--node-us", type=float, default=1.0, help="time per kernel node of a replayed graph (µs)")
    ap.add_argument("--graph-launch-us", type=float, default=10.0, help="one cudaGraphLaunch (µs)")
    ap.add_argument("--peak-tflops", type=float, default=67.0, help="FP32 peak (H100 SXM, no tensor cores)")
    ap.add_argument("--eff", default="naive=0.0065,tiled16=0.064,tiled32=0.064,cublas=0.5",
                    help="fraction of the peak each kernel's products reach")
    a = ap.parse_args(argv)
    lo, hi = (float(x) for x in a.launch_us.split(","))
    eff = dict((k, float(v)) for k, v in (kv.split("=") for kv in a.eff.split(",")))
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not os.access(a.emu, os.X_OK):
        sys.exit(f"launch-estimate: {a.emu} is not built (make cuda-emu)")
    L = len(LAYERS) - 1
    steps = -(-TRAIN // BATCH)
    flops_step = sum(2 * BATCH * LAYERS[l - 1] * LAYERS[l] * (3 if l > 1 else 2) for l in range(1, L + 1))
    flops = flops_step * TRAIN / BATCH
    rows = []
    for name, flags in (("naive", ["--kernel", "naive"]), ("tiled16", ["--kernel", "tiled", "--tile", "16"]),
                        ("tiled32", ["--kernel", "tiled", "--tile", "32"])):
        plain = [count(a.emu, flags, s, False) for s in (2, 4)]
        graph = [count(a.emu, flags, s, True) for s in (2, 4)]
        per_step = (plain[1]["direct_launches"] - plain[0]["direct_launches"]) / 2
        direct_graph = (graph[1]["direct_launches"] - graph[0]["direct_launches"]) / 2
        nodes = (graph[1]["captured_launches"] - graph[0]["captured_launches"]) / 2
        rows.append((name, per_step, direct_graph, nodes))
    t = rows[1]
    epilogues = L + (L - 1)   # forward products (bias + activation) and delta products (derivative)
    rows.append(("cublas", t[1] + epilogues, t[2], t[3] + epilogues))
    print(f"MLP {'-'.join(map(str, LAYERS))}, batch {BATCH}, {TRAIN:,} images: {steps} steps per epoch, "
          f"{flops / 1e9:.1f} GFLOP per epoch ({flops_step / 1e6:.1f} MFLOP per step)")
    print(f"assumed: plain launch {lo:g}-{hi:g} µs, graph node {a.node_us:g} µs, graph launch "
          f"{a.graph_launch_us:g} µs, FP32 peak {a.peak_tflops:g} TFLOP/s x efficiency per kernel")
    print()
    print("| kernel | launches per step, plain | per step, --graph (direct) | graph nodes per step "
          "| launches per epoch, plain | compute ms (efficiency) | epoch ms, plain | epoch ms, --graph |")
    print("|---|---|---|---|---|---|---|---|")
    for name, ps, dg, nodes in rows:
        comp = flops / (a.peak_tflops * 1e12 * eff[name]) * 1e3
        plo, phi = comp + steps * ps * lo * 1e-3, comp + steps * ps * hi * 1e-3
        g = comp + a.graph_launch_us * 1e-3 + steps * nodes * a.node_us * 1e-3
        print(f"| {name} | {ps:g} | {dg:g} | {nodes:g} | {steps * ps:,.0f} | {comp:.1f} ({eff[name]:g}) "
              f"| {plo:.0f}-{phi:.0f} | {g:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
