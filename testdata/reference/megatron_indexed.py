"""Writes Megatron's indexed data set ("MMIDIDX", version 1) of random tokens with numpy alone,
for bench/data_size (run under Debian's python3; the tests check conveyor's files against
Megatron-Core itself: megatron_core_indexed.py).

  megatron_indexed.py random PREFIX MEGABYTES
      writes a data set of about MEGABYTES of random uint16 tokens below 256, in documents
      of 100 to 4000 tokens (for benchmarks)
"""
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"


def random(prefix, megabytes):
    rng = np.random.default_rng(0)
    tokens = int(megabytes * 1e6) // 2
    lengths = rng.integers(100, 4001, tokens // 100 + 1)
    cut = int(np.searchsorted(np.cumsum(lengths), tokens))
    lengths = lengths[:cut + 1]
    lengths[-1] -= int(lengths.sum()) - tokens
    with open(prefix + ".bin", "wb") as f:
        for start in range(0, tokens, 1 << 26):
            f.write(rng.integers(0, 256, min(1 << 26, tokens - start), dtype=np.uint16).tobytes())
    lengths = np.array(lengths, dtype="<i4")
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1], dtype="<i8") * 2]).astype("<i8")
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC + struct.pack("<Q", 1) + struct.pack("<B", 8))
        f.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(lengths) + 1))
        f.write(lengths.tobytes() + pointers.tobytes())
        f.write(np.arange(len(lengths) + 1, dtype="<i8").tobytes())


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "random":
        sys.exit("usage: megatron_indexed.py random PREFIX MEGABYTES")
    random(sys.argv[2], float(sys.argv[3]))
