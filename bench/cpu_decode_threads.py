"""The fast CPU engine's decode by thread count: where it turns from bound by its arithmetic to
bound by memory, and what that does to MXFP8's speedup over bf16.

    python bench/cpu_decode_threads.py --bench BUILD/bench/mxattn_bench_cpu [--threads 1,2,4,8]
        [--cores 0-15] [--rounds N] [--reps N] [--decode-keys N] [--kv-layout bshd,bhsd] [--hot]
        [--json FILE] [--plot FILE.png]
    python bench/cpu_decode_threads.py --from-json FILE --plot FILE.png    (redraws a run's plot)

Each round runs mxattn_bench_cpu's decode cases (B1 Hq32 Hkv8 D128, bf16 and MXFP8 E4M3 K/V) once
per thread count, pinned (taskset) to that many of --cores, so that a host's drift falls on every
count alike. The benchmark times each case beside a streaming read made with the same threads
right after each run. Per thread count the table gives the medians over the rounds of: each
case's best time and its share of the read beside it, that read, and MXFP8's speedup over bf16
(best times, and the median of alternated pairs). With few threads a core's arithmetic and line
fetches per key set the time and MXFP8's half-size cache saves little; with more threads bf16
approaches the memory's speed, and MXFP8 would approach 2x only if each core's FP8 decode hid
under its fetches (on the hosts measured it does not: docs/perf.md). The plot (matplotlib) draws
both. With --kv-layout bshd,bhsd each run times the caches stored token-major and head-major
(alternated within the run), and the table and plot give each layout. With --hot each run also
times every case from the caches (the benchmark's --sources memory,cache: one cache read every
call, from the L3 where it fits there, e.g. 8192 keys, 32 MiB in bf16, alternated with the runs
from memory), and a second table (and a third panel) gives what a key and head costs a thread,
from memory and from the caches: where MXFP8 costs a core as much as bf16 even from the caches,
its decode is bound by each core's arithmetic and line fetches, not by the memory the threads
share.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def core_list(text):
    """'0-3,8' -> [0, 1, 2, 3, 8]."""
    cores = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        cores.extend(range(int(first), int(last or first) + 1))
    return cores


def run_once(bench, threads, cores, reps, keys, layouts, hot=False):
    """One pinned run of the benchmark's decode cases (from memory, and also from the caches where
    hot): its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "decode.json")
        pin = ",".join(str(c) for c in cores[:threads])
        sources = ["--sources", "memory,cache"] if hot else []
        subprocess.run(["taskset", "-c", pin, bench, "--threads", str(threads), "--reps", str(reps),
                        "--case", "decode", "--decode-keys", str(keys), "--kv-layout",
                        ",".join(layouts), "--json", path] + sources,
                       check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)


def layout_of(entry):
    """The KV layout of a benchmark case ("kv_layout") or summary row ("layout"); bshd where the
    entry predates --kv-layout."""
    return entry.get("kv_layout", entry.get("layout", "bshd"))


def layouts_in(entries):
    """The KV layouts of cases or summary rows, in order of first appearance."""
    found = []
    for e in entries:
        layout = layout_of(e)
        if layout not in found:
            found.append(layout)
    return found


def layouts_of(run):
    """A run's KV layouts, in order."""
    return layouts_in(run["cases"])


def speedup_of(run, layout):
    """MXFP8 over bf16 in one run for one layout: (best, alternated)."""
    by_layout = run.get("mxfp8_over_bf16_decode_speedup_by_layout")
    if by_layout and layout in by_layout:
        return by_layout[layout]["best"], by_layout[layout]["alternated"]
    if layout == layouts_of(run)[0]:  # the top-level figures are the first layout's
        return (run["mxfp8_over_bf16_decode_speedup"],
                run["mxfp8_over_bf16_decode_speedup_alternated"])
    # Another layout of a run from before the per-layout figures: the best times' ratio from its
    # cases (the last of each type, as the benchmark takes them); the alternated one is unknown.
    best = {}
    for c in run["cases"]:
        if layout_of(c) == layout:
            best[c["kv_type"]] = c["best_ms"]
    return best["bf16"] / best["e4m3"], float("nan")


def ns_per_key_head(case, ms, threads):
    """What one key of one KV head costs a thread, in ns, at a case's best time of ms."""
    return ms * 1e6 * threads / (case["seq_k"] * case["heads_kv"] * case["batch"])


