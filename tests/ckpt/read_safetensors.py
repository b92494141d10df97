#!/usr/bin/env python3
# Independent safetensors reader for the C++ round-trip test: standard library only (json,
# struct), written from the format's documentation rather than from genesis's code. Prints a
# JSON list of {name, dtype, shape, sum} in header order; sums are taken in float64. A file with
# bytes past its last tensor fails.
import json
import struct
import sys

FORMATS = {"F32": ("f", 4), "F16": ("e", 2), "BF16": ("H", 2), "I32": ("i", 4),
           "I64": ("q", 8), "BOOL": ("B", 1)}

with open(sys.argv[1], "rb") as f:
    blob = f.read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
# The format has no room for bytes past the last tensor (the safetensors library refuses them):
# a writer that pads its last block must cut the padding off.
ends = [info["data_offsets"][1] for name, info in header.items() if name != "__metadata__"]
if len(data) != max(ends, default=0):
    sys.exit("data section of %d bytes, but the tensors end at %d" % (len(data), max(ends, default=0)))
out = []
for name, info in header.items():
    if name == "__metadata__":
        continue
    code, size = FORMATS[info["dtype"]]
    begin, end = info["data_offsets"]
    values = struct.unpack("<%d%s" % ((end - begin) // size, code), data[begin:end])
    if info["dtype"] == "BF16":  # bf16 is the top half of an f32
        values = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in values]
    out.append({"name": name, "dtype": info["dtype"], "shape": info["shape"],
                "sum": float(sum(values))})
print(json.dumps({"metadata": header.get("__metadata__", {}), "tensors": out}))
