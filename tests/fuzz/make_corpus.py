#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py — writes the committed seed corpus of the fuzz harnesses.

  tests/fuzz/corpus/idx/NAME       inputs of fuzz_idx.c: a 6-byte header (flags, side,
                                   first, count, image-file length LE16), the image file,
                                   the label file (see fuzz_idx.c for the layout)
  tests/fuzz/corpus/options/NAME   inputs of fuzz_options.c: argv[1..] separated by NUL
  tests/fuzz/corpus/checkpoint/NAME  inputs of fuzz_checkpoint.c: checkpoint files
                                   (common/checkpoint.h's layout) of the harness's run

Small valid and malformed cases, one file each, named after what they are. The output
is deterministic (gzip with mtime 0), so rerunning it changes nothing unless this script
changed. Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import gzip
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES, LABELS = 0x803, 0x801


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def images(n, rows, cols, data=None, magic=IMAGES):
    if data is None:
        data = bytes((i * 37 + 11) & 255 for i in range(n * rows * cols))
    return struct.pack(">IIII", magic, n, rows, cols) + data


def labels(n, data=None, magic=LABELS):
    if data is None:
        data = bytes((i * 3 + 1) % 10 for i in range(n))
    return struct.pack(">II", magic, n) + data


def idx_input(img, lab, gzip_images=False, gzip_labels=False, form=0, side=0, first=0, count=-1, buffer_log=0):
    """buffer_log k: zlib's buffer 16 << k bytes, 7: the loader's own 128 KiB"""
    flags = (1 if gzip_images else 0) | (2 if gzip_labels else 0) | (form << 2) | (buffer_log << 5)
    return struct.pack("<BBbbH", flags, side, first, count, len(img)) + img + lab


def idx_cases():
    img3, lab3 = images(3, 4, 4), labels(3)
    img28 = images(1, 28, 28)
    cases = {
        "valid-raw": idx_input(img3, lab3),
        "valid-harness-gzip": idx_input(img3, lab3, gzip_images=True, gzip_labels=True),
        "valid-gzip-in-input-gz-names": idx_input(gz(img3), gz(lab3), form=1),
        "valid-gzip-images-raw-labels": idx_input(gz(img3), lab3),
        "valid-dot-names": idx_input(img3, lab3, form=2),
        "valid-dot-gz-names": idx_input(gz(img3), gz(lab3), form=3),
        "valid-slice-1-1": idx_input(img3, lab3, first=1, count=1),
        "valid-resample-up-8": idx_input(img3, lab3, side=8),
        "valid-resample-down-2": idx_input(img3, lab3, side=2, gzip_images=True),
        "valid-28x28-to-14": idx_input(img28, labels(1), side=14),
        "valid-28x28-to-32": idx_input(img28, labels(1), side=32, gzip_labels=True),
        "valid-1x1-images": idx_input(images(5, 1, 1), labels(5), side=3),
        "no-label-file": idx_input(img3, lab3, form=4),
        "empty-files": idx_input(b"", b""),
        "truncated-header": idx_input(img3[:10], lab3),
        "truncated-pixels-raw": idx_input(img3[:-5], lab3),
        "truncated-pixels-gzip": idx_input(img3[:-5], lab3, gzip_images=True),
        "truncated-gzip-stream": idx_input(gz(img3)[:-9], lab3),
        "gzip-missing-trailer": idx_input(gz(img3)[:-8], lab3),
        "gzip-missing-trailer-buffer-64": idx_input(gz(img3)[:-8], lab3, buffer_log=2),
        "valid-gzip-loader-buffer": idx_input(gz(img3), gz(lab3), form=1, buffer_log=7),
        "valid-raw-buffer-1024": idx_input(img28, labels(1), buffer_log=6),
        "corrupt-gzip-crc": idx_input(gz(img3)[:-8] + b"\0\0\0\0" + gz(img3)[-4:], lab3),
        "corrupt-gzip-body": idx_input(gz(img3)[:12] + b"\xff\xff\xff" + gz(img3)[15:], lab3),
        "gzip-magic-only": idx_input(b"\x1f\x8b", lab3),
        "trailing-bytes-images": idx_input(img3 + b"xyz", lab3),
        "trailing-bytes-labels-gzip": idx_input(img3, lab3 + b"\0", gzip_labels=True),
        "bad-magic-images": idx_input(images(3, 4, 4, magic=0x801), lab3),
        "bad-magic-labels": idx_input(img3, labels(3, magic=0x803)),
        "labels-as-images": idx_input(lab3, img3),
        "zero-count": idx_input(images(0, 4, 4, data=b""), labels(0, data=b"")),
        "absurd-count": idx_input(images(0x7FFFFFFF, 4, 4, data=b""), labels(0x7FFFFFFF, data=b"")),
        "absurd-dims-zero": idx_input(images(3, 0, 4, data=b""), lab3),
        "absurd-dims-huge": idx_input(images(1, 5000, 5000, data=b""), labels(1)),
        "absurd-dims-max-uint": idx_input(images(1, 0xFFFFFFFF, 0xFFFFFFFF, data=b""), labels(1)),
        "count-mismatch": idx_input(img3, labels(2)),
        "label-10": idx_input(img3, labels(3, data=b"\x01\x0a\x02")),
        "label-255-gzip": idx_input(img3, labels(3, data=b"\x01\x02\xff"), gzip_labels=True),
        "non-square": idx_input(images(2, 2, 3), labels(2)),
        "non-square-resample": idx_input(images(2, 3, 2), labels(2), side=4),
        "slice-past-end": idx_input(img3, lab3, first=3, count=1),
        "slice-negative-first": idx_input(img3, lab3, first=-1, count=1),
        "slice-zero-count": idx_input(img3, lab3, first=0, count=0),
        "multi-member-gzip": idx_input(gz(img3[:16]) + gz(img3[16:]), lab3),
    }
    return cases


def argv(*args):
    return b"\0".join(a.encode() for a in args)


def options_cases():
    return {
        "empty": b"",
        "defaults-quiet": argv("--quiet"),
        "all-common-flags": argv("--data", "data/fashion", "--train", "1000", "--test", "500", "--image-size", "56",
                                 "--hidden", "256,128", "--activation", "sigmoid", "--batch", "64", "--epochs", "3",
                                 "--lr", "0.05", "--seed", "7", "--csv", "none", "--predict", "3", "--quiet"),
        "trainer-flags": argv("--threads", "8", "--accum", "model", "--momentum", "0.9",
                              "--mode", "g-mode-with-a-rather-long-flag-value-number-seven"),
        "batch-full": argv("--batch", "full", "--activation", "leaky-relu"),
        "hidden-eight-layers": argv("--hidden", "1,2,3,4,5,6,7,65536"),
        "seed-max": argv("--seed", "18446744073709551615"),
        "lr-exponent": argv("--lr", "1e-3"),
        "lr-hex-float": argv("--lr", "0x1p-4"),
        "data-trailing-slashes": argv("--data", "/srv/data/mnist///"),
        "data-root": argv("--data", "/"),
        "repeated-flags": argv("--epochs", "1", "--epochs", "100000", "--hidden", "5", "--hidden", "6,7"),
        "bad-seed-negative": argv("--seed", "-1"),
        "bad-seed-too-big": argv("--seed", "18446744073709551616"),
        "bad-seed-space": argv("--seed", " 5"),
        "bad-seed-tab-minus": argv("--seed", "\t-1"),
        "bad-seed-newline": argv("--seed", "\n1"),
        "bad-seed-empty": argv("--seed", ""),
        "bad-hidden-empty-item": argv("--hidden", "1,,2"),
        "bad-hidden-trailing-comma": argv("--hidden", "256,"),
        "bad-hidden-nine-layers": argv("--hidden", "1,2,3,4,5,6,7,8,9"),
        "bad-hidden-zero": argv("--hidden", "0"),
        "bad-hidden-too-big": argv("--hidden", "65537"),
        "bad-hidden-overflow": argv("--hidden", "99999999999999999999999"),
        "bad-lr-zero": argv("--lr", "0"),
        "bad-lr-nan": argv("--lr", "nan"),
        "bad-lr-inf": argv("--lr", "inf"),
        "bad-lr-overflow": argv("--lr", "1e999"),
        "bad-lr-underflow": argv("--lr", "1e-999"),
        "bad-missing-value": argv("--train"),
        "bad-epochs-suffix": argv("--epochs", "1x"),
        "bad-train-overflow": argv("--train", "9223372036854775808"),
        "bad-image-size": argv("--image-size", "1025"),
        "bad-unknown-flag": argv("--bogus"),
        "bad-activation": argv("--activation", "tanh"),
        "bad-accum": argv("--accum", "atomic"),
        "bad-mode-long-list": argv("--mode", "x"),
        "bad-momentum": argv("--momentum", "1.5"),
        "bad-threads": argv("--threads", "0"),
        "bad-data-empty": argv("--data", ""),
        "bad-csv-empty": argv("--csv", ""),
        "bad-predict": argv("--predict", "-1"),
    }


# the configuration fuzz_checkpoint.c's run has (checkpoint_init's text for it)
CKPT_CONFIG = ("program=serial variant=own-gemm ranks=1 threads=1 data=fashion train=100 test=10 "
               "image-size=2 hidden=4 activation=relu batch=64 lr=%.17g seed=42 floats=64" % 0.01)


M64 = 0xFFFFFFFFFFFFFFFF


def data_hash(loaded=(0, 0)):
    """common/idx.c's dataset_loaded_hash() over the per-split hashes (the harness loads
    no data: both 0)"""
    h = 0xcbf29ce484222325
    for w in loaded:   # hash_bytes(), 8 bytes at a time
        h = ((h ^ w) * 0x100000001b3) & M64
        h ^= h >> 29
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & M64
    return h ^ (h >> 33)


def checkpoint(done, config=CKPT_CONFIG, floats=64, series=3, version=2, magic=b"PARTCKPT", dhash=None):
    import zlib
    h = 0xcbf29ce484222325
    for b in config.encode():
        h = ((h ^ b) * 0x100000001b3) & M64
    body = magic + struct.pack("<II", version, len(config)) + config.encode()
    if version >= 2:   # format 2: the loaded data's hash after the configuration's
        body += struct.pack("<QQIIdQ", h, data_hash() if dhash is None else dhash, done, series, 1.5 * done, floats)
    else:
        body += struct.pack("<QIIdQ", h, done, series, 1.5 * done, floats)
    body += struct.pack(f"<{floats}f", *[(i % 7) * 0.125 - 0.25 for i in range(floats)])
    for k in range(series):
        body += struct.pack(f"<{done}d", *[2.0 / (e + 1) + k for e in range(done)])
    return body + struct.pack("<I", zlib.crc32(body))


def checkpoint_cases():
    valid = checkpoint(3)
    bad_crc = bytearray(valid)
    bad_crc[200] ^= 0x40
    return {
        "valid-0-epochs": checkpoint(0),
        "valid-3-epochs": valid,
        "valid-8-epochs": checkpoint(8),
        "too-many-epochs": checkpoint(9),
        "other-config-batch": checkpoint(2, CKPT_CONFIG.replace("batch=64", "batch=32")),
        "other-floats": checkpoint(2, floats=32),
        "other-series": checkpoint(2, series=2),
        "bad-version": checkpoint(1, version=3),
        "old-version-1": checkpoint(1, version=1),
        "other-data": checkpoint(2, dhash=0x0123456789abcdef),
        "bad-magic": checkpoint(1, magic=b"PARTCKPX"),
        "bad-crc": bytes(bad_crc),
        "truncated": valid[:-9],
        "appended": valid + b"x",
        "header-only": valid[:20],
        "empty": b"",
    }


def write(target, cases):
    out = os.path.join(HERE, "corpus", target)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name, data in sorted(cases.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{out}: {len(cases)} files")


if __name__ == "__main__":
    write("idx", idx_cases())
    write("options", options_cases())
    write("checkpoint", checkpoint_cases())
