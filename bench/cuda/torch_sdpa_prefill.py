"""Anchors for the prefill benchmark, measured in the same call: PyTorch SDPA's cuDNN and flash
backends on the shapes of bench/cuda/prefill_bench.cu (B=4, H=32, S=4096, bf16, D = 64, 128, 256,
causal top-left and not), and the bf16 matrix rate of torch.matmul (8192^3, random data).

With --ours (the JSON of mxattn_prefill_bench) it joins both: a table of TFLOP/s, % of the
measured matrix rate and the ratio to each anchor, and a PNG plot.

FLOPs as FlashAttention counts them: 4 * B * H * S^2 * D, halved when causal. Timing: CUDA events,
median of repeated calls after a warm-up. Q, K and V are BSHD tensors passed as BHSD views, the
memory layout mxattn reads.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BATCH, HEADS, SEQ = 4, 32, 4096
DIMS = (64, 128, 256)
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def median_ms(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def matmul_tflops(reps):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: torch.matmul(a, b), reps)
    return 2 * n**3 / (ms * 1e-3) / 1e12


def attention_flops(dim, causal):
    return 4 * BATCH * HEADS * SEQ * SEQ * dim / (2 if causal else 1)


def measure_anchors(reps):
    results = []
    for dim in DIMS:
        shape = (BATCH, SEQ, HEADS, dim)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
                   for _ in range(3))
        for causal in (False, True):
            for name, backend in BACKENDS.items():
                def call():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    ms = median_ms(call, reps)
                    tflops = attention_flops(dim, causal) / (ms * 1e-3) / 1e12
                except RuntimeError as e:  # a backend that refuses the shape
                    print(f"{name} D{dim} causal={causal}: {str(e).splitlines()[0]}")
                    ms, tflops = None, None
                results.append({"dim": dim, "causal": causal, "backend": name, "ms": ms,
                                "tflops": tflops})
        del q, k, v
    return results


def report(anchors, ours, plot_path):
    rate = anchors["matmul_tflops"]
    table = {(r["dim"], r["causal"], r["backend"]): r["tflops"] for r in anchors["results"]}
    print(f"bf16 matmul (torch, 8192^3): {rate:.0f} TFLOP/s")
    print(f"{'shape':28} {'ours':>7} {'%mm':>6} {'cudnn':>7} {'x_cudnn':>8} {'flash':>7} {'x_flash':>8}")
    rows = []
    for r in ours["results"]:
        key = (r["dim"], r["causal"])
        cudnn, flash = table.get(key + ("cudnn",)), table.get(key + ("flash",))
        label = f"D{r['dim']} {'causal' if r['causal'] else 'non-causal'}"
        fmt = lambda x: f"{x:7.1f}" if x else f"{'n/a':>7}"
        ratio = lambda a: f"{r['tflops'] / a:8.3f}" if a else f"{'n/a':>8}"
        print(f"B{BATCH} H{HEADS} S{SEQ} {label:14} {r['tflops']:7.1f} {100 * r['tflops'] / rate:5.1f}% "
              f"{fmt(cudnn)} {ratio(cudnn)} {fmt(flash)} {ratio(flash)}")
        rows.append((label, r["tflops"], cudnn or 0.0, flash or 0.0))
    for r in ours.get("sparse", []):
        print(f"B{BATCH} H{HEADS} S{SEQ} D{r['dim']} block-sparse {100 * r['density']:.0f}% "
              f"(blocks {r['block']}): {r['ms']:.3f} ms, {r['speedup_vs_dense']:.2f}x dense")
    if plot_path:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.27
        xs = range(len(rows))
        for n, (name, col) in enumerate((("mxattn", 1), ("cuDNN (SDPA)", 2), ("flash (SDPA)", 3))):
            ax.bar([x + (n - 1) * width for x in xs], [row[col] for row in rows], width, label=name)
        ax.axhline(rate, color="gray", linestyle="--", label=f"bf16 matmul {rate:.0f}")
        ax.set_xticks(list(xs), [row[0] for row in rows])
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"Prefill forward, bf16, B={BATCH} H={HEADS} S={SEQ} ({ours.get('device', '')})")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(plot_path, dpi=120)
        print(f"plot: {plot_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the anchors here")
    parser.add_argument("--ours", help="mxattn_prefill_bench's JSON, to join with the anchors")
    parser.add_argument("--plot", help="PNG plot of the joined table")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    anchors = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "matmul_tflops": matmul_tflops(args.reps), "results": measure_anchors(args.reps)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(anchors, f, indent=1)
    if args.ours:
        with open(args.ours) as f:
            report(anchors, json.load(f), args.plot)
    else:
        for r in anchors["results"]:
            print(r)


if __name__ == "__main__":
    main()
