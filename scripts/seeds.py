"""
scripts/seeds.py — the numbers the five seed reports (/work/shared/seeds 000..004)
published, in one place: scripts/report.py (scripts/reporting/), scripts/cnn_tables.py
and scripts/bench_tables.py (bench/hybrid-grid.sh's Table 4) print them beside ours from
here, never from a literal of their own.
"""

# 000: Pilarski (Georgia Tech), "MNIST With Parallelism": MLP on MNIST in C, OpenMP with 4
# threads, tiled CUDA, OpenMPI over 4 machines each on a quarter of the 60,000 images
SEED000 = {
    # Table 1: (key, configuration, time per epoch in s, MPI cost in s or None)
    "table1": [("cuda", "CUDA only", 0.23, None), ("omp", "OpenMP only (4 threads)", 1.24, None),
               ("naive", "Naive (no OpenMP or CUDA)", 2.56, None), ("cuda_mpi", "CUDA + MPI", 0.52, 0.29),
               ("omp_mpi", "OpenMP + MPI (4 threads)", 1.60, 0.36), ("naive_mpi", "Naive + MPI", 2.93, 0.37)],
    "threads": 4,                 # OpenMP threads of its OpenMP rows
    "machines": 4,                # MPI ranks, one per machine
    "images_per_machine": 15000,  # a quarter of MNIST's 60,000 training images
    # test accuracy (%): its unoptimized model on all of MNIST, one machine on a quarter,
    # with MPI, after this many epochs
    "acc_baseline": 95.3, "acc_quarter": 96.8, "acc_mpi": 97.4, "epochs": 100,
    "figure6_peak_threads": 8,    # Figure 6: time fell up to 8 threads, rose above
}


def seed000_row(key):
    """(epoch seconds, MPI cost seconds or None) of a Table 1 configuration"""
    return next((t, c) for k, _, t, c in SEED000["table1"] if k == key)


# 001: "Parallelization of Deep Learning Models" (master's assignment): Table 4, expected
# speedup ranges (low, high) per (implementation, ranks, threads)
SEED001_EXPECTED = {
    ("OpenMP", 1, 4): (2.5, 3.5), ("OpenMP", 1, 8): (3.5, 5.0), ("MPI", 4, 1): (2.0, 3.0),
    ("MPI", 8, 1): (2.5, 4.0), ("Hybrid", 2, 2): (2.5, 3.5), ("Hybrid", 2, 4): (3.5, 5.5)}

# 002: França Sobreira and Guedes Carneiro (Unicamp), "Distributed Neural Network
# Training": single-layer network, images enlarged to raise the work per sample
SEED002 = {
    "sides": (28, 57, 112),       # image sides: 784, 3,249 and 12,544 inputs
    "figure7_inputs": 3248,       # what its Figure 7 caption says for 57 x 57
    "speedup_cpu": 10,            # about 10x, OpenMP and MPI+OpenMP, one multi-core node
    "speedup_gpu": 4,             # about 4x on the GPU
    "gprof_seconds": 213.9, "gprof_epochs": 100,   # serial at 784 inputs (gprof)
    "nodes": 4,                   # near-linear up to 4 nodes, no numbers published
}

# 003: Senay (Addis Ababa University), "Distributed CNN using OpenMP and MPI": 8 filters
# 3x3, max-pool, dense 1352 -> 10, MNIST 60k/10k, lr 0.01, batch 32 per rank, Apple M4
SEED003 = {
    "serial_seconds": 163.60,       # Table 4: 5 epochs of 60,000 images, serial
    "distributed_seconds": 45.97,   # ... and on 4 ranks
    "ranks": 4, "epochs": 5, "train": 60000, "batch_per_rank": 32, "lr": 0.01,
    # Table 3 (distributed) and Table 5 (serial): (training loss, test accuracy %) per epoch
    "distributed": [(1.0758, 88.19), (0.3996, 90.30), (0.3483, 90.90), (0.3262, 91.29), (0.3118, 91.55)],
    "serial": [(0.5432, 90.52), (0.3061, 91.50), (0.2737, 92.46), (0.2452, 93.21), (0.2174, 93.97)],
}

# 004: Mekbib (Addis Ababa University), "Parallelization of Deep Learning Models": mpi4py
# data parallelism: "nearly 50%" speedup of the parallel model on the CPU, "more than 50%"
# on the GPU, the GPU slower than the CPU overall
SEED004 = {"cpu_speedup": 1.5, "gpu_speedup": 1.5}
