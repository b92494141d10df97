#!/usr/bin/env python3
# Independent reader of an exported safetensors file (json + numpy), written from the format's
# description: 8-byte little-endian header length, JSON header {name: {dtype, shape,
# data_offsets}, "__metadata__": {...}}, then the data. Prints {"metadata", "tensors": [{name,
# dtype, shape, sum, abs_sum}]} with sums in float64, in header order.
import json
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_}

with open(sys.argv[1], "rb") as f:
    blob = f.read()
n = int.from_bytes(blob[:8], "little")
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
tensors = []
for name, info in header.items():
    if name == "__metadata__":
        continue
    begin, end = info["data_offsets"]
    values = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    wide = values.astype(np.float64)
    tensors.append({"name": name, "dtype": info["dtype"], "shape": list(values.shape),
                    "sum": float(wide.sum()), "abs_sum": float(np.abs(wide).sum())})
print(json.dumps({"metadata": header.get("__metadata__", {}), "tensors": tensors}))
