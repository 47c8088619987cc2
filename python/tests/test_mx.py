"""mxattn.quantize / dequantize against ml_dtypes' decoding, and attention over MX inputs against
the NumPy model on the exactly decoded values."""

import numpy as np
import pytest

import mxattn
import reference

ml_dtypes = pytest.importorskip("ml_dtypes")

FORMATS = ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"]
MAX_VALUE = {"e4m3": 448.0, "e5m2": 57344.0, "e2m3": 7.5, "e3m2": 28.0, "e2m1": 6.0}


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_codes_decode_as_ml_dtypes_decodes_them(rng, fmt, mode):
    x = (rng.standard_normal((3, 40, 2, 64)) * rng.uniform(0.01, 100, (3, 40, 2, 1))).astype(
        np.float32)
    data, scales = mxattn.quantize(x, fmt, axis=-1, mode=mode)
    assert data.dtype == np.uint8 and scales.shape == (3, 40, 2, 2)
    assert data.shape[-1] == 64 * {"e2m3": 6, "e3m2": 6, "e2m1": 4}.get(fmt, 8) // 8
    decoded = mxattn.dequantize(data, scales, fmt, axis=-1)
    expected = reference.decode_mx(data, scales, fmt, axis=-1)
    np.testing.assert_array_equal(decoded, expected.astype(np.float32))
    # Each block's largest element lands within the format's range of its scale.
    block_max = np.abs(x).reshape(3, 40, 2, 2, 32).max(axis=-1)
    scale = np.exp2(scales.astype(np.float64) - 127)
    assert np.all(block_max / scale <= 2 * MAX_VALUE[fmt])


