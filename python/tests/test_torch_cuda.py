"""The CUDA decode engine through PyTorch CUDA tensors, against
torch.nn.functional.scaled_dot_product_attention; a decode step captured in a CUDA graph. Skips
where there is no GPU, no PyTorch, or no CUDA engine in this build (MXATTN_CUDA=ON pip install .)."""

import numpy as np
import pytest

import mxattn

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and mxattn.cuda_available()),
    reason="needs a GPU and a CUDA build of mxattn (MXATTN_CUDA=ON pip install .)")


def sdpa(q, k, v, *, causal=None, kv_len=None, scale=None):
    """PyTorch's attention on BSHD tensors, per batch entry over its valid keys, in f32."""
    from torch.nn.attention.bias import causal_lower_right

    batch, seq_q, heads_q, _ = q.shape
    group = heads_q // k.shape[2]
    outs = []
    for b in range(batch):
        valid = k.shape[1] if kv_len is None else int(kv_len[b])
        qb = q[b:b + 1].transpose(1, 2).float()
        kb = k[b:b + 1, :valid].transpose(1, 2).float().repeat_interleave(group, dim=1)
        vb = v[b:b + 1, :valid].transpose(1, 2).float().repeat_interleave(group, dim=1)
        mask = causal_lower_right(seq_q, valid) if causal == "bottom_right" else None
        ob = torch.nn.functional.scaled_dot_product_attention(
            qb, kb, vb, attn_mask=mask, is_causal=causal == "top_left", scale=scale)
        outs.append(ob.transpose(1, 2))
    return torch.cat(outs)


def generator(seed):
    print(f"seed {seed}")
    return torch.Generator(device="cuda").manual_seed(seed)


def randn(gen, *shape, dtype=torch.bfloat16):
    return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


