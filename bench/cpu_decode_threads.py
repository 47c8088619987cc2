"""The fast CPU engine's decode by thread count: where it turns from bound by its arithmetic to
bound by memory, and what that does to MXFP8's speedup over bf16.

    python bench/cpu_decode_threads.py --bench BUILD/bench/mxattn_bench_cpu [--threads 1,2,4,8]
        [--cores 0-15] [--rounds N] [--reps N] [--decode-keys N] [--json FILE] [--plot FILE.png]
    python bench/cpu_decode_threads.py --from-json FILE --plot FILE.png    (redraws a run's plot)

Each round runs mxattn_bench_cpu's decode cases (B1 Hq32 Hkv8 D128, bf16 and MXFP8 E4M3 K/V) once
per thread count, pinned (taskset) to that many of --cores, so that a host's drift falls on every
count alike. The benchmark times each case beside a streaming read made with the same threads
right after each run. Per thread count the table gives the medians over the rounds of: each
case's best time and its share of the read beside it, that read, and MXFP8's speedup over bf16
(best times, and the median of alternated pairs). With few threads a core's arithmetic per key
sets the time and MXFP8's half-size cache saves little; with enough threads both read at the
memory's speed and MXFP8 approaches 2x. The plot (matplotlib) draws both.
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


def run_once(bench, threads, cores, reps, keys):
    """One pinned run of the benchmark's decode cases: its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "decode.json")
        pin = ",".join(str(c) for c in cores[:threads])
        subprocess.run(["taskset", "-c", pin, bench, "--threads", str(threads), "--reps", str(reps),
                        "--case", "decode", "--decode-keys", str(keys), "--json", path],
                       check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)


def summarize(runs):
    """Per thread count, the medians over its rounds."""
    rows = []
    for threads in sorted(runs, key=int):
        rounds = runs[threads]
        row = {"threads": int(threads), "rounds": len(rounds)}
        for kv in ("bf16", "e4m3"):
            cases = [c for r in rounds for c in r["cases"] if c["kv_type"] == kv]
            if not cases:
                continue
            row[kv + "_ms"] = statistics.median(c["best_ms"] for c in cases)
            row[kv + "_gbs"] = statistics.median(c["gbs"] for c in cases)
            row[kv + "_percent_of_read"] = statistics.median(c["percent_of_read_beside"]
                                                             for c in cases)
            row["read_gbs"] = statistics.median(c["read_gbs_beside"] for c in cases)
        row["mxfp8_speedup"] = statistics.median(r["mxfp8_over_bf16_decode_speedup"] for r in rounds)
        row["mxfp8_speedup_alternated"] = statistics.median(
            r["mxfp8_over_bf16_decode_speedup_alternated"] for r in rounds)
        rows.append(row)
    return rows


def print_table(rows):
    print(f"{'threads':>7} {'bf16 ms':>8} {'E4M3 ms':>8} {'read GB/s':>9} {'bf16 % read':>11} "
          f"{'E4M3 % read':>11} {'MXFP8 x':>8} {'alternated':>10}")
    for r in rows:
        print(f"{r['threads']:7d} {r.get('bf16_ms', 0):8.2f} {r.get('e4m3_ms', 0):8.2f} "
              f"{r.get('read_gbs', 0):9.1f} {r.get('bf16_percent_of_read', 0):10.1f}% "
              f"{r.get('e4m3_percent_of_read', 0):10.1f}% {r['mxfp8_speedup']:7.2f}x "
              f"{r['mxfp8_speedup_alternated']:9.2f}x")


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    threads = [r["threads"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(threads, [r.get("read_gbs", 0) for r in rows], "k--", label="streaming read")
    left.plot(threads, [r.get("bf16_gbs", 0) for r in rows], "o-", label="decode, bf16 K/V")
    left.plot(threads, [r.get("e4m3_gbs", 0) for r in rows], "s-", label="decode, MXFP8 E4M3 K/V")
    left.set_xlabel("threads")
    left.set_ylabel("GB/s of K/V read")
    left.set_xscale("log", base=2)
    left.legend()
    right.plot(threads, [r["mxfp8_speedup"] for r in rows], "o-", label="best times")
    right.plot(threads, [r["mxfp8_speedup_alternated"] for r in rows], "s-",
               label="alternated pairs")
    right.axhline(1.6, color="gray", linestyle=":", label="1.6x")
    right.set_xlabel("threads")
    right.set_ylabel("MXFP8 decode speedup over bf16")
    right.set_xscale("log", base=2)
    top = max([2.1] + [r["mxfp8_speedup"] + 0.1 for r in rows])
    right.set_ylim(0.8, top)
    right.legend()
    for axis in (left, right):
        axis.set_xticks(threads)
        axis.set_xticklabels([str(t) for t in threads])
    fig.suptitle("CPU decode, B1 Hq32 Hkv8 D128, 32k keys")
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
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--from-json", help="redraw the table and plot of an earlier run's JSON")
    args = ap.parse_args()

    if args.from_json:
        with open(args.from_json) as f:
            rows = json.load(f)["summary"]
    else:
        if not args.bench:
            ap.error("--bench or --from-json is required")
        counts = [int(t) for t in args.threads.split(",")]
        cores = core_list(args.cores) if args.cores else list(range(max(counts)))
        if len(cores) < max(counts):
            ap.error(f"{max(counts)} threads need as many cores; --cores gives {len(cores)}")
        runs = {}
        for r in range(args.rounds):
            for t in counts:
                print(f"round {r + 1}/{args.rounds}: {t} threads", flush=True)
                runs.setdefault(str(t), []).append(
                    run_once(args.bench, t, cores, args.reps, args.decode_keys))
        rows = summarize(runs)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"decode_keys": args.decode_keys, "cores": cores, "summary": rows,
                           "runs": runs}, f, indent=1)
    print_table(rows)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
