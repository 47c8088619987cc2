"""mxattn.attention on the CPU engines, from NumPy (and PyTorch where installed), against the
NumPy model of the spec and against the C++ f64 reference engine."""

import numpy as np
import pytest

import mxattn
import reference

ml_dtypes = pytest.importorskip("ml_dtypes")


def random_qkv(rng, batch=2, seq_q=5, seq_k=70, heads_q=4, heads_kv=2, dim_qk=32, dim_v=32):
    q = rng.standard_normal((batch, seq_q, heads_q, dim_qk), dtype=np.float32)
    k = rng.standard_normal((batch, seq_k, heads_kv, dim_qk), dtype=np.float32)
    v = rng.standard_normal((batch, seq_k, heads_kv, dim_v), dtype=np.float32)
    return q, k, v


def assert_close(actual, expected, tol):
    actual = np.asarray(actual, dtype=np.float64)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


MASKS = [
    dict(),
    dict(causal="top_left"),
    dict(causal="bottom_right"),
    dict(prefix_offset=[3, 40]),
    dict(causal="bottom_right", window=9),
    dict(window=16),
    dict(kv_len=[70, 33]),
    dict(causal="bottom_right", kv_len=[5, 61]),
]


@pytest.mark.parametrize("mask", MASKS, ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()))
@pytest.mark.parametrize("engine", ["cpu", "reference"])
def test_masks_match_numpy_model(rng, mask, engine):
    q, k, v = random_qkv(rng)
    o, lse = mxattn.attention(q, k, v, return_lse=True, engine=engine, **mask)
    model_args = {key: val for key, val in mask.items() if key != "causal"}
    causal = mask.get("causal", "prefix" if "prefix_offset" in mask else "none")
    want_o, want_lse = reference.attention(q, k, v, causal=causal, **model_args)
    assert isinstance(o, np.ndarray) and o.dtype == np.float32
    assert_close(o, want_o, 2e-5)
    assert_close(lse, want_lse, 2e-5)


