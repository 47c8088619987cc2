"""The anchors of the decode benchmark (bench/cuda/decode_bench.cu), timed on the same machine.

One decode step (Sq = 1, D = 128) at the same shapes through:
  cudnn    PyTorch SDPA's cuDNN backend, bf16 Q/K/V ([B, H, S, D] tensors)
  fa2      PyTorch SDPA's flash backend (FlashAttention-2), bf16 Q/K/V ([B, H, S, D])
  fa3      FlashAttention-3's flash_attn_with_kvcache, bf16 Q and cache ([B, S, H, D])
  fa3_fp8  the same with E4M3 Q and cache (one descale per sequence and KV head), bf16 out
each timed with CUDA events around CUDA-graph replays (eager launches where capture fails), beside
a read-only bandwidth probe (a sum over 2 GiB). FA3 comes from the PyPI wheel fa3-fwd (import
fa3_fwd_interface; scripts/fetch_fa3.sh): where it does not import, its rows are skipped and the
reason printed and written. Bytes counted: K and V once. Prints a table and writes JSON.

Usage: python3 torch_sdpa_decode.py [--json PATH] [--quick]
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import json_writable, write_json  # noqa: E402
from fa3_loader import fa3_version, load_fa3  # noqa: E402

SHAPES = [
    ("B1_H32_K32_S128k", 1, 32, 32, 131072),
    ("B8_H32_K8_S32k", 8, 32, 8, 32768),
    ("B64_H32_K8_S4k", 64, 32, 8, 4096),
    ("B1_H32_K32_S1k_graph", 1, 32, 32, 1024),
    ("B1_H32_K32_S8k_graph", 1, 32, 32, 8192),
]
DIM = 128


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
    return time_calls(graph.replay, reps, batch)


def time_eager(fn, reps, batch):
    """Median microseconds of one call of fn(), launched back to back (no graph)."""
    for _ in range(3):
        fn()
    return time_calls(fn, reps, batch)


def time_calls(call, reps, batch):
    """Median over `reps` of the microseconds of one call, `batch` calls back to back timed with
    CUDA events."""
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            call()
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


def cuda_randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16).to(dtype)


def sdpa_anchor(backend):
    """A step of PyTorch SDPA on `backend` over bf16 [B, H, S, D] tensors."""
    def make(batch, heads_q, heads_kv, keys):
        q = cuda_randn(batch, heads_q, 1, DIM)
        k, v = cuda_randn(batch, heads_kv, keys, DIM), cuda_randn(batch, heads_kv, keys, DIM)
        gqa = heads_q != heads_kv

        def step():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
        return step, 2 * k.numel() * k.element_size()
    return make


def fa3_anchor(fa3, fp8):
    """A step of FA3's flash_attn_with_kvcache over a [B, S, H, D] cache, bf16 or E4M3 (with
    descales of 1, one per sequence and KV head; the output is bf16 either way)."""
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16

    def make(batch, heads_q, heads_kv, keys):
        q = cuda_randn(batch, 1, heads_q, DIM, dtype=dtype)
        k = cuda_randn(batch, keys, heads_kv, DIM, dtype=dtype)
        v = cuda_randn(batch, keys, heads_kv, DIM, dtype=dtype)
        seqlens = torch.full((batch,), keys, dtype=torch.int32, device="cuda")
        scales = {}
        if fp8:
            ones = torch.ones(batch, heads_kv, dtype=torch.float32, device="cuda")
            scales = {"q_descale": ones, "k_descale": ones, "v_descale": ones}

        def step():
            return fa3.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, **scales)
        return step, 2 * k.numel() * k.element_size()
    return make


def anchors(fa3):
    """(backend, KV type, maker) of every anchor that can run here."""
    rows = [("cudnn", "bf16", sdpa_anchor(SDPBackend.CUDNN_ATTENTION)),
            ("fa2", "bf16", sdpa_anchor(SDPBackend.FLASH_ATTENTION))]
    if fa3 is not None:
        rows += [("fa3", "bf16", fa3_anchor(fa3, False)), ("fa3_fp8", "e4m3", fa3_anchor(fa3, True))]
    return rows


def run_shape(shape, backend, kv, make, reps):
    name, batch, heads_q, heads_kv, keys = shape
    result = {"shape": name, "backend": backend, "kv": kv}
    try:
        step, kv_bytes = make(batch, heads_q, heads_kv, keys)
    except (RuntimeError, ValueError) as err:
        result.update(us=None, gbps=None, error=str(err).splitlines()[0][:200])
        return result
    result["kv_bytes"] = kv_bytes
    batch_size = 50 if kv_bytes < (256 << 20) else 5
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
        result.update(us=us, gbps=kv_bytes / (us * 1e-6) / 1e9, timing=timing)
    del step
    torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--quick", action="store_true", help="5 timed batches a row, not 15")
    args = parser.parse_args()
    json_writable(args.json)
    reps = 5 if args.quick else 15
    fa3, fa3_missing = load_fa3()
    skipped = {} if fa3 else {"fa3": fa3_missing, "fa3_fp8": fa3_missing}
    for backend, reason in skipped.items():
        print(f"{backend}: skipped ({reason})")
    probe_gbps = probe(reps)
    results = [run_shape(shape, backend, kv, make, reps)
               for shape in SHAPES for backend, kv, make in anchors(fa3)]
    device = torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}; read-only probe (sum over 2 GiB): "
          f"{probe_gbps:.0f} GB/s")
    print(f"{'shape':22} {'backend':8} {'kv':5} {'time_us':>10} {'GB/s':>9} {'%probe':>7}")
    for r in results:
        if r["us"] is None:
            print(f"{r['shape']:22} {r['backend']:8} {r['kv']:5} {'n/a':>10}  {r.get('error', '')}")
        else:
            print(f"{r['shape']:22} {r['backend']:8} {r['kv']:5} {r['us']:10.2f} {r['gbps']:9.0f} "
                  f"{100 * r['gbps'] / probe_gbps:6.1f}%  ({r['timing']})")
    if args.json:
        write_json(args.json, {"device": device, "torch": torch.__version__,
                               "fa3_fwd": fa3_version() if fa3 else None,
                               "probe_gbps": probe_gbps, "skipped": skipped, "results": results},
                   indent=2)


if __name__ == "__main__":
    main()
