"""The fast CPU engine's prefill beside PyTorch's CPU SDPA, timed in pairs within one process.

    python bench/cpu_vs_torch_pairs.py [--threads N] [--pairs N] [--case TEXT] [--json FILE]
                                       [--plot FILE.png]
    python bench/cpu_vs_torch_pairs.py --from-json FILE --plot FILE.png   (redraws a run's plot)

A shared host's speed moves by up to 2x within a minute, so a ratio of two programs run minutes, or
even seconds, apart says little. Here both run in this process on the same tensors, through
mxattn's Python module (engine "cpu") and torch.nn.functional.scaled_dot_product_attention, with
the same thread count, one call of each per pair, the order swapped every pair: the two calls of
a pair see the same moment of the host. A pair's ratio is PyTorch's time over ours (above 1: we
are faster); the table gives, per case, each program's median time over the pairs, the median of
the pairs' ratios, its quartiles and how many pairs we won. The tensors are BSHD (the layout of
an inference engine's projections); PyTorch takes their [B, H, S, D] views, mxattn the tensors.
mxattn's kernel set is the library's choice (MXATTN_CPU_ISA, read once per process, overrides
it). The plot (matplotlib) draws every pair's times, which shows how far the host's speed moves.
Needs `pip install .` (mxattn's Python module) and torch. Pin the process (taskset) to as many
cores as threads.
"""

import argparse
import json
import statistics
import sys
import time

from bench_util import json_writable, write_json

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


def run_case(c, threads, pairs, torch, sdpa, mxattn):
    """Times mxattn and PyTorch, one call each a pair, the order swapped every pair."""
    dtype = torch.float32 if c["dtype"] == "f32" else torch.bfloat16
    b, s, h, d = c["batch"], c["seq"], c["heads"], c["dim"]
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(b, s, h, d, generator=gen).to(dtype) for _ in range(3))
    causal = "top_left" if c["causal"] else None

    def ours():
        return mxattn.attention(q, k, v, causal=causal, engine="cpu", threads=threads)

    def theirs():
        return sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=c["causal"])

    def timed(call):
        t0 = time.perf_counter()
        call()
        return (time.perf_counter() - t0) * 1e3

    # Warm-up, and a check that both compute the same attention.
    diff = (ours().float() - theirs().transpose(1, 2).float()).abs().max().item()
    ms_ours, ms_torch = [], []
    for i in range(pairs):
        if i % 2 == 0:
            ms_ours.append(timed(ours))
            ms_torch.append(timed(theirs))
        else:
            ms_torch.append(timed(theirs))
            ms_ours.append(timed(ours))
    ratios = [t / o for o, t in zip(ms_ours, ms_torch)]
    low, high = quartiles(ratios)
    return {**c, "pairs": pairs, "ours_ms": ms_ours, "torch_ms": ms_torch,
            "ours_median_ms": statistics.median(ms_ours),
            "torch_median_ms": statistics.median(ms_torch),
            "ours_gflops_at_median": flops(c) / statistics.median(ms_ours) / 1e6,
            "ratio_median": statistics.median(ratios), "ratio_q1": low, "ratio_q3": high,
            "pairs_won": sum(r > 1 for r in ratios), "max_abs_difference": diff}


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


def draw_panels(panels, xlabel, ylabel, title, path):
    """mxattn's times beside PyTorch's, one panel a case, in rows of up to 4: `panels` holds
    (subtitle, x, ours, torch) per case."""
    try:
        import matplotlib
    except ImportError:
        print(f"plot: matplotlib is not installed, {path} not drawn")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = min(4, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (subtitle, x, mine, theirs) in zip(axes.flat, panels):
        ax.plot(x, mine, "o-", ms=4, label="mxattn")
        ax.plot(x, theirs, "s--", ms=4, label="PyTorch SDPA")
        ax.set_title(subtitle, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def plot(result, path):
    """Each pair's times, ours beside PyTorch's."""
    if not result["cases"]:
        print(f"plot: no cases, {path} not drawn")
        return
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
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--plot", help="also draw the pairs into this PNG (needs matplotlib)")
    parser.add_argument("--from-json", help="draw --plot from this earlier run's JSON, run nothing")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    json_writable(args.json)
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
            result["cases"].append(run_case(c, args.threads, args.pairs, torch,
                                            F.scaled_dot_product_attention, mxattn))
            print(f"{c['name']}: done", file=sys.stderr)
    print_table(result)
    if args.json:
        write_json(args.json, result)
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