def test_quantize_along_keys_gives_the_scales_attention_takes(rng):
    # [B, S, H, D] along the keys: scales [B, H, ceil(S / 32), D], attention's v_scale_axis="keys"
    # layout, even where H == ceil(S / 32) would let the other layout pass for it.
    for heads, keys in ((2, 70), (3, 96)):
        v = rng.standard_normal((1, keys, heads, 32), dtype=np.float32)
        data, scales = mxattn.quantize(v, "e4m3", axis=1)
        assert scales.shape == (1, heads, -(-keys // 32), 32)
        decoded = reference.decode_mx(data, scales.transpose(0, 2, 1, 3), "e4m3", axis=1)
        np.testing.assert_array_equal(mxattn.dequantize(data, scales, "e4m3", axis=1), decoded)
        q = rng.standard_normal((1, 1, heads, 32), dtype=np.float32)
        o = mxattn.attention(q, v, data, v_scales=scales, v_scale_axis="keys", formats="e4m3")
        want, _ = reference.attention(q, v.astype(np.float64), decoded)
        np.testing.assert_allclose(o, want, rtol=2e-5, atol=2e-5)


def test_quantize_rejects_a_last_axis_of_partial_groups():
    with pytest.raises(ValueError, match="e2m1 packs 2 elements"):
        mxattn.quantize(np.zeros((4, 31), np.float32), "mxfp4")


@pytest.mark.parametrize("formats", [("bf16", "e4m3", "e4m3"), ("e4m3", "e5m2", "e2m1"),
                                     ("e2m3", "e3m2", "e2m3")])
def test_attention_over_mx_inputs_matches_decoded_model(rng, formats):
    q, k, v = (rng.standard_normal(shape, dtype=np.float32)
               for shape in ((2, 3, 4, 64), (2, 90, 2, 64), (2, 90, 2, 64)))
    stored, scales, exact = [], [], []
    for x, fmt in zip((q, k, v), formats):
        if fmt == "bf16":
            stored.append(x.astype(ml_dtypes.bfloat16))
            scales.append(None)
            exact.append(stored[-1].astype(np.float64))
        else:
            data, s = mxattn.quantize(x, fmt)
            stored.append(data)
            scales.append(s)
            exact.append(reference.decode_mx(data, s, fmt))
    kwargs = dict(causal="bottom_right", kv_len=[90, 41], return_lse=True, out_dtype="f32",
                  q_scales=scales[0], k_scales=scales[1], v_scales=scales[2],
                  formats=tuple(None if f == "bf16" else f for f in formats))
    o, lse = mxattn.attention(*stored, **kwargs)
    want_o, want_lse = reference.attention(*exact, causal="bottom_right", kv_len=[90, 41])
    np.testing.assert_allclose(o, want_o, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=2e-5, atol=2e-5)
    ref_o = mxattn.attention(*stored, engine="reference", **kwargs)[0]
    np.testing.assert_allclose(o, ref_o, rtol=1e-5, atol=1e-5)


def test_one_format_name_types_only_the_byte_tensors(rng):
    q = rng.standard_normal((1, 1, 4, 32), dtype=np.float32)
    kv = rng.standard_normal((1, 40, 1, 32), dtype=np.float32)
    k, k_scales = mxattn.quantize(kv, "e4m3")
    o = mxattn.attention(q, k, k, k_scales=k_scales, v_scales=k_scales, formats="mxfp8")
    exact = reference.decode_mx(k, k_scales, "e4m3")
    want, _ = reference.attention(q, exact, exact)
    np.testing.assert_allclose(o, want, rtol=2e-5, atol=2e-5)


def test_ml_dtypes_float8_arrays_are_taken_by_their_dtype(rng):
    q = rng.standard_normal((1, 2, 2, 32), dtype=np.float32)
    data, scales = mxattn.quantize(rng.standard_normal((1, 33, 2, 32), dtype=np.float32), "e5m2")
    k = data.view(ml_dtypes.float8_e5m2)
    o = mxattn.attention(q, k, k, k_scales=scales, v_scales=scales.view(ml_dtypes.float8_e8m0fnu))
    exact = reference.decode_mx(data, scales, "e5m2")
    want, _ = reference.attention(q, exact, exact)
    np.testing.assert_allclose(o, want, rtol=2e-5, atol=2e-5)


def test_v_scales_along_the_keys(rng):
    q = rng.standard_normal((1, 2, 2, 32), dtype=np.float32)
    kv = rng.standard_normal((1, 70, 2, 32), dtype=np.float32)
    k, k_scales = mxattn.quantize(kv, "e4m3")
    v, v_scales = mxattn.quantize(kv, "e4m3", axis=1)  # [B, Hkv, Sk/32, Dv], as the engine reads
    o = mxattn.attention(q, k, v, k_scales=k_scales, v_scales=v_scales, v_scale_axis="keys",
                         formats="e4m3")
    want, _ = reference.attention(q, reference.decode_mx(k, k_scales, "e4m3"),
                                  reference.decode_mx(v, v_scales.transpose(0, 2, 1, 3), "e4m3",
                                                      axis=1))
    np.testing.assert_allclose(o, want, rtol=2e-5, atol=2e-5)


def _cache_write_case(rng, fmt, tokens=9, heads=2, dim=64, pages=3, page_size=16):
    k = rng.standard_normal((tokens, heads, dim), dtype=np.float32)
    v = rng.standard_normal((tokens, heads, dim), dtype=np.float32)
    slots = rng.permutation(pages * page_size)[:tokens].astype(np.int64)
    slots[2] = -1  # skipped
    shape = (pages, page_size, heads, dim)
    if fmt in ("bf16", "f16"):
        import ml_dtypes
        dtype = ml_dtypes.bfloat16 if fmt == "bf16" else np.float16
        return k, v, slots, np.zeros(shape, dtype), np.zeros(shape, dtype), None, None
    bytes_per_row = dim * {"e4m3": 8, "e5m2": 8, "e2m3": 6, "e3m2": 6, "e2m1": 4}[fmt] // 8
    caches = [np.full(shape[:3] + (bytes_per_row,), 0xAB, np.uint8) for _ in range(2)]
    scales = [np.full(shape[:3] + (dim // 32,), 0xAB, np.uint8) for _ in range(2)]
    return k, v, slots, caches[0], caches[1], scales[0], scales[1]


@pytest.mark.parametrize("fmt", ["bf16", "f16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1"])
def test_write_kv_places_each_token_as_quantize_makes_it(rng, fmt):
    k, v, slots, k_cache, v_cache, k_scales, v_scales = _cache_write_case(rng, fmt)
    before = k_cache.copy()
    mxattn.write_kv(k, v, k_cache, v_cache, slots, k_scales=k_scales, v_scales=v_scales,
                    format=None if fmt in ("bf16", "f16") else fmt)
    page_size, heads = k_cache.shape[1], k_cache.shape[2]
    for t, slot in enumerate(slots):
        if slot < 0:
            continue
        page, offset = divmod(int(slot), page_size)
        if fmt in ("bf16", "f16"):
            np.testing.assert_array_equal(k_cache[page, offset], k[t].astype(k_cache.dtype))
            continue
        codes, block_scales = mxattn.quantize(k[t], fmt)
        np.testing.assert_array_equal(k_cache[page, offset], codes)
        np.testing.assert_array_equal(k_scales[page, offset], block_scales)
        codes, block_scales = mxattn.quantize(v[t], fmt)
        np.testing.assert_array_equal(v_cache[page, offset], codes)
        np.testing.assert_array_equal(v_scales[page, offset], block_scales)
    written = {divmod(int(s), page_size) for s in slots if s >= 0}
    for page in range(k_cache.shape[0]):
        for offset in range(page_size):
            if (page, offset) not in written:
                np.testing.assert_array_equal(k_cache[page, offset], before[page, offset])
    assert heads == k.shape[1]


def test_write_kv_then_decode_over_the_cache(rng):
    k, v, slots, k_cache, v_cache, k_scales, v_scales = _cache_write_case(rng, "e4m3", tokens=40,
                                                                          pages=4)
    slots = np.arange(40, dtype=np.int32)  # one sequence, keys in order over pages 0..2
    mxattn.write_kv(k, v, k_cache, v_cache, slots, k_scales=k_scales, v_scales=v_scales,
                    format="e4m3")
    q = rng.standard_normal((1, 1, 4, 64), dtype=np.float32)
    table = np.array([[0, 1, 2]], np.int32)
    o = mxattn.attention(q, k_cache, v_cache, k_scales=k_scales, v_scales=v_scales,
                         formats="e4m3", block_table=table, kv_len=[40])
    dense_k, dense_ks = mxattn.quantize(k[None], "e4m3")
    dense_v, dense_vs = mxattn.quantize(v[None], "e4m3")
    want = mxattn.attention(q, dense_k, dense_v, k_scales=dense_ks, v_scales=dense_vs,
                            formats="e4m3")
    np.testing.assert_array_equal(o, want)


def test_write_kv_errors_name_the_argument_and_write_nothing(rng):
    k, v, slots, k_cache, v_cache, k_scales, v_scales = _cache_write_case(rng, "e4m3")
    before = k_cache.copy()
    slots[0] = 10_000
    with pytest.raises(ValueError, match=r"slot_mapping\[0\] = 10000 lies past the caches"):
        mxattn.write_kv(k, v, k_cache, v_cache, slots, k_scales=k_scales, v_scales=v_scales,
                        format="e4m3")
    np.testing.assert_array_equal(k_cache, before)
    with pytest.raises(ValueError, match="k_scales is required"):
        mxattn.write_kv(k, v, k_cache, v_cache, np.zeros(9, np.int64) - 1, v_scales=v_scales,
                        format="e4m3")


def test_quantize_keys_smoothing_keeps_attention(rng):
    # Keys with a large common offset: smoothing removes it before quantizing, and attention given
    # k_mean returns the same O and the true LSE.
    q = rng.standard_normal((1, 2, 4, 64), dtype=np.float32)
    k = rng.standard_normal((1, 96, 2, 64), dtype=np.float32) + 20.0
    v = rng.standard_normal((1, 96, 2, 64), dtype=np.float32)
    data, scales, k_mean = mxattn.quantize_keys(k, "e4m3", smooth=True, kv_len=[80])
    assert k_mean.shape == (1, 2, 64)
    np.testing.assert_allclose(k_mean[0], k[0, :80].mean(axis=0), rtol=1e-5, atol=1e-5)
    o, lse = mxattn.attention(q, data, v, k_scales=scales, formats="e4m3", k_mean=k_mean,
                              kv_len=[80], return_lse=True)
    want, want_lse = mxattn.attention(q, k, v, kv_len=[80], return_lse=True)
    np.testing.assert_allclose(o, want, atol=5e-2)
    np.testing.assert_allclose(lse, want_lse, atol=5e-2)
