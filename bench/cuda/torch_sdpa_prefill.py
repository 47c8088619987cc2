"""The anchors of the prefill benchmark (bench/cuda/prefill_bench.cu), timed in the same call.

On its shapes (B=4, H=32, S=4096, D = 64, 128, 256, causal top-left and not):
  cudnn    PyTorch SDPA's cuDNN backend, bf16
  fa2      PyTorch SDPA's flash backend (FlashAttention-2), bf16
  fa3      FlashAttention-3's flash_attn_func, bf16
  fa3_fp8  the same with E4M3 Q/K/V (descales of 1), bf16 out, non-causal: beside mxattn's MXFP8 rows
and the bf16 matrix rate of torch.matmul (8192^3, random data). FA3 comes from the PyPI wheel
fa3-fwd (import fa3_fwd_interface; scripts/fetch_fa3.sh): where it does not import, its rows are
skipped and the reason printed and written.

With --ours (the JSON of mxattn_prefill_bench) it joins both: a table of TFLOP/s, % of the
measured matrix rate and the ratio to each anchor (above 1: mxattn faster), and a PNG plot.

FLOPs as FlashAttention counts them: 4 * B * H * S^2 * D, halved when causal. Timing: CUDA events,
median of repeated calls after a warm-up. Q, K and V are BSHD tensors (SDPA takes their BHSD
views), the memory layout mxattn reads.

Usage: python3 torch_sdpa_prefill.py [--json PATH] [--ours PATH] [--plot PNG] [--reps N]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import json_writable, write_json  # noqa: E402

BATCH, HEADS, SEQ = 4, 32, 4096
DIMS = (64, 128, 256)
ANCHORS = ("cudnn", "fa2", "fa3")  # the bf16 anchors, in the table's order


def median_ms(fn, reps, warmup=3):
    import torch
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
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: torch.matmul(a, b), reps)
    return 2 * n**3 / (ms * 1e-3) / 1e12


def attention_flops(dim, causal):
    return 4 * BATCH * HEADS * SEQ * SEQ * dim / (2 if causal else 1)


def calls(q, k, v, causal, fa3):
    """(backend, format, call) of every anchor of one shape: q, k, v are bf16 [B, S, H, D]."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend):
        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                      v.transpose(1, 2), is_causal=causal)
        return call

    rows = [("cudnn", "bf16", sdpa(SDPBackend.CUDNN_ATTENTION)),
            ("fa2", "bf16", sdpa(SDPBackend.FLASH_ATTENTION))]
    if fa3 is None:
        return rows
    rows.append(("fa3", "bf16", lambda: fa3.flash_attn_func(q, k, v, causal=causal)))
    if not causal:
        q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
        ones = torch.ones(BATCH, HEADS, dtype=torch.float32, device="cuda")
        rows.append(("fa3_fp8", "e4m3", lambda: fa3.flash_attn_func(
            q8, k8, v8, causal=False, q_descale=ones, k_descale=ones, v_descale=ones)))
    return rows


