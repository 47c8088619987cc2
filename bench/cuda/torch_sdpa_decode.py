"""PyTorch SDPA anchors for the decode benchmark (bench/cuda/decode_bench.cu).

One decode step (Sq = 1, D = 128, bf16 Q/K/V) at the same shapes, through the cuDNN and the flash
backends, timed with CUDA events around CUDA-graph replays; beside it a read-only bandwidth probe
(a sum over 2 GiB). Bytes counted: K and V once. Prints a table and writes JSON.

Usage: python3 torch_sdpa_decode.py [--json PATH] [--quick]
"""

import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [
    ("B1_H32_K32_S128k", 1, 32, 32, 131072),
    ("B8_H32_K8_S32k", 8, 32, 8, 32768),
    ("B64_H32_K8_S4k", 64, 32, 8, 4096),
    ("B1_H32_K32_S1k_graph", 1, 32, 32, 1024),
    ("B1_H32_K32_S8k_graph", 1, 32, 32, 8192),
]
DIM = 128
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]


def time_graph(fn, reps, batch):
    """Median microseconds of one replay of a graph capturing fn()."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(3):
        graph.replay()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0 / batch)
    times.sort()
    return times[len(times) // 2]


def time_eager(fn, reps, batch):
    """Median microseconds of one call of fn(), launched back to back (no graph)."""
    for _ in range(3):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0 / batch)
    times.sort()
    return times[len(times) // 2]


def probe(reps):
    x = torch.rand((2 << 30) // 4, device="cuda", dtype=torch.float32)
    out = torch.empty((), device="cuda", dtype=torch.float32)
    us = time_graph(lambda: torch.sum(x, dim=0, out=out), reps, 1)
    del x
    return (2 << 30) / (us * 1e-6) / 1e9


def run_shape(name, batch, heads_q, heads_kv, keys, backend_name, backend, reps):
    q = torch.randn(batch, heads_q, 1, DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, heads_kv, keys, DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, heads_kv, keys, DIM, device="cuda", dtype=torch.bfloat16)
    kv_bytes = 2 * k.numel() * k.element_size()
    result = {"shape": name, "backend": backend_name, "kv_bytes": kv_bytes}
    gqa = heads_q != heads_kv
    small = kv_bytes < (256 << 20)

    def step():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)

    batch_size = 50 if small else 5
    try:
        us, timing = time_graph(step, reps, batch_size), "graph"
    except RuntimeError:
        try:
            us, timing = time_eager(step, reps, batch_size), "eager"
        except RuntimeError as err:
            us, timing = None, str(err).splitlines()[0][:200]
    if us is None:
        result.update(us=None, gbps=None, error=timing)
    else:
        result.update(us=us, gbps=kv_bytes / (us * 1e-6) / 1e9, gqa="native" if gqa else "none", timing=timing)
    del q, k, v
    torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default="torch_sdpa_decode.json")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = 5 if args.quick else 15
    probe_gbps = probe(reps)
    results = []
    for name, batch, heads_q, heads_kv, keys in SHAPES:
        for backend_name, backend in BACKENDS:
            results.append(run_shape(name, batch, heads_q, heads_kv, keys, backend_name, backend, reps))
    device = torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}; read-only probe (sum over 2 GiB): {probe_gbps:.0f} GB/s")
    print(f"{'shape':22} {'backend':7} {'time_us':>10} {'GB/s':>9} {'%probe':>7}")
    for r in results:
        if r["us"] is None:
            print(f"{r['shape']:22} {r['backend']:7} {'n/a':>10}  {r.get('error', '')}")
        else:
            print(f"{r['shape']:22} {r['backend']:7} {r['us']:10.2f} {r['gbps']:9.0f} {100 * r['gbps'] / probe_gbps:6.1f}%"
                  f"  ({r['timing']})")
    with open(args.json, "w") as f:
        json.dump({"device": device, "torch": torch.__version__, "probe_gbps": probe_gbps, "results": results}, f,
                  indent=2)


if __name__ == "__main__":
    main()
