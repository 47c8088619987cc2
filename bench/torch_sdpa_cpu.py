"""PyTorch's CPU scaled_dot_product_attention at the shapes of bench/cpu_attention.cpp, with the
same thread count, printing the same table columns, so the two run side by side on one machine.

    python bench/torch_sdpa_cpu.py [--threads N] [--reps N] [--case TEXT] [--json FILE]

Decode with an MXFP8 cache has no PyTorch counterpart; bf16 decode is the anchor for both. GQA
decode repeats the KV heads (enable_gqa where this PyTorch has it).
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from bench_util import json_writable, write_json


def cases():
    for dtype in ("f32", "bf16"):
        for causal in (False, True):
            yield {
                "name": f"prefill {dtype}" + (" causal" if causal else ""),
                "kind": "prefill",
                "batch": 1, "seq_q": 2048, "seq_k": 2048, "heads_q": 8, "heads_kv": 8, "dim": 128,
                "dtype": dtype, "causal": causal,
            }
    yield {
        "name": "decode bf16 kv",
        "kind": "decode",
        "batch": 1, "seq_q": 1, "seq_k": 32768, "heads_q": 32, "heads_kv": 8, "dim": 128,
        "dtype": "bf16", "causal": False,
    }


def visible_pairs(c):
    rows = c["batch"] * c["heads_q"]
    if not c["causal"]:
        return rows * c["seq_q"] * c["seq_k"]
    return rows * sum(min(c["seq_k"], i + 1) for i in range(c["seq_q"]))


def run_case(c, reps):
    dtype = torch.float32 if c["dtype"] == "f32" else torch.bfloat16
    b, sq, sk, hq, hkv, d = (c[k] for k in ("batch", "seq_q", "seq_k", "heads_q", "heads_kv", "dim"))
    # SDPA takes [B, H, S, D].
    q = torch.randn(b, hq, sq, d, dtype=dtype)
    k = torch.randn(b, hkv, sk, d, dtype=dtype)
    v = torch.randn(b, hkv, sk, d, dtype=dtype)

    def call():
        if hq == hkv:
            return F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"])
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"], enable_gqa=True)
        except TypeError:
            g = hq // hkv
            return F.scaled_dot_product_attention(
                q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1), is_causal=c["causal"])

    call()  # warm-up
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    element = 4 if dtype == torch.float32 else 2
    nbytes = (q.numel() + k.numel() + v.numel() + q.numel()) * element
    best = ms[0]
    return {
        **c,
        "best_ms": best,
        "median_ms": statistics.median(ms),
        "gflops": 4.0 * visible_pairs(c) * d / (best * 1e-3) / 1e9,
        "gbs": nbytes / (best * 1e-3) / 1e9,
        "bytes": nbytes,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--case", default="", help="run only the cases whose name contains this")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    json_writable(args.json)

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__} CPU SDPA: {torch.get_num_threads()} threads, best of {args.reps} runs")
    print(f"{'case':<24} {'B':>6} {'Sq':>6} {'Sk':>6} {'Hq':>5} {'Hkv':>4} {'best ms':>9} "
          f"{'median ms':>9} {'GFLOP/s':>9} {'GB/s':>9}")
    results = []
    for c in cases():
        if args.case not in c["name"]:
            continue
        r = run_case(c, args.reps)
        results.append(r)
        print(f"{r['name']:<24} {r['batch']:>6} {r['seq_q']:>6} {r['seq_k']:>6} {r['heads_q']:>5} "
              f"{r['heads_kv']:>4} {r['best_ms']:>9.2f} {r['median_ms']:>9.2f} {r['gflops']:>9.1f} "
              f"{r['gbs']:>9.2f}")
    if args.json:
        write_json(args.json, {"engine": "torch sdpa cpu", "torch": torch.__version__,
                               "threads": args.threads, "cases": results}, indent=2)


if __name__ == "__main__":
    main()
