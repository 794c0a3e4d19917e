// Kernel launches that may begin while the stream's previous kernel finishes: programmatic
// dependent launch (compute capability 9.0 and later). A decode step runs a dozen small kernels
// a layer, each too short to fill the time the GPU takes to retire one kernel and start the
// next; launched this way, a kernel's blocks are placed on the SMs while its predecessor's last
// blocks run, and start the moment its results are visible. Every kernel launched by
// launch_early() must call wait_for_previous_kernel() before it touches device memory that a
// kernel still running may write (before it, only what no such kernel writes: weights,
// prefetch_l2's lines, routes written two kernels back). On
// unless TANDEM_GPU_EARLY_LAUNCH=0 (an H100's decode: 265 tok/s against 257 without, 7 December);
// with it off, and on older GPUs, the launch is an ordinary one and the call a no-op.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.h"

namespace tandem::cuda {

// True on a GPU of compute capability 9.0 or later, unless TANDEM_GPU_EARLY_LAUNCH=0.
bool early_launch_enabled();

// Whether the matrix-vector kernels prefetch their weights before they wait (prefetch_l2): on
// unless TANDEM_GPU_PREFETCH=0.
bool weight_prefetch_enabled();

// Asks for the lines of [begin, begin + bytes) to come to L2, the block's threads taking every
// blockDim.x-th line: a hint that neither faults nor waits. Called before
// wait_for_previous_kernel() on data the previous kernel does not write (weights), it lets a
// decode product's few MB cross from DRAM while the kernel before it still runs, where they would
// otherwise start only when it ends. (Even data being written stays correct: L2 is where writes
// meet, and nothing is kept closer to the SM.)
__device__ __forceinline__ void prefetch_l2(const void* begin, int64_t bytes) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(begin);
    const uintptr_t end = start + (bytes > 0 ? static_cast<uintptr_t>(bytes) : 0);
    for (uintptr_t a = (start & ~uintptr_t{127}) + 128 * threadIdx.x; a < end;
         a += 128 * blockDim.x)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
}

// Waits until the previous kernel's writes are visible, then lets the next kernel's blocks be
// placed (they wait in turn in their own first call).
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <typename... Params, typename... Args>
void launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                  cudaStream_t stream, const char* name, Args&&... args) {
    cudaLaunchAttribute early{};
    early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    early.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &early;
    config.numAttrs = early_launch_enabled() ? 1 : 0;
    check(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...), name);
}

}  // namespace tandem::cuda
