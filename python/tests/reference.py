"""An independent NumPy model of mxattn's spec (docs/spec.md) for the tests: f64 attention with every mask, and
MX decoding through ml_dtypes (not through mxattn's codecs)."""

from __future__ import annotations

import numpy as np

MX_BLOCK = 32


def attention(q, k, v, *, causal="none", prefix_offset=None, kv_len=None, window=None,
              scale=None, block_visible=None):
    """O [B, Sq, Hq, Dv] and LSE [B, Hq, Sq] in f64. block_visible(b, h) -> bool matrix
    [Sq, Sk] adds a block-sparse mask."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    batch, seq_q, heads_q, dim_qk = q.shape
    seq_k, heads_kv = k.shape[1], k.shape[2]
    group = heads_q // heads_kv
    scale = 1.0 / np.sqrt(dim_qk) if scale is None else scale
    out = np.zeros((batch, seq_q, heads_q, v.shape[3]))
    lse = np.full((batch, heads_q, seq_q), -np.inf)
    rows = np.arange(seq_q)[:, None]
    keys = np.arange(seq_k)[None, :]
    for b in range(batch):
        valid = seq_k if kv_len is None else int(kv_len[b])
        offset = {"none": 0, "top_left": 0, "bottom_right": valid - seq_q,
                  "prefix": 0 if prefix_offset is None else int(prefix_offset[b])}[causal]
        visible = keys <= valid - 1
        if causal != "none":
            visible = visible & (keys <= rows + offset)
        if window is not None:
            upper = rows + offset if causal != "none" else valid - 1
            visible = visible & (keys >= upper - window)
        for h in range(heads_q):
            seen = visible if block_visible is None else visible & block_visible(b, h)
            scores = scale * (q[b, :, h, :] @ k[b, :, h // group, :].T)
            scores = np.where(seen, scores, -np.inf)
            has_key = seen.any(axis=1)
            peak = np.where(has_key, scores.max(axis=1, initial=-np.inf), 0.0)
            weights = np.where(seen, np.exp(scores - peak[:, None]), 0.0)
            total = weights.sum(axis=1)
            # Keys no row sees may hold anything (NaN in padding): they must not reach the sum.
            v_head = np.where(seen.any(axis=0)[:, None], v[b, :, h // group, :], 0.0)
            values = weights @ v_head
            out[b, :, h, :] = np.where(has_key[:, None], values / np.maximum(total, 1e-300)[:, None],
                                       0.0)
            lse[b, h, :] = np.where(has_key, peak + np.log(np.maximum(total, 1e-300)), -np.inf)
    return out, lse


def unpack_codes(data, fmt):
    """MX codes, one a byte, from mxattn's packed bytes (FP4: element 2i in the low nibble; FP6:
    element k of a group in bits [6k, 6k + 6) of the little-endian 24-bit word)."""
    data = np.asarray(data, dtype=np.uint8)
    if fmt == "e2m1":
        codes = np.empty(data.shape[:-1] + (data.shape[-1] * 2,), dtype=np.uint8)
        codes[..., 0::2] = data & 0xF
        codes[..., 1::2] = data >> 4
        return codes
    if fmt in ("e2m3", "e3m2"):
        groups = data.reshape(data.shape[:-1] + (-1, 3)).astype(np.uint32)
        words = groups[..., 0] | (groups[..., 1] << 8) | (groups[..., 2] << 16)
        codes = np.stack([(words >> (6 * i)) & 0x3F for i in range(4)], axis=-1)
        return codes.reshape(data.shape[:-1] + (-1,)).astype(np.uint8)
    return data


def decode_mx(data, scales, fmt, axis=-1):
    """The exact values of mxattn's MX storage, decoded by ml_dtypes."""
    import ml_dtypes

    element = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
               "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn,
               "e2m1": ml_dtypes.float4_e2m1fn}[fmt]
    values = unpack_codes(data, fmt).view(element).astype(np.float64)
    axis = axis % values.ndim
    exponents = np.asarray(scales, dtype=np.uint8)
    factors = np.where(exponents == 0xFF, np.nan, np.exp2(exponents.astype(np.float64) - 127))
    factors = np.repeat(factors, MX_BLOCK, axis=axis)
    factors = np.take(factors, np.arange(values.shape[axis]), axis=axis)
    return values * factors
