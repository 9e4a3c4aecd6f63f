#!/usr/bin/env python3
"""scripts/checkpoint.py — what a partrain checkpoint (--checkpoint FILE) holds.

    scripts/checkpoint.py FILE            configuration, epochs done, seconds, loss and
                                          accuracy per epoch, SHA-256 of the parameters
    scripts/checkpoint.py --params FILE   the parameters' SHA-256 alone (two runs that
                                          should end with the same bits print the same)

The layout is common/checkpoint.h's (format version 2). Exit status 2 for a file that is not a whole
checkpoint (the trainers' --resume says why in more detail).
"""
import hashlib
import struct
import sys
import zlib


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"PARTCKPT":
        raise ValueError("not a partrain checkpoint (no PARTCKPT header)")
    if len(data) < 16:
        raise ValueError("truncated")
    version, config_len = struct.unpack_from("<II", data, 8)
    at = 16 + config_len
    if version != 2:
        raise ValueError(f"checkpoint format version {version}; this script reads version 2"
                         + (" (an older file, without the data's hash)" if version < 2 else ""))
    if len(data) < at + 40:
        raise ValueError("truncated")
    # the configuration holds the data directory's name as the file system spells it:
    # any bytes, not necessarily UTF-8
    config = data[16:at].decode("utf-8", errors="backslashreplace")
    _hash, data_hash, done, n_series, seconds, floats = struct.unpack_from("<QQIIdQ", data, at)
    at += 40
    end = at + 4 * floats + 8 * n_series * done
    if len(data) != end + 4:
        raise ValueError(f"{len(data)} bytes, the header promises {end + 4}")
    if zlib.crc32(data[:end]) != struct.unpack_from("<I", data, end)[0]:
        raise ValueError("corrupted (checksum mismatch)")
    params = data[at:at + 4 * floats]
    series = [struct.unpack_from(f"<{done}d", data, at + 4 * floats + 8 * done * k) for k in range(n_series)]
    return dict(config=config, data_hash=data_hash, epochs_done=done, seconds=seconds, floats=floats,
                params_sha256=hashlib.sha256(params).hexdigest(), series=series)


def main(argv):
    params_only = "--params" in argv
    files = [a for a in argv if a != "--params"]
    if len(files) != 1 or any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0 if any(a in ("-h", "--help") for a in argv) else 2
    try:
        c = read(files[0])
    except (OSError, ValueError, struct.error) as e:
        print(f"checkpoint.py: {files[0]}: {e}", file=sys.stderr)
        return 2
    if params_only:
        print(c["params_sha256"])
        return 0
    print(f"configuration: {c['config']}")
    print(f"data hash:     {c['data_hash']:016x}")
    print(f"epochs done:   {c['epochs_done']} ({c['seconds']:.3f} s of training)")
    print(f"parameters:    {c['floats']} floats (padding included), sha256 {c['params_sha256']}")
    if len(c["series"]) >= 2:
        for e, (loss, acc) in enumerate(zip(c["series"][0], c["series"][1]), 1):
            print(f"  epoch {e}: loss {loss:.6f}  test acc {acc:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
