#!/usr/bin/env python3
"""The decode benchmark beside its anchors: a table and, given a PNG path, a plot.

Reads the JSON of bench/cuda/decode_bench.cu (--json) and of bench/cuda/torch_sdpa_decode.py
(--json), both written by the same scripts/device.sh call. The table gives each of mxattn's rows
(shape and KV type) its time beside each anchor's on the same shape: cuDNN, FlashAttention-2 and
FlashAttention-3 with a bf16 cache, and FlashAttention-3 with an FP8 cache beside the MXFP8 rows;
a ratio above 1 means mxattn is faster. The plot (matplotlib) draws, per KV format, the bandwidth
mxattn's decode reaches and its speed against cuDNN's with a bf16 cache, shape by shape in order
of KV length, with the anchors as lines.

  python3 bench/cuda/plot_decode.py decode_bench.json torch_sdpa_decode.json [decode_bench.png]
"""
import json
import re
import sys

FORMATS = ["bf16", "f16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1"]
LABELS = {"bf16": "bf16", "f16": "f16", "e4m3": "MXFP8 E4M3", "e5m2": "MXFP8 E5M2",
          "e2m3": "MXFP6 E2M3", "e3m2": "MXFP6 E3M2", "e2m1": "MXFP4 E2M1"}
# The anchors, in the table's order, and the KV types of mxattn's rows each is set beside.
ANCHORS = [("cudnn", None), ("fa2", None), ("fa3", None), ("fa3_fp8", ("e4m3", "e5m2"))]


def keys_of(shape):
    """KV length of a shape name such as B8_H32_K8_S32k (32768)."""
    m = re.search(r"_S(\d+)k", shape)
    return int(m.group(1)) * 1024 if m else 0


def anchor_table(anchors):
    """(shape, backend) -> anchor row, for the rows that were timed."""
    return {(a["shape"], a["backend"]): a for a in (anchors or {}).get("results", [])
            if a.get("us")}


def print_table(ours, anchors):
    """mxattn's decode rows beside the anchors' times on the same shape."""
    anchor = anchor_table(anchors)
    print(f"decode: {ours.get('device', 'GPU')}, read-only probe (2 GiB) "
          f"{ours['probe_gbps']:.0f} GB/s; x_<anchor>: its time / mxattn's, above 1: mxattn faster")
    for backend, reason in (anchors or {}).get("skipped", {}).items():
        print(f"  {backend}: skipped ({reason})")
    print(f"{'shape':22} {'kv':6} {'us':>9} {'GB/s':>6} {'%probe':>6}"
          + "".join(f" {name + '_us':>10} {'x_' + name:>9}" for name, _ in ANCHORS))
    for r in ours["results"]:
        line = (f"{r['shape']:22} {r['kv']:6} {r['us']:9.2f} {r['gbps']:6.0f} "
                f"{100 * r['gbps'] / ours['probe_gbps']:5.1f}%")
        for name, kvs in ANCHORS:
            a = anchor.get((r["shape"], name)) if kvs is None or r["kv"] in kvs else None
            line += f" {a['us']:10.2f} {a['us'] / r['us']:9.2f}" if a else f" {'':>10} {'':>9}"
        print(line.rstrip())


def plot(ours, anchors, path):
    try:
        import matplotlib
    except ImportError:
        print(f"plot: matplotlib is not installed, {path} not drawn")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ours["results"]
    shapes = sorted({r["shape"] for r in rows}, key=lambda s: (keys_of(s), s))
    xs = list(range(len(shapes)))
    anchor = anchor_table(anchors)

    fig, (bw, ratio) = plt.subplots(1, 2, figsize=(13, 4.8))
    for fmt in FORMATS:
        by_shape = {r["shape"]: r for r in rows if r["kv"] == fmt}
        if not by_shape:
            continue
        pts = [(x, by_shape[s]) for x, s in zip(xs, shapes) if s in by_shape]
        bw.plot([x for x, _ in pts], [r["gbps"] for _, r in pts], marker="o", label=LABELS[fmt])
        cudnn = [(x, anchor[(r["shape"], "cudnn")]["us"] / r["us"]) for x, r in pts
                 if (r["shape"], "cudnn") in anchor]
        ratio.plot([x for x, _ in cudnn], [y for _, y in cudnn], marker="o", label=LABELS[fmt])
    styles = {"cudnn": "k-", "fa2": "k:", "fa3": "k--", "fa3_fp8": "k-."}
    for backend, style in styles.items():
        if not any((s, backend) in anchor for s in shapes):
            continue
        kv = "FP8 KV" if backend.endswith("fp8") else "bf16 KV"
        bw.plot(xs, [anchor[(s, backend)]["gbps"] if (s, backend) in anchor else None
                     for s in shapes], style, linewidth=2, label=f"{backend} ({kv})")
        ratio.plot(xs, [anchor[(s, "cudnn")]["us"] / anchor[(s, backend)]["us"]
                        if (s, backend) in anchor and (s, "cudnn") in anchor else None
                        for s in shapes], style, linewidth=2, label=f"{backend} ({kv})")
    probe = ours.get("probe_gbps")
    if probe:
        bw.axhline(probe, color="grey", linestyle="--", label=f"read probe {probe:.0f} GB/s")
    for ax in (bw, ratio):
        ax.set_xticks(xs)
        ax.set_xticklabels([s.replace("_graph", "\n(graph)") for s in shapes], fontsize=8)
        ax.grid(alpha=0.3)
    bw.set_ylabel("GB/s of KV bytes read (codes and scales once)")
    bw.set_title("mxattn decode bandwidth by KV format")
    ratio.set_ylabel("speed relative to cuDNN with bf16 KV (higher is faster)")
    ratio.set_title("decode time: cuDNN bf16 / this")
    ratio.legend(fontsize=7, ncol=2)
    bw.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{ours.get('device', 'GPU')}: decode, shapes in order of KV length", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        ours = json.load(f)
    with open(argv[2]) as f:
        anchors = json.load(f)
    print_table(ours, anchors)
    if len(argv) == 4:
        plot(ours, anchors, argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
