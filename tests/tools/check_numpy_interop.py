#!/usr/bin/env python3
"""`mxattn quant` / `mxattn dequant` against NumPy and ml_dtypes: inputs written by np.save (f32,
f16, ml_dtypes bfloat16) are read, the files written load in NumPy, and the dequantized tensor
equals the one decoded here from PREFIX.data.npy and PREFIX.scales.npy with ml_dtypes (the
unpacking of FP6/FP4 and the block layout written out independently of the C++ code).

usage: check_numpy_interop.py PATH/TO/mxattn [--seed N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import ml_dtypes
except ImportError as missing:
    print(
        f"check_numpy_interop.py: {missing}; "
        "install them with: python3 -m pip install numpy ml_dtypes",
        file=sys.stderr,
    )
    sys.exit(1)

ELEMENT_TYPES = {
    "e4m3": (ml_dtypes.float8_e4m3fn, 8),
    "e5m2": (ml_dtypes.float8_e5m2, 8),
    "e2m3": (ml_dtypes.float6_e2m3fn, 6),
    "e3m2": (ml_dtypes.float6_e3m2fn, 6),
    "e2m1": (ml_dtypes.float4_e2m1fn, 4),
}


def unpack_codes(packed, bits, count):
    """Codes of each row: FP6 element k in bits [6k, 6k + 6) of little-endian 24-bit words, FP4
    element 2i in the low nibble."""
    if bits == 8:
        return packed[..., :count]
    if bits == 4:
        codes = np.stack([packed & 0xF, packed >> 4], axis=-1)
    else:
        words = packed.reshape(*packed.shape[:-1], -1, 3).astype(np.uint32)
        word = words[..., 0] | (words[..., 1] << 8) | (words[..., 2] << 16)
        codes = np.stack([(word >> (6 * k)) & 0x3F for k in range(4)], axis=-1).astype(np.uint8)
    return codes.reshape(*packed.shape[:-1], -1)[..., :count]


def decode(prefix):
    with open(prefix + ".json") as f:
        meta = json.load(f)
    ml_type, bits = ELEMENT_TYPES[meta["format"]]
    shape, axis = meta["shape"], meta["axis"]
    data = np.load(prefix + ".data.npy")
    scales = np.load(prefix + ".scales.npy")
    assert data.dtype == np.uint8 and scales.dtype == np.uint8, (data.dtype, scales.dtype)
    values = unpack_codes(data, bits, shape[-1]).view(ml_type).astype(np.float64)
    assert list(values.shape) == shape, (values.shape, shape)
    scale = np.where(scales == 0xFF, np.nan, np.exp2(scales.astype(np.float64) - 127))
    scale = np.repeat(scale, 32, axis=axis).take(np.arange(shape[axis]), axis=axis)
    return (values * scale).astype(np.float32)


def run(tool, *args):
    result = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"mxattn {' '.join(map(str, args))} failed: {result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", help="path to the built mxattn")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"seed {args.seed}")
    rng = np.random.default_rng(args.seed)
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        for in_dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
            shape = (2, 45, 3, 38)  # partial blocks on both axes; FP6/FP4 rows padded
            x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 6, shape))
            x = x.astype(in_dtype)
            x[0, 3, 1, 5] = np.nan
            source = os.path.join(workdir, "x.npy")
            np.save(source, x)
            for fmt in ELEMENT_TYPES:
                for axis in (3, 1):
                    prefix = os.path.join(workdir, "q")
                    out = os.path.join(workdir, "y.npy")
                    run(args.tool, "quant", source, "--format", fmt, "--axis", axis,
                        "--out", prefix)
                    run(args.tool, "dequant", prefix, "--out", out)
                    got = np.load(out)
                    want = decode(prefix)
                    same = got.view(np.uint32) == want.view(np.uint32)
                    same |= np.isnan(got) & np.isnan(want)
                    name = f"{np.dtype(in_dtype).name} {fmt} axis {axis}"
                    if got.dtype != np.float32 or got.shape != x.shape or not same.all():
                        print(f"FAIL {name}: {np.count_nonzero(~same)} values differ")
                        failures += 1
                    else:
                        print(f"ok   {name}")
            out16 = os.path.join(workdir, "y16.npy")
            run(args.tool, "dequant", prefix, "--out", out16, "--dtype", "bf16")
            y16 = np.load(out16).view(ml_dtypes.bfloat16)
            want16 = decode(prefix).astype(ml_dtypes.bfloat16).astype(np.float32)
            if not np.array_equal(y16.astype(np.float32), want16, equal_nan=True):
                print("FAIL bf16 output")
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
