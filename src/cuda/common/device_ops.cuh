// Thin wrappers over the PTX the decode kernels use: the m16n8k16 tensor-core product with f32
// accumulators, asynchronous 16-byte copies into shared memory, and packing of f32 pairs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mxattn::cuda::detail {

// Which 16-bit type feeds a tensor-core product.
enum class MmaType { f16, bf16 };

// D = A * B + C for one 16x8x16 tile: A row-major 16x16 (4 registers of packed pairs), B
// column-major 16x8 (2 registers), C and D 16x8 f32 (4 registers). Lane l holds rows l/4 and l/4+8,
// columns 2(l%4) and 2(l%4)+1 of C; k indices 2(l%4), +1 (first registers) and +8, +9 (second).
template <MmaType T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  if constexpr (T == MmaType::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two f32 values as a packed pair of the product type, `lo` in the low half (round to nearest).
template <MmaType T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  if constexpr (T == MmaType::bf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// The f32 value of one half of a packed pair of the product type.
template <MmaType T>
__device__ __forceinline__ float unpack_half(uint32_t pair, int which) {
  const uint16_t bits = uint16_t(which ? pair >> 16 : pair & 0xffffu);
  if constexpr (T == MmaType::bf16) {
    return __uint_as_float(uint32_t(bits) << 16);
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

// 2^x on the special function unit alone (ex2.approx.ftz: about 2 ulp, results below 2^-126
// flushed to zero), for softmax weights that are rounded to 16 bits before they are used; exp2f
// adds a range reduction for subnormal results around the same instruction.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Programmatic dependent launch (sm_90): lets the next kernel of the stream, launched with
// cudaLaunchAttributeProgrammaticStreamSerialization, start its CTAs before this grid ends...
__device__ __forceinline__ void allow_dependent_launch() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// ...where they wait here until this grid has finished and its writes are visible (a no-op for a
// kernel launched without that attribute).
__device__ __forceinline__ void wait_for_prerequisite_grid() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// Bytes {a, b} picked by `selector` (PTX prmt).
__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
  return __byte_perm(a, b, selector);
}

// 16-byte global-to-shared copy; with `valid` false the destination is zero-filled and nothing is
// read (the source must still be a mapped address).
__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = uint32_t(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_bytes));
}

// 4- or 8-byte global-to-shared copy (both addresses aligned to its size), zero-filled when not
// `valid`.
template <int kBytes>
__device__ __forceinline__ void copy_async_small(void* smem, const void* gmem, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8);
  const uint32_t dst = uint32_t(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? kBytes : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(kBytes),
               "r"(src_bytes));
}

__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace mxattn::cuda::detail
