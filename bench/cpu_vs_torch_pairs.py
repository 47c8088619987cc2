"""The fast CPU engine's prefill beside PyTorch's CPU SDPA, timed in pairs within one process.

    python bench/cpu_vs_torch_pairs.py [--threads N] [--pairs N] [--case TEXT] [--isas A,B]
                                       [--json FILE] [--plot FILE.png]
    python bench/cpu_vs_torch_pairs.py --from-json FILE --plot FILE.png   (redraws a run's plot)

A shared host's speed moves by up to 2x within a minute (docs/perf.md), and bench/cpu_vs_torch.py
runs the two programs seconds apart. Here both run in this process on the same tensors, through
mxattn's Python module (engine "cpu") and torch.nn.functional.scaled_dot_product_attention, with
the same thread count, one call of each per pair, the order swapped every pair: the two calls of
a pair see the same moment of the host. A pair's ratio is PyTorch's time over ours (above 1: we
are faster); the table gives, per case, each program's median time over the pairs, the median of
the pairs' ratios, its quartiles and how many pairs we won. The tensors are BSHD (the layout of
an inference engine's projections); PyTorch takes their [B, H, S, D] views, mxattn the tensors.
--isas times mxattn once per named kernel set in every pair (MXATTN_CPU_ISA, e.g.
avx512_bf16,avx512_amx: the AVX-512 FMA kernels against the AMX ones), each against PyTorch; the
first is the "ours" of the table, the others get their own rows. The plot (matplotlib) draws
every pair's times, which shows how far the host's speed moves.
Needs `pip install .` (mxattn's Python module) and torch. Pin the process (taskset) to as many
cores as threads.
"""

import argparse
import json
import os
import statistics
import sys
import time

SHAPE = {"batch": 1, "seq": 2048, "heads": 8, "dim": 128}


def cases():
    for dtype in ("f32", "bf16"):
        for causal in (False, True):
            yield {"name": f"prefill {dtype}" + (" causal" if causal else ""), "dtype": dtype,
                   "causal": causal, **SHAPE}


def flops(c):
    b, s, h, d = c["batch"], c["seq"], c["heads"], c["dim"]
    pairs = s * (s + 1) // 2 if c["causal"] else s * s
    return 4.0 * b * h * pairs * d


def quartiles(values):
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], q[2]


def run_case(c, threads, pairs, isas, torch, sdpa, mxattn):
    """Times mxattn under each kernel set in `isas` ("" the default) and PyTorch, one call each a
    pair, the order rotated every pair: one result per kernel set, each against PyTorch."""
    dtype = torch.float32 if c["dtype"] == "f32" else torch.bfloat16
    b, s, h, d = c["batch"], c["seq"], c["heads"], c["dim"]
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(b, s, h, d, generator=gen).to(dtype) for _ in range(3))
    causal = "top_left" if c["causal"] else None

    def ours(isa):
        def call():
            if isa:
                os.environ["MXATTN_CPU_ISA"] = isa
            else:
                os.environ.pop("MXATTN_CPU_ISA", None)
            return mxattn.attention(q, k, v, causal=causal, engine="cpu", threads=threads)
        return call

    def theirs():
        return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=c["causal"])

    def timed(call):
        t0 = time.perf_counter()
        call()
        return (time.perf_counter() - t0) * 1e3

    programs = [ours(isa) for isa in isas] + [theirs]
    # Warm-up, and a check that both compute the same attention.
    want = theirs().transpose(1, 2).float()
    diffs = [(p().float() - want).abs().max().item() for p in programs[:-1]]
    ms = [[] for _ in programs]
    for i in range(pairs):
        order = list(range(len(programs)))
        order = order[i % len(order):] + order[:i % len(order)]
        for n in order:
            ms[n].append(timed(programs[n]))
    os.environ.pop("MXATTN_CPU_ISA", None)
    results = []
    for isa, ms_ours, diff in zip(isas, ms, diffs):
        ratios = [t / o for o, t in zip(ms_ours, ms[-1])]
        low, high = quartiles(ratios)
        name = c["name"] + (f" [{isa}]" if isa else "")
        results.append({**c, "name": name, "isa": isa or "default", "pairs": pairs,
                        "ours_ms": ms_ours, "torch_ms": ms[-1],
                        "ours_median_ms": statistics.median(ms_ours),
                        "torch_median_ms": statistics.median(ms[-1]),
                        "ours_gflops_at_median": flops(c) / statistics.median(ms_ours) / 1e6,
                        "ratio_median": statistics.median(ratios), "ratio_q1": low,
                        "ratio_q3": high, "pairs_won": sum(r > 1 for r in ratios),
                        "max_abs_difference": diff})
    return results


def print_table(result):
    pairs = result["cases"][0]["pairs"] if result["cases"] else 0
    print(f"mxattn (engine cpu) beside torch {result['torch']} CPU SDPA: {result['threads']} "
          f"threads, {pairs} pairs a case, in one process")
    print(f"{'case':<36} {'ours ms':>8} {'torch ms':>9} {'GFLOP/s':>8} {'torch/ours':>11} "
          f"{'quartiles':>12} {'won':>7} {'max |diff|':>11}")
    for c in result["cases"]:
        print(f"{c['name']:<36} {c['ours_median_ms']:>8.2f} {c['torch_median_ms']:>9.2f} "
              f"{c['ours_gflops_at_median']:>8.1f} {c['ratio_median']:>10.2f}x "
              f"{c['ratio_q1']:>5.2f}-{c['ratio_q3']:.2f}x {c['pairs_won']:>3}/{c['pairs']:<3} "
              f"{c['max_abs_difference']:>11.2e}")
    print("(medians over the pairs; torch/ours above 1: mxattn faster; won: pairs where mxattn "
          "was faster)")


def plot(result, path):
    """Each pair's times, ours beside PyTorch's (cpu_vs_torch.draw_panels)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cpu_vs_torch import draw_panels
    panels = [(f"{c['name']}\ntorch/ours {c['ratio_median']:.2f}x (median of pairs)",
               range(1, c["pairs"] + 1), c["ours_ms"], c["torch_ms"]) for c in result["cases"]]
    draw_panels(panels, "pair", "ms",
                f"CPU prefill B1 H8 S2048 D128, {result['threads']} threads, mxattn and torch "
                f"{result['torch']}, timed in pairs in one process", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--case", default="", help="run only the cases whose name contains this")
    parser.add_argument("--isas", default="",
                        help="mxattn's kernel sets to time, comma-separated (default: its choice)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--plot", help="also draw the pairs into this PNG (needs matplotlib)")
    parser.add_argument("--from-json", help="draw --plot from this earlier run's JSON, run nothing")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            result = json.load(f)
        print_table(result)
        if args.plot:
            plot(result, args.plot)
        return
    import torch
    import torch.nn.functional as F
    import mxattn
    torch.set_num_threads(args.threads)
    result = {"threads": args.threads, "torch": torch.__version__, "cases": []}
    for c in cases():
        if args.case in c["name"]:
            result["cases"] += run_case(c, args.threads, args.pairs, args.isas.split(","), torch,
                                        F.scaled_dot_product_attention, mxattn)
            print(f"{c['name']}: done", file=sys.stderr)
    print_table(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
