#!/usr/bin/env python3
"""Bar chart of the JSON written by `mxattn_mx_accuracy --json FILE` (docs/accuracy.md).

One panel per input (Gaussian, K with outlier channels); per format, one bar per producer
transform; relative L2 error of O on a log axis, with the MXFP4 target (0.25) as a line.

    python3 bench/plot_accuracy.py accuracy.json accuracy.png
"""
import argparse
import json

TRANSFORMS = [
    ("none", False, False),
    ("rotation", True, False),
    ("smoothing", False, True),
    ("rotation + smoothing", True, True),
]
INPUT_TITLES = {"gaussian": "Gaussian Q/K/V", "k-outliers": "K with outlier channels"}
MXFP4_TARGET = 0.25


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json_path")
    parser.add_argument("png_path")
    args = parser.parse_args()
    with open(args.json_path) as f:
        report = json.load(f)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["results"]
    formats = list(dict.fromkeys(r["format"] for r in results if r["format"] != "f32"))
    inputs = list(dict.fromkeys(r["input"] for r in results))
    width = 0.8 / len(TRANSFORMS)
    fig, axes = plt.subplots(1, len(inputs), figsize=(13, 4.8), sharey=True)
    for ax, input_name in zip(axes, inputs):
        for t, (label, rotation, smoothing) in enumerate(TRANSFORMS):
            errors = []
            for fmt in formats:
                (row,) = [
                    r
                    for r in results
                    if r["format"] == fmt
                    and r["input"] == input_name
                    and r["rotation"] == rotation
                    and r["smoothing"] == smoothing
                ]
                errors.append(row["rel_l2"])
            positions = [i + (t - (len(TRANSFORMS) - 1) / 2) * width for i in range(len(formats))]
            ax.bar(positions, errors, width, label=label)
        ax.axhline(MXFP4_TARGET, color="gray", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(formats)))
        ax.set_xticklabels(formats, rotation=30, ha="right")
        ax.set_title(INPUT_TITLES.get(input_name, input_name))
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel("relative L2 error of O")
    axes[0].legend(title="producer transform", fontsize=8)
    shape = report["shape"]
    fig.suptitle(
        f"MX attention accuracy vs the f64 reference on unquantized inputs "
        f"(B{shape['batch']} H{shape['heads']} S{shape['seq_q']} D{shape['dim']}, "
        f"scale mode {report['scale_mode']}; dashed: MXFP4 target {MXFP4_TARGET})"
    )
    fig.tight_layout()
    fig.savefig(args.png_path, dpi=120)
    print(f"plot: {args.png_path}")


if __name__ == "__main__":
    main()
