#!/usr/bin/python3
"""
bench/torch_mlp.py — the partrain MLP in PyTorch: the user's obvious alternative,
written fairly and fast, for the serial-vs-torch benchmark (bench/serial-vs-torch.sh).

Same model, data, flags, progress lines and CSV row schema as the C trainers
(common/options.h, common/results.h):

  * model: MLP in-H1-H2-...-10 (default 784-256-128-10); He-normal (fan-in) init
    for the hidden layers, Xavier-uniform for the output layer, zero biases;
    ReLU (or sigmoid / leaky-ReLU 0.01); softmax + cross-entropy, loss = mean over
    the batch; plain mini-batch SGD (no momentum, no weight decay).
  * data: the IDX files under --data DIR (train-images-idx3-ubyte, ... raw or gzip;
    gzip is detected from the content), read with gzip+numpy, converted once to a
    float32 torch tensor with pixel/255 in [0,1]; --train/--test N take the first N.
  * per epoch: torch.randperm with a torch.Generator seeded from --seed, batches
    gathered with x[idx] (the last batch may be short), zero_grad(set_to_none=True),
    forward, backward, step. The epoch time (time.perf_counter) covers exactly
    that training loop — the shuffle included, the test evaluation (no_grad)
    excluded. Loss and train accuracy are the running means over the epoch's
    batches, as the C trainers report them.
  * threads: torch.set_num_threads(T). The BLAS fixes its thread count when it is
    loaded, so the script refuses to run (exit 2) unless OMP_NUM_THREADS,
    OPENBLAS_NUM_THREADS and MKL_NUM_THREADS are all set to T in the environment.
  * CSV: one row per run appended to --csv under fcntl.flock, header written when
    the file is new; program "pytorch", variant "torch-<version>"; gflops uses the
    C trainers' FLOP count (see model_flops_per_sample()).

--model cnn is seed report 003's CNN, the model of cnn/cnn.c: Conv2d(1, F, 3)
(--filters F, default 8), ReLU, MaxPool2d(2), Flatten, Linear(F*P*P, 10) with
P = (S-2)//2; the data tensor stays (N, S*S) and the model unflattens it. Its init
follows the C trainer's scheme (He-normal conv weights, fan_in 9; Xavier-uniform
dense weights; zero biases), not its random values (torch's generator). --hidden
does not apply to it (refused) and --activation must be relu. The FLOP count is the
C trainer's: forward + weight gradients of both layers, the input gradient of the
dense layer only. A model is added by writing a builder in MODELS and a FLOP count
in model_flops_per_sample().

Example (one pinned core, as the benchmark runs it):
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 \\
      OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
      taskset -c 0 /usr/bin/python3 bench/torch_mlp.py --data data/fashion --batch 64 --epochs 4
"""

import argparse
import fcntl
import gzip
import math
import os
import re
import socket
import statistics
import sys
import time

import numpy as np

PROG = "torch_mlp.py"

# Must equal RESULTS_HEADER in common/results.h (the one CSV schema of partrain).
RESULTS_HEADER = (
    "run_id,program,variant,ranks,threads,omp_wait_policy,dataset,image_size,"
    "train_n,test_n,hidden,activation,batch,epochs,lr,lr_schedule,seed,"
    "epoch_seconds_median,total_seconds,comm_seconds,sync_seconds,"
    "samples_per_second,gflops,final_train_loss,test_accuracy,"
    "target_accuracy,epochs_to_target,seconds_to_target,"
    "train_loss_curve,test_acc_curve,epoch_seconds,host,timestamp"
)

THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
ACTIVATIONS = ("relu", "sigmoid", "leaky-relu")
LEAKY_RELU_SLOPE = 0.01
CLASSES = 10


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


# ----------------------------------------------------------------------------- flags

