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


def test_quantize_along_keys_for_v_scales_on_the_key_axis(rng):
    v = rng.standard_normal((1, 70, 2, 32), dtype=np.float32)
    data, scales = mxattn.quantize(v, "e4m3", axis=1)
    assert scales.shape == (1, 3, 2, 32)
    np.testing.assert_array_equal(mxattn.dequantize(data, scales, "e4m3", axis=1),
                                  reference.decode_mx(data, scales, "e4m3", axis=1))


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
    v, v_scales = mxattn.quantize(kv, "e4m3", axis=1)
    # [B, Sk/32, Hkv, Dv] as the [B, Hkv, Sk/32, Dv] view the engine reads: no copy.
    o = mxattn.attention(q, k, v, k_scales=k_scales, v_scales=v_scales.transpose(0, 2, 1, 3),
                         v_scale_axis="keys", formats="e4m3")
    want, _ = reference.attention(q, reference.decode_mx(k, k_scales, "e4m3"),
                                  reference.decode_mx(v, v_scales, "e4m3", axis=1))
    np.testing.assert_allclose(o, want, rtol=2e-5, atol=2e-5)
