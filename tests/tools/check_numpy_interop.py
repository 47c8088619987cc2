#!/usr/bin/env python3
"""`mxattn quant` / `mxattn dequant` against NumPy and ml_dtypes: inputs written by np.save (f32,
f16, ml_dtypes bfloat16) are read, the files written load in NumPy, and the dequantized tensor
equals the one decoded here from PREFIX.data.npy and PREFIX.scales.npy with ml_dtypes (the
unpacking of FP6/FP4 and the block layout written out independently of the C++ code). And
`--sparse-layout` files written by np.savez: `mxattn plan` shows every (b, h, query block) with
exactly the key blocks the file lists, `mxattn run --verify` passes on them, and bad files exit 2
with a message that says why.

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


def run_status(tool, *args):
    result = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def random_layout(rng, query_blocks, key_blocks):
    """One BSR row set: row_ptr [query_blocks + 1] and the listed key blocks, some rows empty."""
    rows, cols = [0], []
    for _ in range(query_blocks):
        listed = np.sort(rng.choice(key_blocks, size=rng.integers(0, key_blocks + 1), replace=False))
        cols.extend(listed.tolist())
        rows.append(len(cols))
    return rows, cols


def check_sparse_layout(tool, workdir, rng):
    """--sparse-layout: np.savez files (NumPy's default int64 and int32, rank 3 and 1) read as
    written, checked through `mxattn plan`'s per-tile key-tile counts and `mxattn run --verify`."""
    failures = 0
    batch, heads, query_blocks, key_blocks, block = 2, 4, 4, 8, 64
    problem = ["--batch", batch, "--seq-len-q", query_blocks * block, "--seq-len-k",
               key_blocks * block, "--num-heads-q", heads, "--num-heads-kv", 2, "--head-dim-qk",
               64, "--head-dim-v", 64, "--block-q", block, "--block-k", block]
    path = os.path.join(workdir, "layout.npz")
    for dtype, bx, hx in ((np.int64, batch, heads), (np.int32, 1, heads), (np.int64, batch, 1),
                          (np.int64, 0, 0)):
        one = bx == 0  # rank 1: one layout for every (b, h)
        layouts = [[random_layout(rng, query_blocks, key_blocks) for _ in range(max(hx, 1))]
                   for _ in range(max(bx, 1))]
        nnz = max(1, max(len(c) for per_b in layouts for _, c in per_b))
        row_ptr = np.array([[r for r, _ in per_b] for per_b in layouts], dtype=dtype)
        col_idx = np.zeros((max(bx, 1), max(hx, 1), nnz), dtype=dtype)
        for b, per_b in enumerate(layouts):
            for h, (_, c) in enumerate(per_b):
                col_idx[b, h, :len(c)] = c
        if one:
            np.savez(path, row_ptr=row_ptr[0, 0], col_idx=col_idx[0, 0])
        else:
            np.savez(path, row_ptr=row_ptr, col_idx=col_idx)
        name = f"sparse layout {np.dtype(dtype).name} {'rank 1' if one else f'[{bx}, {hx}, n]'}"
        plan = run(tool, "plan", *problem, "--sparse-layout", path, "--max-tiles", 1000)
        seen = 0
        for line in plan.splitlines():
            if not line.startswith("b="):
                continue
            head, rest = line.split(" tile ", 1)
            b = int(head.split()[0][2:])
            h_text = head.split()[1][2:]
            h = 0 if h_text == "*" else int(h_text)
            tile = int(rest.split()[0])
            tiles = int(rest.split(": ", 1)[1].split()[0])
            r, _ = layouts[0 if bx <= 1 else b][0 if hx <= 1 else h]
            if tiles != r[tile + 1] - r[tile]:
                print(f"FAIL {name}: plan b={b} h={h_text} tile {tile}: {tiles} key tiles, "
                      f"the file lists {r[tile + 1] - r[tile]}")
                failures += 1
            seen += 1
        if seen != batch * heads * query_blocks:  # the plan lists every head of a sparse problem
            print(f"FAIL {name}: the plan shows {seen} query tiles")
            failures += 1
        code, out, err = run_status(tool, "run", *problem, "--sparse-layout", path, "--q-format",
                                    "bf16", "--k-format", "e4m3", "--v-format", "e4m3",
                                    "--causal=bottom-right", "--repeat", 1)
        if code != 0 or "result:  PASS" not in out:
            print(f"FAIL {name}: mxattn run exits {code}: {err.strip()}")
            failures += 1
        else:
            print(f"ok   {name}")
    # Files that must be refused, with the reason.
    rows, cols = random_layout(rng, query_blocks, key_blocks)
    bad = {
        "compressed": (lambda p: np.savez_compressed(p, row_ptr=rows, col_idx=cols), "np.savez"),
        "no col_idx": (lambda p: np.savez(p, row_ptr=rows, colidx=cols), "no array 'col_idx'"),
        "int64 past int32": (lambda p: np.savez(p, row_ptr=np.array(rows) + 2**40, col_idx=cols),
                             "does not fit in int32"),
        "float": (lambda p: np.savez(p, row_ptr=np.array(rows, np.float32), col_idx=cols),
                  "index arrays"),
        "rank 2": (lambda p: np.savez(p, row_ptr=np.array([rows]), col_idx=np.array([cols])),
                   "rank 3"),
        "decreasing row_ptr": (lambda p: np.savez(p, row_ptr=[0, 2, 1, 3, 3], col_idx=[0, 1, 2]),
                               "non-decreasing"),
    }
    for what, (write, expect) in bad.items():
        write(path)
        code, _, err = run_status(tool, "run", *problem, "--sparse-layout", path)
        if code != 2 or expect not in err:
            print(f"FAIL sparse layout, {what}: exit {code}, message {err.strip()!r}")
            failures += 1
        else:
            print(f"ok   sparse layout refused: {what}")
    return failures


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
        failures += check_sparse_layout(args.tool, workdir, rng)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
