// The f16 tensor-core instruction both attention kernels on tensor cores use (prefill in
// attention_mma.cu, decode in attention_decode.cuh): mma.sync m16n8k16, f16 in, f32 sums (sm_80
// and later), and the packing of its f16 operands.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace tandem::cuda {

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// c += a · b: a 16 × 16 (rows), b 16 × 8 (columns), f16 in, f32 sums. Lane l holds, of a, rows
// l / 4 (a[0], a[2]) and l / 4 + 8 (a[1], a[3]), columns 2 (l % 4) + {0, 1} (a[0], a[1]) and
// + 8 (a[2], a[3]); of b, column l / 4, rows 2 (l % 4) + {0, 1} (b0) and + 8 (b1), the lower row in
// the low half; of c, rows l / 4 (c[0], c[1]) and + 8 (c[2], c[3]), columns 2 (l % 4) + {0, 1}.
__device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0,
                                        uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace tandem::cuda
