"""OCP MX quantization of whole tensors (spec §5) and its exact inverse, on the host or a GPU, and
cache writes (spec §11): a serving step's new K and V placed into paged caches."""

from __future__ import annotations

from . import _arrays
from . import _mxattn


def _swap_1_2(a):
    """The same memory of a 4-d array with axes 1 and 2 swapped (no copy)."""
    if _arrays.framework_of(a) == "torch":
        return a.permute(0, 2, 1, 3)
    return a.transpose(0, 2, 1, 3)


def _keys_layout(shape, axis):
    """Whether scales along axis 1 of a 4-d [B, S, H, D] tensor take the layout attention reads
    with v_scale_axis="keys": [B, H, ceil(S / 32), D]."""
    return len(shape) == 4 and axis % 4 == 1


def quantize(x, format, axis=-1, mode="floor", out=None, stream=None):
    """Quantizes x (f32, f16 or bf16, on the host or a GPU) to the MX element type `format`
    (e4m3, e5m2, e2m3, e3m2, e2m1, or mxfp8/mxfp6/mxfp4) in blocks of 32 along `axis`.

    Returns (data, scales) in x's framework and memory: data uint8 with x's shape, except that
    FP6 and FP4 pack the last axis (4 elements in 3 bytes, 2 in a byte), and scales uint8 (E8M0)
    with `axis` cut to ceil(n / 32) blocks. A 4-d [B, S, H, D] tensor quantized along axis 1 (V
    along the keys) gets its scales as [B, H, ceil(S / 32), D], the layout attention takes with
    v_scale_axis="keys". mode: "floor" (OCP reference) or "rceil" (nothing saturates). out: a
    (data, scales) pair to write instead. On a GPU the work is queued on `stream` (default: the
    framework's current stream); the bits are the host's."""
    array, element_type = _arrays.transport("x", x)
    data_shape, scales_shape = _mxattn.quantized_shapes(tuple(x.shape), format, axis)
    keys_layout = _keys_layout(x.shape, axis)
    if keys_layout:
        b, nb, h, d = scales_shape
        scales_shape = (b, h, nb, d)
    if out is None:
        data = _arrays.empty_like_framework(x, data_shape, "u8")
        scales = _arrays.empty_like_framework(x, scales_shape, "u8")
    else:
        data, scales = out
    scales_seen = _swap_1_2(scales) if keys_layout else scales
    if stream is None:
        stream = _arrays.current_stream(x, _arrays.device_of(x)[0])
    _mxattn.quantize(array, element_type, data, scales_seen, format, axis, mode, int(stream))
    return _arrays.to_framework_of(x, data), _arrays.to_framework_of(x, scales)


def quantize_keys(k, format, *, rotate=False, smooth=False, kv_len=None, mode="floor",
                  stream=None):
    """The producer's K pipeline in one call (spec §5): k [B, S, Hkv, D] (f32, f16 or bf16, on the
    host or a GPU) rotated by the normalized Walsh-Hadamard transform (D a power of two; rotate Q
    alike) where `rotate`, smoothed where `smooth` (each sequence's mean over its valid keys,
    kv_len int32 [B] optional, subtracted from those keys), then quantized to `format` along the
    head dim. k is left as it is. Returns (data, scales), or (data, scales, k_mean f32 [B, Hkv, D])
    with `smooth`: pass k_mean to attention. The GPU gives the host's bits."""
    array, element_type = _arrays.transport("k", k)
    data_shape, scales_shape = _mxattn.quantized_shapes(tuple(k.shape), format, -1)
    data = _arrays.empty_like_framework(k, data_shape, "u8")
    scales = _arrays.empty_like_framework(k, scales_shape, "u8")
    k_mean = None
    if smooth:
        shape = tuple(k.shape)
        k_mean = _arrays.empty_like_framework(k, (shape[0], shape[2], shape[3]), "f32")
    lengths = None
    if kv_len is not None:
        lengths = _arrays.host_int32("kv_len", kv_len, int(k.shape[0]))
        if _arrays.device_of(k)[0]:
            lengths_dev = _arrays.empty_like_framework(k, (int(k.shape[0]),), "i32")
            if _arrays.framework_of(k) == "torch":
                import torch
                lengths_dev.copy_(torch.from_numpy(lengths))
            else:
                lengths_dev.set(lengths)
            lengths = lengths_dev
    if stream is None:
        stream = _arrays.current_stream(k, _arrays.device_of(k)[0])
    _mxattn.quantize_keys(array, element_type, data, scales, format, mode, bool(rotate),
                          None if k_mean is None else _arrays.transport("k_mean", k_mean)[0],
                          None if lengths is None else _arrays.transport("kv_len", lengths)[0],
                          int(stream))
    results = (data, scales) if k_mean is None else (data, scales, k_mean)
    return tuple(_arrays.to_framework_of(k, r) for r in results)


