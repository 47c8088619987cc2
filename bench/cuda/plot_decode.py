#!/usr/bin/env python3
"""Plot of the decode benchmark: per KV format, the bandwidth mxattn's decode reaches and its time
against cuDNN's with a bf16 cache, shape by shape in order of KV length, with the anchors as lines.

Reads the JSON of bench/cuda/decode_bench.cu (--json) and of bench/cuda/torch_sdpa_decode.py
(--json), both written by the same scripts/device.sh call; only the engine-chosen key tile of each
format is drawn. Needs matplotlib.

  python3 bench/cuda/plot_decode.py decode_bench.json torch_sdpa_decode.json decode_bench.png
"""
import json
import re
import sys

FORMATS = ["bf16", "f16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1"]
LABELS = {"bf16": "bf16", "f16": "f16", "e4m3": "MXFP8 E4M3", "e5m2": "MXFP8 E5M2",
          "e2m3": "MXFP6 E2M3", "e3m2": "MXFP6 E3M2", "e2m1": "MXFP4 E2M1"}


def keys_of(shape):
    """KV length of a shape name such as B8_H32_K8_S32k (32768)."""
    m = re.search(r"_S(\d+)k", shape)
    return int(m.group(1)) * 1024 if m else 0


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    ours = json.load(open(argv[1]))
    anchors = json.load(open(argv[2]))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in ours["results"]
            if r.get("default_tile") and not r.get("tiles_per_split")
            and not r.get("splits_per_cta") and not r.get("wide_mx")
            and not r["shape"].endswith("_combine")]
    shapes = sorted({r["shape"] for r in rows}, key=lambda s: (keys_of(s), s))
    xs = list(range(len(shapes)))
    anchor = {(a["shape"], a["backend"]): a for a in anchors["results"]}

    fig, (bw, ratio) = plt.subplots(1, 2, figsize=(13, 4.8))
    for fmt in FORMATS:
        by_shape = {r["shape"]: r for r in rows if r["kv"] == fmt}
        if not by_shape:
            continue
        pts = [(x, by_shape[s]) for x, s in zip(xs, shapes) if s in by_shape]
        bw.plot([x for x, _ in pts], [r["gbps"] for _, r in pts], marker="o", label=LABELS[fmt])
        cudnn = [(x, anchor.get((r["shape"], "cudnn"))) for x, r in pts]
        ratio.plot([x for x, a in cudnn if a], [a["us"] / r["us"] for (x, a), (_, r) in
                                                 zip(cudnn, pts) if a],
                   marker="o", label=LABELS[fmt])
    for backend, style in (("cudnn", "k-"), ("flash", "k:")):
        ys = [anchor[(s, backend)]["gbps"] if (s, backend) in anchor else None for s in shapes]
        bw.plot(xs, ys, style, linewidth=2, label=f"{backend} (bf16 KV)")
        flash_ratio = [anchor[(s, "cudnn")]["us"] / anchor[(s, backend)]["us"]
                       if (s, backend) in anchor and (s, "cudnn") in anchor else None
                       for s in shapes]
        ratio.plot(xs, flash_ratio, style, linewidth=2, label=f"{backend} (bf16 KV)")
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
    ratio.set_title("decode time: cuDNN bf16 / mxattn")
    ratio.legend(fontsize=7, ncol=2)
    bw.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{ours.get('device', 'GPU')}: decode, shapes in order of KV length", fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[3], dpi=120)
    print(f"plot: {argv[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