def assert_close(actual, expected, tol):
    torch.testing.assert_close(actual.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("split_kv", [1, 4, "auto"])
def test_decode_bf16_cache_matches_sdpa(split_kv):
    gen = generator(11)
    q = randn(gen, 3, 1, 32, 128)
    k, v = randn(gen, 3, 1000, 8, 128), randn(gen, 3, 1000, 8, 128)
    kv_len = torch.tensor([1000, 517, 33], dtype=torch.int32)
    o = mxattn.attention(q, k, v, kv_len=kv_len, split_kv=split_kv)
    assert o.is_cuda and o.dtype == torch.bfloat16 and o.shape == q.shape
    assert_close(o, sdpa(q, k, v, kv_len=kv_len.tolist()), 2e-2)


@pytest.mark.parametrize("keys", [1024, 5000, 40000])
def test_auto_split_partials_are_sized_for_the_engine_and_recombine(keys):
    # The CUDA engine's own partition (its tiles and auto target) sizes the partial buffers; the
    # host combine of what it wrote gives its O and LSE back.
    gen = generator(keys)
    q = randn(gen, 2, 1, 16, 128)
    k, v = randn(gen, 2, keys, 4, 128), randn(gen, 2, keys, 4, 128)
    kv_len = torch.tensor([keys, keys // 3 + 1], dtype=torch.int32)
    o, lse, partial_o, partial_lse, counts = mxattn.attention(
        q, k, v, kv_len=kv_len, split_kv="auto", return_lse=True, return_partials=True,
        out_dtype="f32")
    plan = mxattn.plan(q, k, v, kv_len=kv_len, split_kv="auto", engine="cuda")
    assert plan["engine"] == "cuda-decode"
    assert partial_o.shape[0] == plan["partial_slots"] >= 2
    assert int(counts.max()) == max(t["count"] for t in plan["tiles"])
    merged, merged_lse = mxattn.combine(partial_o.cpu(), partial_lse.cpu(), counts.cpu(),
                                        return_lse=True)
    assert_close(merged, o.cpu(), 1e-5)
    assert_close(merged_lse, lse.cpu(), 1e-5)
    assert_close(o, sdpa(q, k, v, kv_len=kv_len.tolist()), 2e-2)


@pytest.mark.parametrize("causal", ["bottom_right", "top_left"])
def test_causal_alignments_match_sdpa(causal):
    gen = generator(12)
    q = randn(gen, 2, 5, 8, 64, dtype=torch.float16)
    k, v = randn(gen, 2, 300, 2, 64, dtype=torch.float16), randn(gen, 2, 300, 2, 64,
                                                                 dtype=torch.float16)
    o, lse = mxattn.attention(q, k, v, causal=causal, return_lse=True, out_dtype="f32")
    assert_close(o, sdpa(q, k, v, causal=causal), 2e-3)
    assert lse.shape == (2, 8, 5) and lse.dtype == torch.float32


def test_mxfp8_kv_cache_matches_sdpa_on_the_decoded_cache():
    gen = generator(13)
    q = randn(gen, 2, 1, 16, 128)
    kv = torch.randn(2, 2, 700, 4, 128, generator=torch.Generator().manual_seed(13))
    (k8, k_scales), (v8, v_scales) = (mxattn.quantize(x, "mxfp8") for x in kv)
    assert k8.dtype == torch.uint8 and not k8.is_cuda
    k_exact = mxattn.dequantize(k8, k_scales, "e4m3").cuda()
    v_exact = mxattn.dequantize(v8, v_scales, "e4m3").cuda()
    o = mxattn.attention(q, k8.cuda(), v8.cuda(), k_scales=k_scales.cuda(),
                         v_scales=v_scales.cuda(), formats="e4m3", kv_len=[700, 250],
                         split_kv="auto", out_dtype="f32")
    assert_close(o, sdpa(q, k_exact, v_exact, kv_len=[700, 250]), 1e-2)


@pytest.mark.parametrize("fmt", ["e5m2", "e2m3", "e2m1"])
def test_mx_caches_agree_with_the_cpu_engine(fmt):
    gen = generator(14)
    q = randn(gen, 1, 2, 8, 128)
    kv = torch.randn(2, 1, 300, 2, 128, generator=torch.Generator().manual_seed(14))
    (k, k_scales), (v, v_scales) = (mxattn.quantize(x, fmt) for x in kv)
    args = dict(causal="bottom_right", k_scales=k_scales, v_scales=v_scales, formats=fmt,
                return_lse=True, out_dtype="f32", split_kv=3)
    o_cpu, lse_cpu = mxattn.attention(q.cpu(), k, v, **args)
    args.update(k_scales=k_scales.cuda(), v_scales=v_scales.cuda())
    o_gpu, lse_gpu = mxattn.attention(q, k.cuda(), v.cuda(), **args)
    assert_close(o_gpu.cpu(), o_cpu, 2e-3)
    assert_close(lse_gpu.cpu(), lse_cpu, 2e-3)


def test_paged_cache_matches_sdpa():
    gen = generator(15)
    page_size, pages = 16, 40
    q = randn(gen, 2, 1, 8, 128)
    k_pool, v_pool = randn(gen, pages, page_size, 2, 128), randn(gen, pages, page_size, 2, 128)
    table = torch.randperm(pages, generator=torch.Generator().manual_seed(15))[:32]
    table = table.reshape(2, 16).to(torch.int32)
    kv_len = [256, 100]
    o = mxattn.attention(q, k_pool, v_pool, block_table=table, kv_len=kv_len)
    k = k_pool[table.long().cuda()].reshape(2, 16 * page_size, 2, 128)
    v = v_pool[table.long().cuda()].reshape(2, 16 * page_size, 2, 128)
    assert_close(o, sdpa(q, k, v, kv_len=kv_len), 2e-2)


def test_work_follows_the_current_torch_stream():
    gen = generator(16)
    q, k, v = randn(gen, 1, 1, 8, 128), randn(gen, 1, 2048, 8, 128), randn(gen, 1, 2048, 8, 128)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        o = mxattn.attention(q, k, v, split_kv="auto")
        want = sdpa(q, k, v)
    torch.cuda.current_stream().wait_stream(side)
    assert_close(o, want, 2e-2)


def test_decode_step_replays_in_a_cuda_graph():
    gen = generator(17)
    q = randn(gen, 2, 1, 32, 128)
    k, v = randn(gen, 2, 4096, 8, 128), randn(gen, 2, 4096, 8, 128)
    kv_len = [4096, 1500]
    step = mxattn.DecodePlan(q, k, v, kv_len=kv_len, split_kv="auto", return_lse=True)
    assert step.partial_slots >= 1
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step.run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step.run()
    for _ in range(3):
        q.copy_(randn(gen, 2, 1, 32, 128))
        k[:, :8].copy_(randn(gen, 2, 8, 8, 128))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, sdpa(q, k, v, kv_len=kv_len), 2e-2)
        assert torch.isfinite(lse).all()
    assert out is step.out


def test_gpu_errors_are_python_errors():
    q = torch.zeros(1, 1, 4, 96, device="cuda", dtype=torch.bfloat16)
    k = torch.zeros(1, 64, 4, 96, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError, match="head dims"):
        mxattn.attention(q, k, k)
    with pytest.raises(ValueError, match="same device"):
        mxattn.attention(q, k.cpu(), k)
    with pytest.raises(ValueError, match="must be >= 1"):
        mxattn.attention(q, torch.zeros(1, 64, 0, 96, device="cuda", dtype=torch.bfloat16), k)
    with pytest.raises(ValueError, match="host memory"):
        mxattn.attention(q, k, k, engine="cpu")


def test_cupy_arrays_come_back_as_cupy():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(18)
    q, k, v = (cupy.asarray(rng.standard_normal(s).astype(np.float16))
               for s in ((1, 1, 8, 64), (1, 200, 2, 64), (1, 200, 2, 64)))
    o = mxattn.attention(q, k, v, out_dtype="f32")
    assert isinstance(o, cupy.ndarray)
    want = sdpa(*(torch.from_dlpack(x) for x in (q, k, v)))
    assert_close(torch.from_dlpack(o), want, 2e-3)


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_quantize_and_write_kv_on_the_gpu_give_the_hosts_bits(fmt):
    gen = generator(21)
    x = randn(gen, 2, 100, 4, 64)
    data, scales = mxattn.quantize(x, fmt)
    host_data, host_scales = mxattn.quantize(x.cpu(), fmt)
    assert data.is_cuda and torch.equal(data.cpu(), host_data)
    assert torch.equal(scales.cpu(), host_scales)
    v_data, v_scales = mxattn.quantize(x, fmt, axis=1)  # [B, H, S/32, D]: attention's layout
    assert v_scales.shape == (2, 4, 4, 64)
    assert torch.equal(v_scales.cpu(), mxattn.quantize(x.cpu(), fmt, axis=1)[1])

    k, v = randn(gen, 30, 4, 64), randn(gen, 30, 4, 64)
    slots = torch.randperm(48, device="cuda")[:30]
    slots[5] = -1
    width = 64 * (8 if fmt == "e4m3" else 4) // 8
    caches = [torch.zeros(3, 16, 4, width, dtype=torch.uint8, device="cuda") for _ in range(2)]
    cache_scales = [torch.zeros(3, 16, 4, 2, dtype=torch.uint8, device="cuda") for _ in range(2)]
    mxattn.write_kv(k, v, *caches, slots, k_scales=cache_scales[0], v_scales=cache_scales[1],
                    format=fmt)
    host = [c.cpu().zero_() for c in caches + cache_scales]
    mxattn.write_kv(k.cpu(), v.cpu(), host[0], host[1], slots.cpu(), k_scales=host[2],
                    v_scales=host[3], format=fmt)
    for got, want in zip(caches + cache_scales, host):
        assert torch.equal(got.cpu(), want)


def test_combine_and_merge_states_on_the_gpu():
    gen = generator(31)
    q = randn(gen, 1, 1, 8, 128)
    k, v = randn(gen, 1, 3000, 2, 128), randn(gen, 1, 3000, 2, 128)
    o, lse, parts, part_lse, counts = mxattn.attention(
        q, k, v, split_kv="auto", return_lse=True, return_partials=True, out_dtype="f32")
    merged = mxattn.combine(parts, part_lse, counts)
    assert merged.is_cuda
    assert_close(merged, o, 1e-5)
    o_a, lse_a = mxattn.attention(q, k[:, :1000], v[:, :1000], return_lse=True, out_dtype="f32")
    o_b, lse_b = mxattn.attention(q, k[:, 1000:], v[:, 1000:], return_lse=True, out_dtype="f32")
    both, both_lse = mxattn.merge_states(o_a[0], lse_a[0].T.contiguous(), o_b[0],
                                         lse_b[0].T.contiguous())
    assert_close(both, o[0], 1e-4)
    assert_close(both_lse, lse[0].T, 1e-4)