def measure_anchors(reps, fa3):
    import torch
    results = []
    for dim in DIMS:
        q, k, v = (torch.randn(BATCH, SEQ, HEADS, dim, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        for causal in (False, True):
            for name, fmt, call in calls(q, k, v, causal, fa3):
                try:
                    with torch.inference_mode():
                        ms = median_ms(call, reps)
                    tflops = attention_flops(dim, causal) / (ms * 1e-3) / 1e12
                except RuntimeError as e:  # a backend that refuses the shape
                    print(f"{name} D{dim} causal={causal}: {str(e).splitlines()[0]}")
                    ms, tflops = None, None
                results.append({"dim": dim, "causal": causal, "backend": name, "format": fmt,
                                "ms": ms, "tflops": tflops})
        del q, k, v
        torch.cuda.empty_cache()
    return results


def report(anchors, ours, plot_path=None):
    """The joined table of mxattn_prefill_bench's JSON (`ours`) and this script's (`anchors`)."""
    rate = anchors["matmul_tflops"]
    table = {(r["dim"], r["causal"], r["backend"]): r["tflops"] for r in anchors["results"]}
    for backend, reason in anchors.get("skipped", {}).items():
        print(f"{backend}: skipped ({reason})")
    fmt = lambda x: f"{x:7.1f}" if x else f"{'n/a':>7}"
    print(f"bf16 matmul (torch, 8192^3): {rate:.0f} TFLOP/s; ratios: mxattn / anchor, above 1: "
          "mxattn faster")
    print(f"{'shape':28} {'ours':>7} {'%mm':>6}"
          + "".join(f" {name:>7} {'x_' + name:>8}" for name in ANCHORS))
    rows = []
    for r in ours["results"]:
        key = (r["dim"], r["causal"])
        label = f"D{r['dim']} {'causal' if r['causal'] else 'non-causal'}"
        line = f"B{BATCH} H{HEADS} S{SEQ} {label:14} {r['tflops']:7.1f} {100 * r['tflops'] / rate:5.1f}%"
        for name in ANCHORS:
            a = table.get(key + (name,))
            line += f" {fmt(a)} " + (f"{r['tflops'] / a:8.3f}" if a else f"{'n/a':>8}")
        print(line)
        rows.append((label, r["tflops"], *(table.get(key + (name,)) or 0.0 for name in ANCHORS)))
    if ours.get("mx"):
        print(f"{'MX Q/K/V, non-causal':28} {'ours':>7} {'x bf16':>7} {'fa3_fp8':>7} {'x_fa3_fp8':>9}")
    for r in ours.get("mx", []):
        # FA3's FP8 beside MXFP8 E4M3 only.
        a = table.get((r["dim"], False, "fa3_fp8")) if r["format"] == "e4m3" else None
        label = f"D{r['dim']} {r['format']}"
        ratio = f"{r['tflops'] / a:9.3f}" if a else f"{'n/a':>9}"
        print(f"B{BATCH} H{HEADS} S{SEQ} {label:14} {r['tflops']:7.1f} {r['ratio_to_bf16']:7.2f} "
              f"{fmt(a)} {ratio}")
    for r in ours.get("sparse", []):
        print(f"B{BATCH} H{HEADS} S{SEQ} D{r['dim']} block-sparse {100 * r['density']:.0f}% "
              f"(blocks {r['block']}): {r['ms']:.3f} ms, {r['speedup_vs_dense']:.2f}x dense")
    if plot_path:
        plot(rows, rate, ours.get("device", ""), plot_path)


def plot(rows, rate, device, path):
    try:
        import matplotlib
    except ImportError:
        print(f"plot: matplotlib is not installed, {path} not drawn")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    names = ("mxattn", "cuDNN (SDPA)", "FA2 (SDPA)", "FA3")
    width = 0.8 / len(names)
    xs = range(len(rows))
    for n, name in enumerate(names):
        ax.bar([x + (n - (len(names) - 1) / 2) * width for x in xs], [row[n + 1] for row in rows],
               width, label=name)
    ax.axhline(rate, color="gray", linestyle="--", label=f"bf16 matmul {rate:.0f}")
    ax.set_xticks(list(xs), [row[0] for row in rows])
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Prefill forward, bf16, B={BATCH} H={HEADS} S={SEQ} ({device})")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the anchors here")
    parser.add_argument("--ours", help="mxattn_prefill_bench's JSON, to join with the anchors")
    parser.add_argument("--plot", help="PNG plot of the joined table")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    json_writable(args.json)
    import torch
    from fa3_loader import fa3_version, load_fa3
    fa3, fa3_missing = load_fa3()
    skipped = {} if fa3 else {"fa3": fa3_missing, "fa3_fp8": fa3_missing}
    anchors = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "fa3_fwd": fa3_version() if fa3 else None, "skipped": skipped,
               "matmul_tflops": matmul_tflops(args.reps), "results": measure_anchors(args.reps, fa3)}
    if args.json:
        write_json(args.json, anchors)
    if args.ours:
        with open(args.ours) as f:
            report(anchors, json.load(f), args.plot)
    else:
        for backend, reason in skipped.items():
            print(f"{backend}: skipped ({reason})")
        for r in anchors["results"]:
            print(r)


if __name__ == "__main__":
    main()
