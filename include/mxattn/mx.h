// OCP Microscaling (MX v1.0) quantization of whole tensors (spec §5).
#pragma once

#include <cstdint>

#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn {

inline constexpr int kMxBlock = 32;

// How a block's shared exponent follows from its largest magnitude.
enum class ScaleMode : uint8_t {
  floor,  // OCP reference: floor(log2(amax)) - emax_elem; large elements saturate
  rceil,  // ceil(log2(amax / max_elem)): nothing saturates
};

// Quantizes `src` (f32, f16 or bf16) into `data` (an MX element type, same shape as src) and
// `scales` (E8M0, src's shape with `axis` replaced by its block count ceil(n / 32)), in blocks of
// 32 along `axis`. `data` and `scales` may be longer along `axis` than needed: the padding is
// zero-filled. Packed types (FP6, FP4) need `axis` or the last axis to be contiguous in `data`.
// Views in host memory run on the host; views in device memory (all three on one GPU) run on the
// GPU, asynchronously on `stream` (a cudaStream_t; nullptr is the default stream), with the same
// bits.
Status quantize(const TensorView& src, const TensorView& data, const TensorView& scales, int axis,
                ScaleMode mode, void* stream = nullptr);

// Exact inverse of the codes: dst (f32, f16 or bf16; src's logical shape) = code * 2^(scale - 127).
// On the host or, for views in device memory, on the GPU on `stream`.
Status dequantize(const TensorView& data, const TensorView& scales, int axis, const TensorView& dst,
                  void* stream = nullptr);

// The producer's transforms of K before it is quantized (spec §5), in this order: the normalized
// Walsh-Hadamard rotation of each key (D a power of two; rotate Q alike), then K smoothing: the
// mean over each sequence's valid keys (kv_len, optional int32 [B]) is written to k_mean (f32 [B,
// Hkv, D]; pass it to attention) and subtracted from those keys.
struct KeyTransforms {
  bool rotate = false;
  TensorView k_mean;  // given: smooth, and write the mean here
  TensorView kv_len;  // optional; keys past a sequence's length are quantized unsmoothed
};

// K [B, Sk, Hkv, D] (f32, f16 or bf16) transformed as `transforms` says and quantized along the
// head dim into data (an MX type, K's shape) and scales (e8m0 [B, Sk, Hkv, D / 32]); K itself is
// left as it is. On the host, or on the GPU (every view in device memory, kv_len included) on
// `stream`, where a temporary of K's size in f32 is taken from the stream-ordered allocator. The
// same bits on both.
Status quantize_keys(const TensorView& k, const TensorView& data, const TensorView& scales,
                     ScaleMode mode, const KeyTransforms& transforms, void* stream = nullptr);

// Normalized Walsh-Hadamard transform along the last axis of an f32 tensor, in place (the last
// dimension a power of two). Applied to both Q and K it leaves Q K^T unchanged.
Status hadamard_rotate(const TensorView& x);

// K smoothing: subtracts from f32 K [B, Sk, Hkv, D] the mean over its valid keys (kv_len int32 [B],
// optional) and writes that mean to k_mean f32 [B, Hkv, D]. Keys past kv_len are left as they are.
Status smooth_keys(const TensorView& k, const TensorView& kv_len, const TensorView& k_mean);

}  // namespace mxattn