def dequantize(data, scales, format, axis=-1, dtype="f32", out=None, stream=None):
    """The exact values of MX codes: data (uint8 codes as quantize returns them) times
    2^(scale - 127), as a `dtype` (f32, f16 or bf16) tensor of the logical shape, in data's
    framework and memory (scales along axis 1 of 4-d data as quantize returns them)."""
    data_array, _ = _arrays.transport("data", data, format)
    shape = list(data.shape)
    if shape:
        shape[-1] = shape[-1] * 8 // _mxattn.element_bits(format)
    if _keys_layout(shape, axis) and len(getattr(scales, "shape", ())) == 4:
        scales = _swap_1_2(scales)
    scales_array, _ = _arrays.transport("scales", scales, "e8m0")
    if out is None:
        out = _arrays.empty_like_framework(data, shape, _mxattn.canonical_type(dtype))
    out_array, out_type = _arrays.transport("out", out)
    if stream is None:
        stream = _arrays.current_stream(data, _arrays.device_of(data)[0])
    _mxattn.dequantize(data_array, format, scales_array, axis, out_array, out_type, int(stream))
    return _arrays.to_framework_of(data, out)


def write_kv(k, v, k_cache, v_cache, slot_mapping, *, k_scales=None, v_scales=None, format=None,
             mode="floor", rotate=False, k_mean=None, invalid_slots=None, stream=None):
    """Writes a step's new tokens into paged caches (spec §11), in place, in one call.

    k [T, Hkv, Dqk] and v [T, Hkv, Dv] (f32, f16 or bf16); k_cache [pages, page_size, Hkv, Dqk]
    and v_cache [pages, page_size, Hkv, Dv], each bf16, f16 or MX codes (uint8, packed as
    quantize packs them) with E8M0 scales k_scales / v_scales [pages, page_size, Hkv, D / 32];
    `format` names the MX element type of uint8 caches (one name, or a (k, v) pair).
    slot_mapping int32 or int64 [T]: token t goes to page slot_mapping[t] // page_size, offset
    slot_mapping[t] % page_size; negative skips it. A token's codes and scales are exactly what
    quantize gives for that token alone. rotate: the Walsh-Hadamard rotation of each key before
    it is stored (rotate Q alike); k_mean f32 [Hkv, Dqk]: subtracted from each key (K smoothing;
    pass it to attention as k_mean). On a GPU (every tensor there) the write is one launch on
    `stream`, with no allocation or host synchronization, so it can be captured in a CUDA graph;
    slots past the caches are then skipped and counted into invalid_slots (int32 [1], optional).
    On the host, bad slots raise ValueError and nothing is written."""
    k_format, v_format = (format, format) if not isinstance(format, (tuple, list)) else format
    args = [_arrays.transport("k", k), _arrays.transport("v", v),
            _arrays.transport("k_cache", k_cache, k_format),
            _arrays.transport("v_cache", v_cache, v_format),
            _arrays.transport("slot_mapping", slot_mapping)]
    optional = [None if t is None else _arrays.transport(name, t, kind)[0]
                for name, t, kind in (("k_scales", k_scales, "e8m0"),
                                      ("v_scales", v_scales, "e8m0"),
                                      ("k_mean", k_mean, None),
                                      ("invalid_slots", invalid_slots, None))]
    if stream is None:
        stream = _arrays.current_stream(k_cache, _arrays.device_of(k_cache)[0])
    _mxattn.write_kv(*[a for pair in args for a in pair], *optional, mode, bool(rotate),
                     int(stream))
