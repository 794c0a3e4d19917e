// Asynchronous copies from global to shared memory (cp.async, compute capability 8.0 and later):
// a block issues the loads of its next step and computes on the current one while they fly,
// instead of waiting for each step's loads (the integer tiles of matmul_int_kernels.cuh).
#pragma once

#include <cstdint>

namespace tandem::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// kBytes (4, 8 or 16) bytes from src to dst, both aligned to kBytes. With fill, zeros instead
// of reading src (which must still be a valid address).
template <int kBytes>
__device__ __forceinline__ void copy_async(void* dst, const void* src, bool fill = false) {
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
    const int src_bytes = fill ? 0 : kBytes;
    if constexpr (kBytes == 16) {
        // .cg: straight to shared memory past L1 (only 16-byte copies may).
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
                     "l"(src), "r"(src_bytes));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared_address(dst)),
                     "l"(src), "n"(kBytes), "r"(src_bytes));
    }
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void commit_copies() {
    asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most kPending committed groups are still in flight (this thread's copies;
// a __syncthreads() after it publishes everyone's).
template <int kPending>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace tandem::cuda