def from_memory(case):
    """Whether a case read memory (cases from before --sources did)."""
    return case.get("source", "memory") == "memory"


def summarize(runs):
    """Per thread count and KV layout, the medians over its rounds; where the runs also read the
    caches, each type's time from the caches and what a key and head costs a thread from memory
    and from the caches."""
    rows = []
    for threads in sorted(runs, key=int):
        rounds = runs[threads]
        for layout in layouts_of(rounds[0]):
            row = {"threads": int(threads), "layout": layout, "rounds": len(rounds)}
            for kv in ("bf16", "e4m3"):
                mine = [c for r in rounds for c in r["cases"]
                        if c["kv_type"] == kv and layout_of(c) == layout]
                cases = [c for c in mine if from_memory(c)]
                hot = [c for c in mine if not from_memory(c)]
                if not cases:
                    continue
                row[kv + "_ms"] = statistics.median(c["best_ms"] for c in cases)
                row[kv + "_gbs"] = statistics.median(c["gbs"] for c in cases)
                row[kv + "_percent_of_read"] = statistics.median(c["percent_of_read_beside"]
                                                                 for c in cases)
                row["read_gbs"] = statistics.median(c["read_gbs_beside"] for c in cases)
                row[kv + "_ns_key_head"] = ns_per_key_head(cases[0], row[kv + "_ms"],
                                                           row["threads"])
                if hot:
                    row[kv + "_hot_ms"] = statistics.median(c["best_ms"] for c in hot)
                    row[kv + "_hot_ns_key_head"] = ns_per_key_head(hot[0], row[kv + "_hot_ms"],
                                                                   row["threads"])
            pairs = [speedup_of(r, layout) for r in rounds]
            row["mxfp8_speedup"] = statistics.median(p[0] for p in pairs)
            known = [p[1] for p in pairs if p[1] == p[1]]  # NaN: not in the run's JSON
            row["mxfp8_speedup_alternated"] = statistics.median(known) if known else float("nan")
            rows.append(row)
    return rows


def print_table(rows):
    print(f"{'threads':>7} {'layout':>6} {'bf16 ms':>8} {'E4M3 ms':>8} {'read GB/s':>9} "
          f"{'bf16 % read':>11} {'E4M3 % read':>11} {'MXFP8 x':>8} {'alternated':>10}")
    for r in rows:
        alternated = r["mxfp8_speedup_alternated"]
        print(f"{r['threads']:7d} {layout_of(r):>6} {r.get('bf16_ms', 0):8.2f} "
              f"{r.get('e4m3_ms', 0):8.2f} {r.get('read_gbs', 0):9.1f} "
              f"{r.get('bf16_percent_of_read', 0):10.1f}% "
              f"{r.get('e4m3_percent_of_read', 0):10.1f}% "
              f"{r['mxfp8_speedup']:7.2f}x "
              + (f"{alternated:9.2f}x" if alternated == alternated else f"{'-':>10}"))


def print_hot_table(rows):
    """What a key and head costs a thread (ns), from memory and from the caches."""
    if not any("bf16_hot_ms" in r for r in rows):
        return
    print("\nwhat a key and KV head costs a thread (ns), from memory and from the caches:")
    print(f"{'threads':>7} {'layout':>6} {'bf16 mem':>9} {'bf16 cache':>10} {'E4M3 mem':>9} "
          f"{'E4M3 cache':>10} {'MXFP8 x cache':>13}")
    for r in rows:
        if "bf16_hot_ms" not in r or "e4m3_hot_ms" not in r:
            continue
        print(f"{r['threads']:7d} {layout_of(r):>6} {r['bf16_ns_key_head']:9.1f} "
              f"{r['bf16_hot_ns_key_head']:10.1f} {r['e4m3_ns_key_head']:9.1f} "
              f"{r['e4m3_hot_ns_key_head']:10.1f} {r['bf16_hot_ms'] / r['e4m3_hot_ms']:12.2f}x")


