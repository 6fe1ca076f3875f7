"""A reader and writer of Megatron's indexed data set ("MMIDIDX", version 1) written from the
format's description alone, with numpy: the independent side of conveyor's tests.

  megatron_indexed.py read PREFIX
      prints {"dtype": CODE, "documents": [[[token, ...] per sequence] per document]}
  megatron_indexed.py write PREFIX JSON DTYPE_CODE
      writes PREFIX.bin and PREFIX.idx from a JSON file {"documents": [...]} as above
  megatron_indexed.py random PREFIX MEGABYTES
      writes a data set of about MEGABYTES of random uint16 tokens below 256, in documents
      of 100 to 4000 tokens (for benchmarks)
"""
import json
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
          7: np.float32, 8: np.uint16}


def read(prefix):
    with open(prefix + ".idx", "rb") as f:
        assert f.read(9) == MAGIC, "magic"
        (version,) = struct.unpack("<Q", f.read(8))
        assert version == 1, version
        (code,) = struct.unpack("<B", f.read(1))
        (sequences,) = struct.unpack("<Q", f.read(8))
        (indices,) = struct.unpack("<Q", f.read(8))
        lengths = np.frombuffer(f.read(4 * sequences), dtype="<i4")
        pointers = np.frombuffer(f.read(8 * sequences), dtype="<i8")
        documents = np.frombuffer(f.read(8 * indices), dtype="<i8")
        assert f.read() == b"", "trailing bytes"
    dtype = np.dtype(DTYPES[code])
    tokens = np.fromfile(prefix + ".bin", dtype=dtype)
    def sequence(i):
        start = int(pointers[i]) // dtype.itemsize
        return [int(t) for t in tokens[start:start + int(lengths[i])]]
    return {"dtype": code,
            "documents": [[sequence(i) for i in range(int(documents[j]), int(documents[j + 1]))]
                          for j in range(len(documents) - 1)]}


def write(prefix, documents, code):
    dtype = np.dtype(DTYPES[code])
    lengths, pointers, starts = [], [], [0]
    with open(prefix + ".bin", "wb") as f:
        offset = 0
        for document in documents:
            for sequence in document:
                data = np.array(sequence, dtype=dtype)
                f.write(data.tobytes())
                lengths.append(len(sequence))
                pointers.append(offset)
                offset += data.nbytes
            starts.append(len(lengths))
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(starts)))
        f.write(np.array(lengths, dtype="<i4").tobytes())
        f.write(np.array(pointers, dtype="<i8").tobytes())
        f.write(np.array(starts, dtype="<i8").tobytes())


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
    if sys.argv[1] == "random":
        random(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1] == "read":
        print(json.dumps(read(sys.argv[2])))
    else:
        with open(sys.argv[3]) as f:
            write(sys.argv[2], json.load(f)["documents"], int(sys.argv[4]))
