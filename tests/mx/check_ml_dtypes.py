#!/usr/bin/env python3
"""Cross-checks the MX codecs of src/mx/formats.h against ml_dtypes, an implementation written
elsewhere: every code's value, bit for bit, and the rounding of many values inside each element
type's range (ml_dtypes does not saturate like MX, so values beyond the range are tested by the C++
tests only).

usage: check_ml_dtypes.py PATH/TO/mx_codec_dump [--seed N] [--count N]
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import ml_dtypes
except ImportError as missing:
    print(
        f"check_ml_dtypes.py: {missing}; install them with: python3 -m pip install numpy ml_dtypes",
        file=sys.stderr,
    )
    sys.exit(1)

ELEMENT_TYPES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
}
CODE_BITS = {"e4m3": 8, "e5m2": 8, "e2m3": 6, "e3m2": 6, "e2m1": 4}


def run_dump(tool, *args):
    subprocess.run([tool, *args], check=True)


def decoded_by_tool(tool, type_name, workdir):
    path = os.path.join(workdir, f"{type_name}.decoded")
    run_dump(tool, "decode", type_name, path)
    return np.fromfile(path, dtype="<f4")


def same_values(want, got):
    """Bitwise equality, any NaN matching any NaN."""
    both_nan = np.isnan(want) & np.isnan(got)
    return both_nan | (want.view(np.uint32) == got.view(np.uint32))


def report(name, ok, detail_rows):
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        print(f"ok   {name}: {ok.size} values")
        return True
    print(f"FAIL {name}: {bad.size} of {ok.size} differ; first ones:")
    for i in bad[:10]:
        print("     " + detail_rows(i))
    return False


def check_decode(tool, type_name, ml_type, workdir):
    codes = np.arange(1 << CODE_BITS.get(type_name, 8), dtype=np.uint8)
    want = codes.view(ml_type).astype(np.float32)
    got = decoded_by_tool(tool, type_name, workdir)
    if got.size != want.size:
        print(f"FAIL decode {type_name}: {got.size} values written, {want.size} expected")
        return False
    ok = same_values(want, got)
    return report(
        f"decode {type_name}",
        ok,
        lambda i: f"code {codes[i]:#04x}: ml_dtypes {want[i]!r}, mxattn {got[i]!r}",
    )


def values_to_round(type_name, ml_type, rng, count):
    """Values inside [-max, max]: log-uniform magnitudes down past the smallest subnormal, uniform
    values, random f32 bit patterns, every representable value, and every midpoint between
    neighbours with the floats just beside it."""
    finfo = ml_dtypes.finfo(ml_type)
    largest = float(finfo.max)
    smallest = float(finfo.smallest_subnormal)
    codes = np.arange(1 << CODE_BITS[type_name], dtype=np.uint8)
    exact = codes.view(ml_type).astype(np.float32)
    exact = np.unique(exact[np.isfinite(exact) & (exact >= 0)])
    midpoints = ((exact[:-1].astype(np.float64) + exact[1:]) / 2).astype(np.float32)
    below = np.nextafter(midpoints, np.float32(0))
    above = np.nextafter(midpoints, np.float32(np.inf))
    special = np.concatenate([exact, midpoints, below, above, [np.float32(smallest / 2)]])
    special = np.concatenate([special, -special])

    quarter = count // 4
    log_magnitude = rng.uniform(np.log2(smallest) - 4, np.log2(largest), quarter)
    log_uniform = np.exp2(log_magnitude) * rng.choice([-1.0, 1.0], quarter)
    uniform = rng.uniform(-largest, largest, quarter)
    bits = rng.integers(0, 1 << 32, 4 * quarter, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits) & (np.abs(bits) <= largest)][:quarter]
    rest = count - 3 * quarter
    near_subnormals = rng.uniform(-8.0, 8.0, rest) * np.exp2(rng.integers(-3, 3, rest)) * smallest
    values = np.concatenate([special, log_uniform, uniform, bits, near_subnormals])
    values = values.astype(np.float32)
    return values[np.abs(values) <= np.float32(largest)]


def check_encode(tool, type_name, ml_type, rng, count, workdir):
    values = values_to_round(type_name, ml_type, rng, count)
    in_path = os.path.join(workdir, f"{type_name}.values")
    out_path = os.path.join(workdir, f"{type_name}.codes")
    values.astype("<f4").tofile(in_path)
    run_dump(tool, "encode", type_name, in_path, out_path)
    got = np.fromfile(out_path, dtype=np.uint8)
    want = values.astype(ml_type).view(np.uint8)
    if got.size != want.size:
        print(f"FAIL encode {type_name}: {got.size} codes written, {want.size} expected")
        return False
    return report(
        f"encode {type_name}",
        got == want,
        lambda i: f"{values[i]!r} ({values[i:i+1].view(np.uint32)[0]:#010x}): "
        f"ml_dtypes {want[i]:#04x}, mxattn {got[i]:#04x}",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", help="path to the built mx_codec_dump")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--count", type=int, default=200_000, help="random values per type")
    args = parser.parse_args()
    print(f"seed {args.seed}, ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}")
    rng = np.random.default_rng(args.seed)
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for type_name, ml_type in ELEMENT_TYPES.items():
            ok &= check_decode(args.tool, type_name, ml_type, workdir)
            ok &= check_encode(args.tool, type_name, ml_type, rng, args.count, workdir)
        ok &= check_decode(args.tool, "e8m0", ml_dtypes.float8_e8m0fnu, workdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
