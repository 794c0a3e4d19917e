// The attention kernels for the wide heads, in a translation unit of their own: values of 257 to
// 512 dims (Gemma 4's global layers) or keys of 257 to 576 (multi-head latent attention's 512 +
// 64 latent, its values the first 512 dims of each key). Twice the registers per thread of
// attention.cu's for a head's share of the output, and a query tile's keys and values staged in
// up to 111 KiB of shared memory (Gemma 4's 512 / 512 take about 99 KiB, what every GPU since
// Ampere lets a block take; 576-wide keys need more than sm_86 and sm_89 give: the caller asks
// tiled_attention_fits() first).
#include <algorithm>

#include "cuda/attention_kernels.cuh"
#include "cuda/check.h"

namespace tandem::cuda::attention_kernels {
namespace {

// Lets kernel take the shared memory of the widest heads (past the default 48 KiB), or what the
// GPU gives, if less (a launch that needs more would fail: tiled_attention_fits()).
template <typename Kernel>
bool set_max_shared(Kernel kernel) {
    const size_t bytes =
        std::min(tiled_shared_bytes(kMaxWideKeyDim, kMaxWideValueDim, 1), max_block_shared_bytes());
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes)),
          "cudaFuncSetAttribute");
    return true;
}

}  // namespace

void launch_chunks_wide(bool f16, dim3 grid, size_t shared, cudaStream_t stream,
                        const AttentionArgs& a) {
    launch_early(f16 ? attention_chunk_kernel<true, kMaxWideValueDim>
                     : attention_chunk_kernel<false, kMaxWideValueDim>,
                 grid, kThreads, shared, stream, "attention_chunk_kernel (wide heads)", a);
}

void launch_tiled_wide(bool f16, dim3 grid, size_t shared, cudaStream_t stream,
                       const TiledArgs& a) {
    if (f16) {
        static const bool ready = set_max_shared(attention_tiled_kernel<true, kMaxWideValueDim, 1>);
        (void)ready;
        attention_tiled_kernel<true, kMaxWideValueDim, 1><<<grid, kThreads, shared, stream>>>(a);
    } else {
        static const bool ready =
            set_max_shared(attention_tiled_kernel<false, kMaxWideValueDim, 1>);
        (void)ready;
        attention_tiled_kernel<false, kMaxWideValueDim, 1><<<grid, kThreads, shared, stream>>>(a);
    }
    check_launch("attention_tiled_kernel (wide heads)");
}

}  // namespace tandem::cuda::attention_kernels