@pytest.mark.parametrize("split_kv", [1, 3, "auto"])
def test_fast_engine_matches_cpp_reference(rng, split_kv):
    q, k, v = random_qkv(rng, batch=3, seq_q=9, seq_k=300, heads_q=6, heads_kv=3, dim_v=64)
    args = dict(causal="bottom_right", kv_len=[300, 129, 17], split_kv=split_kv, return_lse=True)
    fast = mxattn.attention(q, k, v, engine="cpu", **args)
    ref = mxattn.attention(q, k, v, engine="reference", **args)
    for a, b in zip(fast, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_empty_rows_are_zero_with_minus_inf_lse(rng):
    q, k, v = random_qkv(rng, batch=1, seq_q=4, seq_k=40)
    o, lse = mxattn.attention(q, k, v, causal="bottom_right", kv_len=[2], return_lse=True)
    assert np.all(o[0, :2] == 0) and np.all(np.isneginf(lse[0, :, :2]))
    assert np.all(np.isfinite(o[0, 2:]))


def test_padding_past_kv_len_never_read(rng):
    q, k, v = random_qkv(rng, batch=1)
    k[:, 50:] = np.nan
    v[:, 50:] = np.inf
    o = mxattn.attention(q, k, v, kv_len=50)
    want, _ = reference.attention(q, k, v, kv_len=[50])
    assert_close(o, want, 2e-5)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_inputs_and_outputs(rng, dtype):
    np_dtype = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    q, k, v = (a.astype(np_dtype) for a in random_qkv(rng))
    o = mxattn.attention(q, k, v, causal="top_left")
    assert o.dtype == np_dtype
    want, _ = reference.attention(q.astype(np.float64), k.astype(np.float64),
                                  v.astype(np.float64), causal="top_left")
    assert_close(o.astype(np.float32), want, 1e-2)


def test_strided_views_are_read_and_written_in_place(rng):
    # BHSD storage seen as BSHD views: no copy on the way in or out.
    q_bhsd = rng.standard_normal((2, 4, 5, 32), dtype=np.float32)
    k_bhsd = rng.standard_normal((2, 2, 70, 32), dtype=np.float32)
    v_bhsd = rng.standard_normal((2, 2, 70, 32), dtype=np.float32)
    out_bhsd = np.zeros((2, 4, 5, 32), dtype=np.float32)
    q, k, v, out = (a.transpose(0, 2, 1, 3) for a in (q_bhsd, k_bhsd, v_bhsd, out_bhsd))
    result = mxattn.attention(q, k, v, causal="bottom_right", out=out)
    assert result is out
    want, _ = reference.attention(q, k, v, causal="bottom_right")
    assert_close(out_bhsd.transpose(0, 2, 1, 3), want, 2e-5)


def test_paged_cache_matches_dense(rng):
    q, k, v = random_qkv(rng, seq_k=64)
    page_size, pages = 16, 11
    order = rng.permutation(pages)[:8].reshape(2, 4).astype(np.int32)
    k_pool = rng.standard_normal((pages, page_size, 2, 32), dtype=np.float32)
    v_pool = rng.standard_normal((pages, page_size, 2, 32), dtype=np.float32)
    for b in range(2):
        for p in range(4):
            k_pool[order[b, p]] = k[b, p * page_size:(p + 1) * page_size]
            v_pool[order[b, p]] = v[b, p * page_size:(p + 1) * page_size]
    o = mxattn.attention(q, k_pool, v_pool, block_table=order, kv_len=[64, 37],
                         causal="bottom_right")
    want, _ = reference.attention(q, k, v, kv_len=[64, 37], causal="bottom_right")
    assert_close(o, want, 2e-5)


def test_block_sparse_layout(rng):
    q, k, v = random_qkv(rng, batch=1, seq_q=64, seq_k=128, heads_q=2, heads_kv=1)
    block_q, block_k = 32, 32
    # Per head: query block 0 sees key blocks {0, 2}, query block 1 sees {1, 3} / {} (empty row).
    row_ptr = np.array([[[0, 2, 4], [0, 2, 2]]], dtype=np.int32)
    col_idx = np.array([[[0, 2, 1, 3], [0, 3, 0, 0]]], dtype=np.int32)
    layout = mxattn.SparseLayout(block_q, block_k, row_ptr, col_idx)

    def block_visible(b, h):
        grid = np.zeros((2, 4), dtype=bool)
        for qb in range(2):
            grid[qb, col_idx[b, h, row_ptr[b, h, qb]:row_ptr[b, h, qb + 1]]] = True
        return np.repeat(np.repeat(grid, block_q, axis=0), block_k, axis=1)

    o, lse = mxattn.attention(q, k, v, sparse=layout, return_lse=True)
    want_o, want_lse = reference.attention(q, k, v, block_visible=block_visible)
    assert_close(o, want_o, 2e-5)
    assert_close(lse, want_lse, 2e-5)


def test_partials_combine_to_the_output(rng):
    q, k, v = random_qkv(rng, seq_k=500)
    o, lse, partial_o, partial_lse, counts = mxattn.attention(
        q, k, v, split_kv=4, tile_n=32, causal="bottom_right", kv_len=[500, 97], return_lse=True,
        return_partials=True)
    assert partial_o.shape[0] == 4 and counts.dtype == np.int32
    merged, merged_lse = mxattn.combine(partial_o, partial_lse, counts, return_lse=True)
    np.testing.assert_allclose(merged, o, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(merged_lse, lse, rtol=1e-6, atol=1e-6)


def test_scale_option(rng):
    q, k, v = random_qkv(rng)
    o = mxattn.attention(q, k, v, scale=0.3)
    want, _ = reference.attention(q, k, v, scale=0.3)
    assert_close(o, want, 2e-5)


def test_torch_cpu_tensors_come_back_as_torch(rng):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(a) for a in random_qkv(rng))
    q.requires_grad_(True)
    o = mxattn.attention(q, k.bfloat16(), v.bfloat16(), causal="top_left")
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float32
    want, _ = reference.attention(q.detach().numpy(), k.bfloat16().float().numpy(),
                                  v.bfloat16().float().numpy(), causal="top_left")
    assert_close(o.numpy(), want, 1e-5)


def test_jax_cpu_arrays_come_back_as_jax(rng, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    jax = pytest.importorskip("jax")
    q, k, v = random_qkv(rng)
    o = mxattn.attention(*(jax.numpy.asarray(a) for a in (q, k, v)), causal="top_left")
    assert isinstance(o, jax.Array)
    want, _ = reference.attention(q, k, v, causal="top_left")
    assert_close(np.asarray(o), want, 2e-5)


def test_merge_states_of_two_key_halves_is_attention_over_all_keys(rng):
    # Cascade: attention over a shared prefix and over the suffix, merged, is attention over both.
    q = rng.standard_normal((1, 3, 4, 64), dtype=np.float32)
    k = rng.standard_normal((1, 90, 2, 64), dtype=np.float32)
    v = rng.standard_normal((1, 90, 2, 64), dtype=np.float32)
    o_a, lse_a = mxattn.attention(q, k[:, :50], v[:, :50], return_lse=True)
    o_b, lse_b = mxattn.attention(q, k[:, 50:], v[:, 50:], return_lse=True)
    # [B, Sq, H, D] and [B, H, Sq] as token-major states [N, H, D], [N, H].
    o, lse = mxattn.merge_states(o_a[0], np.ascontiguousarray(lse_a[0].T), o_b[0],
                                 np.ascontiguousarray(lse_b[0].T))
    want, want_lse = mxattn.attention(q, k, v, return_lse=True)
    np.testing.assert_allclose(o, want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse[0].T, rtol=1e-5, atol=1e-5)


def test_ragged_batch_equals_one_call_per_sequence(rng):
    # Two decodes, a prefill chunk and an empty sequence, over a paged MXFP8 cache.
    q_lens, seq_lens = [1, 7, 0, 1], [50, 33, 12, 64]
    starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = rng.standard_normal((int(starts[-1]), 4, 64), dtype=np.float32)
    keys = rng.standard_normal((4, 64, 2, 64), dtype=np.float32)
    values = rng.standard_normal((4, 64, 2, 64), dtype=np.float32)
    k, k_scales = mxattn.quantize(keys, "e4m3")
    v, v_scales = mxattn.quantize(values, "e4m3")
    pages = k.reshape(16, 16, 2, 64), v.reshape(16, 16, 2, 64)
    page_scales = k_scales.reshape(16, 16, 2, 2), v_scales.reshape(16, 16, 2, 2)
    table = np.arange(16, dtype=np.int32).reshape(4, 4)
    o, lse = mxattn.ragged_attention(q, *pages, starts, seq_lens, block_table=table,
                                     k_scales=page_scales[0], v_scales=page_scales[1],
                                     formats="e4m3", causal="bottom_right", return_lse=True)
    assert o.shape == (9, 4, 64) and lse.shape == (4, 9)
    for b, n in enumerate(q_lens):
        if n == 0:
            continue
        rows = slice(starts[b], starts[b + 1])
        want, want_lse = mxattn.attention(q[None, rows], k[b:b + 1], v[b:b + 1],
                                          k_scales=k_scales[b:b + 1], v_scales=v_scales[b:b + 1],
                                          formats="e4m3", kv_len=[seq_lens[b]],
                                          causal="bottom_right", split_kv="auto", return_lse=True)
        np.testing.assert_array_equal(o[rows], want[0])
        np.testing.assert_array_equal(lse[:, rows], want_lse[0])


def test_ragged_metadata_errors_name_the_argument(rng):
    q = rng.standard_normal((5, 2, 32), dtype=np.float32)
    k = rng.standard_normal((2, 16, 2, 32), dtype=np.float32)
    with pytest.raises(ValueError, match=r"cu_seqlens_q must not decrease"):
        mxattn.ragged_attention(q, k, k, [0, 3, 2], [16, 16])
    with pytest.raises(ValueError, match=r"sequence 1: kv_len\[0\] must be in \[0, 16\]"):
        mxattn.ragged_attention(q, k, k, [0, 3, 5], [16, 17])


def test_batch_attention_plans_once_and_runs_steps(rng):
    k = rng.standard_normal((8, 16, 2, 64), dtype=np.float32)
    v = rng.standard_normal((8, 16, 2, 64), dtype=np.float32)
    step = mxattn.BatchAttention(max_sequences=3, max_query_rows=12, max_kv_len=64, page_size=16,
                                 num_pages=8, heads_q=4, heads_kv=2, head_dim=64, formats="f32",
                                 out_dtype="f32", return_lse=True)
    table = np.array([[3, 1, 0, 2], [7, 6, 5, 4]], np.int32)
    for lens, q_lens in (([10, 40], [1, 5]), ([11, 41], [1, 1])):
        starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
        q = rng.standard_normal((int(starts[-1]), 4, 64), dtype=np.float32)
        o, lse = step.run(q, k, v, starts, lens, table)
        want, want_lse = mxattn.ragged_attention(q, k, v, starts, lens, block_table=table,
                                                 causal="bottom_right", split_kv="auto",
                                                 return_lse=True)
        np.testing.assert_array_equal(o, want)
        np.testing.assert_array_equal(lse, want_lse)
    with pytest.raises(ValueError, match=r"seq_lens\[1\] = 70 is past the plan's max_kv_len"):
        step.run(q, k, v, starts, [11, 70], table)