def positive_int(flag, allow_zero=False):
    def parse(s):
        try:
            v = int(s, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: '{s}'")
        if v < 0 or (v == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be {'>= 0' if allow_zero else '> 0'}: '{s}'")
        return v
    return parse


def parse_hidden(s):
    try:
        sizes = [int(t, 10) for t in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of sizes: '{s}'")
    if not sizes or any(v <= 0 for v in sizes) or len(sizes) > 8:
        raise argparse.ArgumentTypeError(f"1..8 positive sizes expected: '{s}'")
    return sizes


def parse_batch(s):
    if s == "full":
        return 0
    return positive_int("--batch")(s)


def parse_lr(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: '{s}'")
    if not (v > 0 and v < 1e6):
        raise argparse.ArgumentTypeError(f"must be > 0: '{s}'")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="The partrain MLP in PyTorch (same flags, progress lines and CSV row as the C trainers).")
    p.add_argument("--data", default="data/fashion", metavar="DIR", help="IDX data directory (default data/fashion)")
    p.add_argument("--train", type=positive_int("--train", True), default=0, metavar="N",
                   help="use the first N training samples (0: all)")
    p.add_argument("--test", type=positive_int("--test", True), default=0, metavar="N",
                   help="use the first N test samples (0: all)")
    p.add_argument("--image-size", type=positive_int("--image-size", True), default=0, metavar="S",
                   help="bilinear resample to S x S (0: the files' own size)")
    p.add_argument("--hidden", type=parse_hidden, default=None, metavar="H1,H2",
                   help="hidden layer sizes (default 256,128; mlp only)")
    p.add_argument("--activation", choices=ACTIVATIONS, default="relu")
    p.add_argument("--batch", type=parse_batch, default=64, metavar="N|full", help="mini-batch size (default 64)")
    p.add_argument("--epochs", type=positive_int("--epochs"), default=5, metavar="E", help="epochs (default 5)")
    p.add_argument("--lr", type=parse_lr, default=0.01, help="SGD learning rate (default 0.01)")
    p.add_argument("--seed", type=positive_int("--seed", True), default=42, help="seed (default 42)")
    p.add_argument("--threads", type=positive_int("--threads"), default=1, metavar="T",
                   help="torch threads; OMP/OPENBLAS/MKL_NUM_THREADS must equal T (default 1)")
    p.add_argument("--csv", default="results/runs.csv", metavar="FILE|none",
                   help="append one result row here (default results/runs.csv)")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    p.add_argument("--model", choices=sorted(MODELS), default="mlp",
                   help="mlp (default) or cnn (seed report 003's CNN, as cnn/cnn.c)")
    p.add_argument("--filters", type=positive_int("--filters"), default=8, metavar="F",
                   help="--model cnn: 3x3 convolution filters (default 8)")
    p.add_argument("--gather", choices=("batch", "epoch"), default="batch",
                   help="shuffle by gathering each batch x[idx] (default; measured faster: "
                        "~30-50 ms/epoch for 60k) or by one pre-shuffled copy per epoch, then "
                        "contiguous slices (~130 ms/epoch for the copy); both are timed")
    args = p.parse_args(argv)
    if args.model == "cnn":
        if args.hidden is not None:
            p.error("--hidden does not apply to --model cnn (its sizes follow --filters and --image-size)")
        if args.activation != "relu":
            p.error("--model cnn uses relu only")
    if args.hidden is None:
        args.hidden = [256, 128]
    return args


def check_schema():
    """Refuse to run when common/results.h (next to this script's parent) has a
    different RESULTS_HEADER: the rows would not fit the C trainers' CSVs."""
    h = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "results.h")
    try:
        with open(h) as f:
            text = f.read()
    except OSError:
        return  # the script was copied elsewhere: trust the built-in copy
    m = re.search(r"#define\s+RESULTS_HEADER((?:.*\\\n)*.*)", text)
    if m and "".join(re.findall(r'"([^"]*)"', m.group(1))) != RESULTS_HEADER:
        die(f"RESULTS_HEADER in {os.path.normpath(h)} differs from this script's copy; update {PROG}", 1)


def check_thread_env(threads):
    """The BLAS/OpenMP runtimes read their thread counts when loaded: insist on them."""
    bad = [f"{k}={os.environ[k]!r}" if k in os.environ else f"{k} unset"
           for k in THREAD_ENV if os.environ.get(k) != str(threads)]
    if bad:
        want = " ".join(f"{k}={threads}" for k in THREAD_ENV)
        die(f"--threads {threads} needs {want} in the environment before start "
            f"(the BLAS fixes its thread count at import); found: {', '.join(bad)}")


# ----------------------------------------------------------------------------- data

def find_idx(directory, prefix, kind):
    """Path of <prefix>-<kind>-idx?-ubyte[.gz] (or the '.idx?-ubyte' spelling)."""
    dim = 3 if kind == "images" else 1
    names = [f"{prefix}-{kind}-idx{dim}-ubyte", f"{prefix}-{kind}.idx{dim}-ubyte"]
    for name in names:
        for suffix in ("", ".gz"):
            path = os.path.join(directory, name + suffix)
            if os.path.isfile(path):
                return path
    die(f"{directory}: no {names[0]}[.gz] (run scripts/get-data.sh?)")


def read_idx(path, expect_dims):
    """The IDX array in path as uint8 numpy, header validated; gzip detected by content."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            die(f"{path}: bad gzip data: {e}")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != expect_dims:
        die(f"{path}: not an IDX file of unsigned bytes with {expect_dims} dimension(s)")
    hdr = 4 + 4 * expect_dims
    if len(raw) < hdr:
        die(f"{path}: truncated header")
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(expect_dims)]
    count = int(np.prod(dims, dtype=np.int64))
    if len(raw) - hdr != count:
        die(f"{path}: header promises {count} bytes of data, file has {len(raw) - hdr}")
    return np.frombuffer(raw, dtype=np.uint8, offset=hdr).reshape(dims)


def load_split(torch, directory, prefix, limit, side):
    images = read_idx(find_idx(directory, prefix, "images"), 3)
    labels = read_idx(find_idx(directory, prefix, "labels"), 1)
    if images.shape[0] != labels.shape[0]:
        die(f"{directory}: {prefix}: {images.shape[0]} images but {labels.shape[0]} labels")
    if images.shape[1] != images.shape[2]:
        die(f"{directory}: {prefix}: images are {images.shape[1]}x{images.shape[2]}, not square")
    if labels.size and labels.max() >= CLASSES:
        die(f"{directory}: {prefix}: label {labels.max()} out of range 0..9")
    n = images.shape[0] if limit == 0 else limit
    if n > images.shape[0]:
        die(f"{directory}: {prefix}: {n} samples asked for, the file has {images.shape[0]}")
    x = torch.from_numpy(images[:n].astype(np.float32) / np.float32(255.0))
    if side and side != x.shape[1]:
        x = torch.nn.functional.interpolate(x.unsqueeze(1), size=(side, side), mode="bilinear",
                                            align_corners=False).squeeze(1)
    x = x.reshape(n, -1).contiguous()
    y = torch.from_numpy(labels[:n].astype(np.int64))
    return x, y, x.shape[1]


# ----------------------------------------------------------------------------- models

def build_mlp(torch, args, features):
    nn = torch.nn
    act = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid,
           "leaky-relu": lambda: nn.LeakyReLU(LEAKY_RELU_SLOPE)}[args.activation]
    sizes = [features] + args.hidden + [CLASSES]
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        lin = nn.Linear(fan_in, fan_out)
        if i < len(sizes) - 2:
            nn.init.kaiming_normal_(lin.weight, mode="fan_in", nonlinearity="relu")  # He: sqrt(2/in)
        else:
            nn.init.xavier_uniform_(lin.weight)
        nn.init.zeros_(lin.bias)
        layers += [lin, act()] if i < len(sizes) - 2 else [lin]
    return nn.Sequential(*layers)


def cnn_shape(args, features):
    """(S, F, C, P, dense inputs) of the CNN on S x S images"""
    side = int(round(features ** 0.5))
    conv = side - 2
    pool = conv // 2
    return side, args.filters, conv, pool, args.filters * pool * pool


def build_cnn(torch, args, features):
    nn = torch.nn
    side, filters, conv, pool, dense_in = cnn_shape(args, features)
    if pool < 1:
        die(f"{side}x{side} images are too small for the CNN (at least 4x4)")
    conv2d = nn.Conv2d(1, filters, 3)
    nn.init.kaiming_normal_(conv2d.weight, mode="fan_in", nonlinearity="relu")  # He: sqrt(2/9)
    nn.init.zeros_(conv2d.bias)
    dense = nn.Linear(dense_in, CLASSES)
    nn.init.xavier_uniform_(dense.weight)
    nn.init.zeros_(dense.bias)
    model = nn.Sequential(nn.Unflatten(1, (1, side, side)), conv2d, nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), dense)
    # the C trainer's count (cnn_flops_per_sample): forward and weight gradient of both
    # layers, input gradient of the dense layer only (the conv layer is the first)
    model.partrain_flops = 2 * (2 * 9 * filters * conv * conv) + 3 * (2 * dense_in * CLASSES)
    return model


MODELS = {"mlp": build_mlp, "cnn": build_cnn}


def model_flops_per_sample(torch, model):
    """Training FLOP per sample, counted as the C trainers count them:
    forward 2*sum(in*out), backward 2*sum(in*out) for the weight gradients plus
    2*sum(in*out) over all layers but the first for the input gradients."""
    if hasattr(model, "partrain_flops"):
        return model.partrain_flops
    dense = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if len(dense) != len([m for m in model.modules() if len(list(m.parameters(recurse=False)))]):
        raise NotImplementedError("FLOP count only for all-Linear models so far")
    macs = [m.in_features * m.out_features for m in dense]
    return 2 * sum(macs) + 2 * sum(macs) + 2 * sum(macs[1:])


# ----------------------------------------------------------------------------- training

def train_epoch(torch, model, opt, x, y, batch, gen, gather):
    """One epoch of SGD; returns (mean loss, train accuracy %) over the epoch's batches."""
    F = torch.nn.functional
    n = x.shape[0]
    perm = torch.randperm(n, generator=gen)
    if gather == "epoch":
        x, y = x[perm], y[perm]
    loss_sum, correct = 0.0, 0
    model.train()
    for s in range(0, n, batch):
        if gather == "epoch":
            xb, yb = x[s:s + batch], y[s:s + batch]
        else:
            idx = perm[s:s + batch]
            xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        loss.backward()
        opt.step()
        # running metrics; .item() is the cheapest way on CPU (measured: ~10 us/batch,
        # vs ~18 us for accumulating into 0-d tensors)
        loss_sum += loss.item() * yb.shape[0]
        correct += (logits.detach().argmax(1) == yb).sum().item()
    return loss_sum / n, 100.0 * correct / n


def accuracy(torch, model, x, y, chunk=10000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, x.shape[0], chunk):
            correct += (model(x[s:s + chunk]).argmax(1) == y[s:s + chunk]).sum().item()
    return 100.0 * correct / max(1, x.shape[0])


# ----------------------------------------------------------------------------- CSV

def csv_text(v):
    """Text fields never contain the separators (as common/results.c: ',', '"', newlines -> '_')."""
    return "".join("_" if c in ',"\n\r' else c for c in str(v))


def results_append(path, fields):
    """Append one row to path under an exclusive flock, in one write; header when the
    file is new. A file whose first line is not RESULTS_HEADER is refused (nothing
    written). Mirrors results_append() in common/results.c."""
    if path in ("", "none"):
        return
    assert len(fields) == len(RESULTS_HEADER.split(","))
    row = ",".join(fields) + "\n"
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    header = (RESULTS_HEADER + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, len(header), 0) != header:
            die(f"{path}: existing file does not start with this version's CSV header; "
                f"move it away or pass --csv NEW_FILE", 1)
        data = (header if size == 0 else b"") + row.encode()
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        except OSError as e:
            os.ftruncate(fd, size)
            die(f"{path}: write failed: {e.strerror} (file restored to its previous length)", 1)
    finally:
        os.close(fd)   # releases the lock


# ----------------------------------------------------------------------------- main

def main(argv):
    args = parse_args(argv)
    check_thread_env(args.threads)   # before torch (and its BLAS) is imported
    check_schema()

    import torch
    torch.set_num_threads(args.threads)

    x_train, y_train, features = load_split(torch, args.data, "train", args.train, args.image_size)
    x_test, y_test, _ = load_split(torch, args.data, "t10k", args.test, args.image_size)
    side = int(round(features ** 0.5))
    n = x_train.shape[0]
    batch = n if args.batch == 0 else args.batch
    if batch > n:
        die(f"--batch {batch} is larger than the {n} training samples")

    torch.manual_seed(args.seed)
    model = MODELS[args.model](torch, args, features)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.0, weight_decay=0.0)
    flop_per_epoch = model_flops_per_sample(torch, model) * n
    gen = torch.Generator().manual_seed(args.seed)
    variant = f"torch-{torch.__version__}"
    n_params = sum(p.numel() for p in model.parameters())
    if args.model == "cnn":
        S, F, C, P, dense_in = cnn_shape(args, features)
        desc = (f"CNN {S}x{S}x1 -conv {F}x3x3-> {C}x{C}x{F} -relu, maxpool 2x2-> {P}x{P}x{F} = {dense_in} "
                f"-dense-> {CLASSES}")
        layers = f"conv{F}"
    else:
        desc = f"{args.activation} MLP " + "-".join(map(str, [features] + args.hidden + [CLASSES]))
        layers = "x".join(map(str, args.hidden))
    print(f"pytorch: {desc} ({n_params} parameters), {args.data}: {n} train / "
          f"{x_test.shape[0]} test, {side}x{side}, batch {batch}, lr {args.lr:g}, seed {args.seed}, "
          f"{variant}, threads {args.threads}", flush=True)

    losses, accs, times = [], [], []
    t_start = time.perf_counter()
    for e in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        loss, train_acc = train_epoch(torch, model, opt, x_train, y_train, batch, gen, args.gather)
        dt = time.perf_counter() - t0
        if not math.isfinite(loss):
            die(f"training diverged at epoch {e} (loss {loss:g}); lower --lr", 1)
        test_acc = accuracy(torch, model, x_test, y_test)
        losses.append(loss); accs.append(test_acc); times.append(dt)
        if not args.quiet:
            print(f"epoch {e}/{args.epochs}  loss {loss:.6f}  train_acc {train_acc:.2f}%  "
                  f"test_acc {test_acc:.2f}%  time {dt:.3f} s  {n / dt / 1e3:.1f}k samples/s",
                  flush=True)
    total = time.perf_counter() - t_start

    med = statistics.median(times[1:] if len(times) > 1 else times)
    sps = n / med
    gflops = flop_per_epoch / med / 1e9

    # Formats as common/results.c writes them.
    host = socket.gethostname()
    now = time.time()
    g17 = lambda v: f"{v:.17g}"
    fields = [
        csv_text(f"{host}-{int(now)}-{os.getpid()}"),                   # run_id
        "pytorch", csv_text(variant), "1", str(args.threads),
        csv_text(os.environ.get("OMP_WAIT_POLICY", "")),
        csv_text(os.path.basename(os.path.normpath(args.data))), str(side),
        str(n), str(x_test.shape[0]), layers, args.activation,
        str(batch), str(args.epochs), f"{args.lr:.9g}", "none", str(args.seed),
        f"{med:.6f}", f"{total:.6f}", f"{0:.6f}", f"{0:.6f}",
        f"{sps:.1f}", f"{gflops:.2f}", g17(losses[-1]), f"{accs[-1]:.4f}",
        "", "", "",                                                      # no --target-accuracy here
        ";".join(map(g17, losses)), ";".join(f"{v:.4f}" for v in accs),
        ";".join(f"{v:.6f}" for v in times),
        csv_text(host), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    ]
    results_append(args.csv, fields)
    print(f"pytorch: {variant} | {args.epochs} epochs | epoch median {med:.3f} s | {sps / 1e3:.1f}k samples/s | "
          f"{gflops:.1f} GFLOP/s | loss {losses[-1]:.4f} | test acc {accs[-1]:.2f}% | "
          f"csv {args.csv if args.csv != 'none' else '(none)'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
