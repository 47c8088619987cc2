"""OCP MX quantization of whole tensors on the host (spec §5), and its exact inverse."""

from __future__ import annotations

from . import _arrays
from . import _mxattn


def quantize(x, format, axis=-1, mode="floor"):
    """Quantizes x (f32, f16 or bf16, on the host) to the MX element type `format` (e4m3, e5m2,
    e2m3, e3m2, e2m1, or mxfp8/mxfp6/mxfp4) in blocks of 32 along `axis`.

    Returns (data, scales) in x's framework: data uint8 with x's shape, except that FP6 and FP4
    pack the last axis (4 elements in 3 bytes, 2 in a byte), and scales uint8 (E8M0) with `axis`
    cut to ceil(n / 32) blocks. mode: "floor" (OCP reference) or "rceil" (nothing saturates)."""
    array, element_type = _arrays.transport("x", x)
    data_shape, scales_shape = _mxattn.quantized_shapes(tuple(x.shape), format, axis)
    data = _arrays.empty_like_framework(x, data_shape, "u8")
    scales = _arrays.empty_like_framework(x, scales_shape, "u8")
    _mxattn.quantize(array, element_type, data, scales, format, axis, mode)
    return _arrays.to_framework_of(x, data), _arrays.to_framework_of(x, scales)


def dequantize(data, scales, format, axis=-1, dtype="f32"):
    """The exact values of MX codes: data (uint8 codes as quantize returns them) times
    2^(scale - 127), as a `dtype` (f32, f16 or bf16) tensor of the logical shape, in data's
    framework."""
    data_array, _ = _arrays.transport("data", data, format)
    scales_array, _ = _arrays.transport("scales", scales, "e8m0")
    shape = list(data.shape)
    if shape:
        shape[-1] = shape[-1] * 8 // _mxattn.element_bits(format)
    out = _arrays.empty_like_framework(data, shape, _mxattn.canonical_type(dtype))
    out_array, out_type = _arrays.transport("out", out)
    _mxattn.dequantize(data_array, format, scales_array, axis, out_array, out_type)
    return _arrays.to_framework_of(data, out)
