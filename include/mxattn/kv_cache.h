// Cache writes (spec §11): a serving step's new K and V tokens placed into paged caches, rounded or
// quantized to the caches' formats, in one call, on the CPU or the GPU.
#pragma once

#include "mxattn/attention.h"
#include "mxattn/mx.h"

namespace mxattn {

struct KvWriteArgs {
  TensorView k;  // new keys [T, Hkv, Dqk]: f32, f16 or bf16
  TensorView v;  // new values [T, Hkv, Dv]: f32, f16 or bf16
  // Paged caches [pages, page_size, Hkv, D] with a contiguous head dim: bf16, f16 (values rounded
  // to nearest even) or an MX element type (codes, with E8M0 scales in blocks of 32 along the head
  // dim, D a multiple of 32). K and V may differ in format.
  TensorView k_cache;
  TensorView v_cache;
  TensorView k_scales;  // MX K cache: e8m0 [pages, page_size, Hkv, Dqk / 32]
  TensorView v_scales;  // MX V cache: e8m0 [pages, page_size, Hkv, Dv / 32]
  // Only VScaleAxis::head_dim: with V scales along the keys a block's scale depends on keys not yet
  // written, so appending there is refused with a named error.
  VScaleAxis v_scale_axis = VScaleAxis::head_dim;
  // int32 or int64 [T]: token t goes to slot slot_mapping[t] = page * page_size + offset; a
  // negative slot skips the token (vLLM's padding).
  TensorView slot_mapping;
  ScaleMode mode = ScaleMode::floor;
  // Producer transforms (spec §5), applied to K before it is stored: a normalized Walsh-Hadamard
  // rotation of each key (Dqk a power of two; rotate Q alike), then the subtraction of the mean
  // key k_mean f32 [Hkv, Dqk] (K smoothing, in the rotated space when both are asked; pass the
  // same mean, per batch entry, to attention as k_mean).
  bool rotate_k = false;
  TensorView k_mean;
  // Optional int32 [1], for slot mappings the library cannot read before the run (on the GPU):
  // the run adds the number of tokens whose slot lies past the caches, which it skips.
  TensorView invalid_slots;
};

// Validates every argument, then writes. Host-readable slot mappings are checked slot by slot: a
// slot past the caches or two tokens naming one slot is a named error, and nothing is written.
// With the caches in device memory (every view then on that GPU) the write is one kernel launch
// on options.stream: no allocation, no host synchronization, so it can be captured in a CUDA
// graph; the run cannot check slots it has not read, skips those past the caches (counted in
// invalid_slots) and, where two tokens name one slot, leaves one of them.
Status write_kv(const KvWriteArgs& args, const RunOptions& options = {});

}  // namespace mxattn
