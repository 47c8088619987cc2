"""mxattn.plan (the split partition, spec §3) and how bad arguments fail."""

import numpy as np
import pytest

import mxattn


def zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype=dtype)


def test_plan_pins_rocmlir_prefix_counts():
    # spec §3's pinned values: prefix_offset 62, tile_n 32, split_kv 4, Sq 4 -> [2, 2, 3, 3].
    q, k = zeros(1, 4, 1, 32), zeros(1, 128, 1, 32)
    p = mxattn.plan(q, k, k, prefix_offset=62, tile_n=32, split_kv=4, engine="cpu")
    assert p["tile_n"] == 32 and p["split_kv"] == 4
    (tile,) = p["tiles"]
    assert tile["conservative_counts"] == [2, 2, 3, 3]
    assert tile["rows"] == (0, 3) and tile["h"] is None


def test_plan_pins_top_left_counts():
    q, k = zeros(1, 96, 1, 32), zeros(1, 96, 1, 32)
    p = mxattn.plan(q, k, k, causal="top_left", tile_n=32, split_kv=2, tile_m=96)
    counts = p["tiles"][0]["conservative_counts"]
    assert counts == [1] * 32 + [2] * 64


def test_plan_splits_cover_the_key_tiles_once():
    q, k = zeros(2, 1, 4, 64), zeros(2, 1000, 2, 64)
    p = mxattn.plan(q, k, k, kv_len=[1000, 70], split_kv="auto", tile_n=64)
    assert p["split_kv"] == "auto" and p["partial_slots"] >= 1
    for tile in p["tiles"]:
        covered = [t for s in tile["splits"] if s["key_tiles"]
                   for t in range(s["key_tiles"][0], s["key_tiles"][1] + 1)]
        assert covered == list(range(tile["key_tiles"]))
        assert tile["count"] == sum(1 for s in tile["splits"] if s["tiles"] > 0)


def test_validation_errors_are_value_errors_with_the_library_message():
    q, k = zeros(1, 1, 6, 32), zeros(1, 8, 4, 32)
    with pytest.raises(ValueError, match=r"Q heads Hq = 6 must be a multiple of the K/V heads "
                                         r"Hkv = 4 \(grouped-query attention\)"):
        mxattn.attention(q, k, k)


def test_short_scales_are_reported_and_nothing_is_written():
    q, k = zeros(1, 1, 2, 64), np.zeros((1, 16, 2, 64), np.uint8)
    k_scales = np.zeros((1, 16, 2, 1), np.uint8)  # needs [1, 16, 2, 2]
    out = np.full((1, 1, 2, 64), 7.0, np.float32)
    with pytest.raises(ValueError, match="K scales|k_scales"):
        mxattn.attention(q, k, k, k_scales=k_scales, v_scales=k_scales, formats="e4m3", out=out)
    assert np.all(out == 7.0)


def test_bytes_without_a_format_are_refused():
    with pytest.raises(ValueError, match="formats="):
        mxattn.attention(zeros(1, 1, 1, 32), np.zeros((1, 4, 1, 32), np.uint8),
                         np.zeros((1, 4, 1, 32), np.uint8))


def test_wrong_rank_is_reported_by_the_library():
    with pytest.raises(ValueError, match="Q must have rank 4"):
        mxattn.attention(zeros(1, 2, 32), zeros(1, 4, 1, 32), zeros(1, 4, 1, 32))


@pytest.mark.parametrize("bad", [
    dict(causal="diagonal"),
    dict(split_kv=0),
    dict(engine="gpu"),
    dict(kv_len=[1.5]),
    dict(kv_len=[9]),
    dict(window=-3),
    dict(v_scale_axis="rows"),
])
def test_bad_options_raise_value_errors(bad):
    q, k = zeros(1, 1, 1, 32), zeros(1, 8, 1, 32)
    with pytest.raises(ValueError):
        mxattn.attention(q, k, k, **bad)


def test_non_arrays_and_odd_storage_raise_without_crashing():
    q, k = zeros(1, 1, 1, 32), zeros(1, 8, 1, 32)
    with pytest.raises(TypeError):
        mxattn.attention([[1.0]], k, k)
    with pytest.raises(ValueError, match="0-d"):
        mxattn.attention(np.ones((), np.float32), k, k)
    with pytest.raises(ValueError, match="rank 7"):
        mxattn.attention(zeros(1, 1, 1, 1, 1, 1, 32), k, k)
    with pytest.raises(ValueError, match="float64"):
        mxattn.attention(q.astype(np.float64), k, k)
    with pytest.raises(ValueError, match="strides must be >= 0"):
        mxattn.attention(q, k[:, ::-1], k)
    with pytest.raises(ValueError, match="not a whole number of groups"):
        mxattn.attention(q, np.zeros((1, 8, 1, 16), np.uint8), np.zeros((1, 8, 1, 16), np.uint8),
                         formats="e2m3")


def test_gpu_tensors_need_the_cuda_build():
    if mxattn.cuda_available():
        pytest.skip("this build has the CUDA engine")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU here")
    q = torch.zeros(1, 1, 1, 64, device="cuda")
    with pytest.raises(NotImplementedError, match="no CUDA engine"):
        mxattn.attention(q, q, q)
