"""The fast CPU engine's prefill beside PyTorch's CPU SDPA, in alternating rounds on one machine.

    python bench/cpu_vs_torch.py --bench BUILD/bench/mxattn_bench_cpu [--threads N] [--rounds N]
                                 [--reps N] [--case TEXT] [--json FILE] [--plot FILE.png]
    python bench/cpu_vs_torch.py --from-json FILE --plot FILE.png    (redraws a run's plot)

A shared host's speed moves by up to 2x within a minute (docs/perf.md, 2026-12-05 session 20), so
a ratio of two programs run minutes apart says little. Each round runs mxattn_bench_cpu on the
prefill cases (--reps runs each, after a warm-up), then PyTorch's SDPA on the same cases in this
process (bench/torch_sdpa_cpu.py's run_case), both with the same thread count. The ratio of a
round is PyTorch's median time over ours (above 1: we are faster); the table gives, per case,
both programs' medians over the rounds and the median and range of the rounds' ratios. Pin the
process (taskset) to as many cores as threads. The plot (matplotlib) draws each case's time by
round for both programs, which shows how far the host's speed moves.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def ours(bench, threads, reps, case):
    """One run of mxattn_bench_cpu on the prefill cases whose name contains `case`: name -> case."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ours.json")
        subprocess.run([bench, "--threads", str(threads), "--reps", str(reps), "--case", case,
                        "--json", path], check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            data = json.load(f)
    return {c["name"]: c for c in data["cases"] if c["kind"] == "prefill"}, data


def draw_panels(panels, xlabel, ylabel, title, path):
    """mxattn's times beside PyTorch's, one panel a case, in rows of up to 4: `panels` holds
    (subtitle, x, ours, torch) per case. Also serves bench/cpu_vs_torch_pairs.py."""
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
    """Each case's median time by round, ours beside PyTorch's."""
    panels = [(f"{c['name']}\ntorch/ours {c['torch_over_ours_median']:.2f}x (median)",
               range(1, len(c["ours_ms_by_round"]) + 1), c["ours_ms_by_round"],
               c["torch_ms_by_round"]) for c in result["cases"]]
    draw_panels(panels, "round", "median ms of the round",
                f"CPU prefill B1 H8 S2048 D128, {result['threads']} threads, mxattn "
                f"({result['isa']}) and torch {result['torch']}, alternating rounds", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", help="the mxattn_bench_cpu program")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--case", default="prefill",
                        help="the prefill cases whose name contains this")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--plot", help="also draw the rounds into this PNG (needs matplotlib)")
    parser.add_argument("--from-json", help="draw --plot from this earlier run's JSON, run nothing")
    args = parser.parse_args()
    if args.from_json:
        if not args.plot:
            sys.exit("--from-json needs --plot")
        with open(args.from_json) as f:
            plot(json.load(f), args.plot)
        return
    if not args.bench:
        sys.exit("--bench is required (the mxattn_bench_cpu program)")
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_sdpa_cpu

    torch.set_num_threads(args.threads)
    wanted = [c for c in torch_sdpa_cpu.cases()
              if c["kind"] == "prefill" and args.case in c["name"]]
    if not wanted:
        sys.exit(f"no prefill case matches '{args.case}'")
    rounds = []
    for r in range(args.rounds):
        mine, header = ours(args.bench, args.threads, args.reps, args.case)
        theirs = {c["name"]: torch_sdpa_cpu.run_case(c, args.reps) for c in wanted}
        rounds.append({"ours": mine, "torch": theirs})
        line = "  ".join(f"{n}: {mine[n]['median_ms']:.2f} / {theirs[n]['median_ms']:.2f} ms"
                         for n in theirs if n in mine)
        print(f"round {r + 1}/{args.rounds}  (ours / torch)  {line}", flush=True)

    print(f"\nmxattn ({header['isa']}) beside torch {torch.__version__} CPU SDPA: "
          f"{args.threads} threads, {args.rounds} alternating rounds of {args.reps} runs each")
    print(f"{'case':<22} {'ours ms':>9} {'torch ms':>9} {'GFLOP/s':>9} {'% FMA peak':>10} "
          f"{'torch/ours':>11} {'range':>13}")
    summary = []
    peak = header["ceilings"]["peak_gflops"]
    for c in wanted:
        name = c["name"]
        if any(name not in rd["ours"] for rd in rounds):
            continue
        ours_ms = [rd["ours"][name]["median_ms"] for rd in rounds]
        torch_ms = [rd["torch"][name]["median_ms"] for rd in rounds]
        ratios = [t / o for t, o in zip(torch_ms, ours_ms)]
        mine = statistics.median(ours_ms)
        gflops = 4.0 * torch_sdpa_cpu.visible_pairs(c) * c["dim"] / (mine * 1e-3) / 1e9
        row = {
            "name": name,
            "ours_median_ms": mine,
            "torch_median_ms": statistics.median(torch_ms),
            "ours_gflops_at_median": gflops,
            "percent_of_fma_peak": 100.0 * gflops / peak,
            "torch_over_ours_median": statistics.median(ratios),
            "torch_over_ours_min": min(ratios),
            "torch_over_ours_max": max(ratios),
            "ours_ms_by_round": ours_ms,
            "torch_ms_by_round": torch_ms,
        }
        summary.append(row)
        print(f"{name:<22} {row['ours_median_ms']:>9.2f} {row['torch_median_ms']:>9.2f} "
              f"{row['ours_gflops_at_median']:>9.1f} {row['percent_of_fma_peak']:>9.1f}% "
              f"{row['torch_over_ours_median']:>10.2f}x {min(ratios):>6.2f}-{max(ratios):.2f}x")
    print(f"(FMA peak {peak:.1f} GFLOP/s from mxattn_bench_cpu's own measurement; "
          "torch/ours above 1: mxattn faster)")
    result = {"threads": args.threads, "rounds": args.rounds, "reps": args.reps,
              "torch": torch.__version__, "isa": header["isa"], "ceilings": header["ceilings"],
              "cases": summary}
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