def plot(rows, path, keys):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    layouts = layouts_in(rows)
    several = len(layouts) > 1
    hot = any("bf16_hot_ms" in r for r in rows)
    fig, axes = plt.subplots(1, 3 if hot else 2, figsize=(15 if hot else 10, 4))
    left, right = axes[0], axes[1]
    for i, layout in enumerate(layouts):
        mine = [r for r in rows if layout_of(r) == layout]
        threads = [r["threads"] for r in mine]
        style = "-" if i == 0 else "--"
        tag = f", {layout}" if several else ""
        if i == 0:
            left.plot(threads, [r.get("read_gbs", 0) for r in mine], "k:", label="streaming read")
        left.plot(threads, [r.get("bf16_gbs", 0) for r in mine], "o" + style, color="C0",
                  label="decode, bf16 K/V" + tag)
        left.plot(threads, [r.get("e4m3_gbs", 0) for r in mine], "s" + style, color="C1",
                  label="decode, MXFP8 E4M3 K/V" + tag)
        right.plot(threads, [r["mxfp8_speedup"] for r in mine], "o" + style, color="C2",
                   label="best times" + tag)
        right.plot(threads, [r["mxfp8_speedup_alternated"] for r in mine], "s" + style,
                   color="C3", label="alternated pairs" + tag)
        if hot:
            cost = axes[2]
            for kv, color, name in (("bf16", "C0", "bf16"), ("e4m3", "C1", "E4M3")):
                cost.plot(threads, [r.get(kv + "_ns_key_head", float("nan")) for r in mine],
                          "o" + style, color=color, label=f"{name}, from memory" + tag)
                cost.plot(threads, [r.get(kv + "_hot_ns_key_head", float("nan")) for r in mine],
                          "^" + style, color=color, alpha=0.6,
                          label=f"{name}, from the caches" + tag)
    threads = sorted({r["threads"] for r in rows})
    left.set_xlabel("threads")
    left.set_ylabel("GB/s of K/V read")
    left.set_xscale("log", base=2)
    left.legend(fontsize=8)
    right.axhline(1.6, color="gray", linestyle=":", label="1.6x")
    right.set_xlabel("threads")
    right.set_ylabel("MXFP8 decode speedup over bf16")
    right.set_xscale("log", base=2)
    top = max([2.1] + [r["mxfp8_speedup"] + 0.1 for r in rows])
    right.set_ylim(0.8, top)
    right.legend(fontsize=8)
    if hot:
        axes[2].set_xlabel("threads")
        axes[2].set_ylabel("ns a key and KV head, a thread")
        axes[2].set_xscale("log", base=2)
        axes[2].set_ylim(bottom=0)
        axes[2].legend(fontsize=8)
    for axis in axes:
        axis.set_xticks(threads)
        axis.set_xticklabels([str(t) for t in threads])
    fig.suptitle(f"CPU decode, B1 Hq32 Hkv8 D128, {keys} keys")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", help="path of mxattn_bench_cpu")
    ap.add_argument("--threads", default="1,2,4,8", help="thread counts, comma-separated")
    ap.add_argument("--cores", default=None, help="cores to pin to (default: 0 to the most threads)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--decode-keys", type=int, default=32768)
    ap.add_argument("--kv-layout", default="bshd",
                    help="KV cache layouts, comma-separated: bshd (token-major), bhsd (head-major)")
    ap.add_argument("--hot", action="store_true",
                    help="every run also from the caches (the benchmark's --sources memory,cache)")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--from-json", help="redraw the table and plot of an earlier run's JSON")
    args = ap.parse_args()

    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        rows, keys = saved["summary"], saved.get("decode_keys", 32768)
    else:
        if not args.bench:
            ap.error("--bench or --from-json is required")
        counts = [int(t) for t in args.threads.split(",")]
        cores = core_list(args.cores) if args.cores else list(range(max(counts)))
        if len(cores) < max(counts):
            ap.error(f"{max(counts)} threads need as many cores; --cores gives {len(cores)}")
        runs = {}
        layouts = args.kv_layout.split(",")
        for r in range(args.rounds):
            for t in counts:
                print(f"round {r + 1}/{args.rounds}: {t} threads", flush=True)
                runs.setdefault(str(t), []).append(
                    run_once(args.bench, t, cores, args.reps, args.decode_keys, layouts,
                             args.hot))
        rows, keys = summarize(runs), args.decode_keys
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"decode_keys": args.decode_keys, "cores": cores,
                           "kv_layouts": layouts, "summary": rows, "runs": runs}, f, indent=1)
    print_table(rows)
    print_hot_table(rows)
    if args.plot:
        plot(rows, args.plot, keys)


if __name__ == "__main__":
    main()
