// The attention kernels for heads of 257 to 512 values (Gemma 4's global layers), in a
// translation unit of their own: twice the registers per thread of attention.cu's for a head's
// share, and a query tile's keys and values staged in about 99 KiB of shared memory (what every
// GPU since Ampere lets a block take).
#include "cuda/attention_kernels.cuh"
#include "cuda/check.h"

namespace tandem::cuda::attention_kernels {
namespace {

constexpr int kWideHeadDim = 512;
static_assert(kWideHeadDim == kMaxHeadDim);

template <typename Kernel>
bool set_max_shared(Kernel kernel) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(tiled_shared_bytes(kWideHeadDim, kWideHeadDim))),
          "cudaFuncSetAttribute");
    return true;
}

}  // namespace

void launch_chunks_wide(bool f16, dim3 grid, size_t shared, cudaStream_t stream,
                        const AttentionArgs& a) {
    launch_early(f16 ? attention_chunk_kernel<true, kWideHeadDim>
                     : attention_chunk_kernel<false, kWideHeadDim>,
                 grid, kThreads, shared, stream, "attention_chunk_kernel (wide heads)", a);
}

void launch_tiled_wide(bool f16, dim3 grid, size_t shared, cudaStream_t stream,
                       const TiledArgs& a) {
    if (f16) {
        static const bool ready = set_max_shared(attention_tiled_kernel<true, kWideHeadDim>);
        (void)ready;
        attention_tiled_kernel<true, kWideHeadDim><<<grid, kThreads, shared, stream>>>(a);
    } else {
        static const bool ready = set_max_shared(attention_tiled_kernel<false, kWideHeadDim>);
        (void)ready;
        attention_tiled_kernel<false, kWideHeadDim><<<grid, kThreads, shared, stream>>>(a);
    }
    check_launch("attention_tiled_kernel (wide heads)");
}

}  // namespace tandem::cuda::attention_kernels
