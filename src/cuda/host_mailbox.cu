// The host mailbox's kernels: a request's rows posted to pinned host memory and numbered, the
// stream held until the host's answer to it, which is copied back.
#include <cuda/atomic>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/host_mailbox.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 32;

using SystemFlag = ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system>;

// Blocks for `values` values at 8 a thread, at most kMaxBlocks.
unsigned blocks_for(int64_t values) {
    const int64_t per_block = int64_t{kThreads} * 8;
    return static_cast<unsigned>(
        std::clamp<int64_t>((values + per_block - 1) / per_block, 1, kMaxBlocks));
}

// Each block copies its share of the rows and the extra bytes to host memory; the last block to
// finish (counted in counters[1]) numbers the request (counters[0]) and raises it, or, when every
// record's key is negative, marks it skipped (counters[2]) instead.
__global__ void post_kernel(DeviceRows in, float* host_rows, const uint8_t* extra,
                            uint8_t* host_extra, int64_t extra_bytes, int key_stride, int tag,
                            MailboxFlags* flags, uint32_t* counters) {
    const int64_t n = static_cast<int64_t>(in.rows) * in.cols;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    for (int64_t i = first; i < n; i += step)
        host_rows[i] = in.data[(i / in.cols) * in.stride + i % in.cols];
    for (int64_t i = first; i < extra_bytes; i += step) host_extra[i] = extra[i];
    // Every thread's writes reach host memory before its block is counted.
    __threadfence_system();
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) last = atomicAdd(&counters[1], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    bool present = key_stride == 0;
    const int32_t* keys = reinterpret_cast<const int32_t*>(extra);
    const int64_t n_keys = key_stride > 0 ? extra_bytes / 4 / key_stride : 0;
    for (int64_t i = threadIdx.x; i < n_keys && !present; i += blockDim.x)
        present = keys[i * key_stride] >= 0;
    present = __syncthreads_or(present);
    if (threadIdx.x != 0) return;
    counters[1] = 0;
    counters[2] = present ? 0 : 1;
    if (!present) return;
    const uint32_t number = counters[0] + 1;
    counters[0] = number;
    flags->tag = tag;
    flags->rows = in.rows;
    SystemFlag(flags->request).store(number, ::cuda::memory_order_release);
}

// Thread 0 of each block polls for the answer to the last request posted; then the block copies
// its share of the answer's rows to the device (zeros for a request skipped).
__global__ void await_kernel(DeviceRows out, const float* host_answer, MailboxFlags* flags,
                             const uint32_t* counters) {
    const bool skipped = counters[2] != 0;
    if (threadIdx.x == 0 && !skipped) {
        const uint32_t number = counters[0];
        SystemFlag answer(flags->answer);
        while (answer.load(::cuda::memory_order_acquire) != number) __nanosleep(200);
    }
    __syncthreads();
    const int64_t n = static_cast<int64_t>(out.rows) * out.cols;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
        out.data[(i / out.cols) * out.stride + i % out.cols] =
            skipped ? 0.0f : __ldcv(host_answer + i);
}

}  // namespace

void launch_mailbox_post(DeviceRows in, float* host_rows, const void* extra, void* host_extra,
                         size_t extra_bytes, int key_stride, int tag, MailboxFlags* flags,
                         uint32_t* counters, cudaStream_t stream) {
    post_kernel<<<blocks_for(
                      std::max<int64_t>(in.rows * in.cols, static_cast<int64_t>(extra_bytes))),
                  kThreads, 0, stream>>>(
        in, host_rows, static_cast<const uint8_t*>(extra), static_cast<uint8_t*>(host_extra),
        static_cast<int64_t>(extra_bytes), key_stride, tag, flags, counters);
    check_launch("host mailbox post");
}

void launch_mailbox_await(DeviceRows out, const float* host_answer, MailboxFlags* flags,
                          const uint32_t* counters, cudaStream_t stream) {
    await_kernel<<<blocks_for(out.rows * out.cols), kThreads, 0, stream>>>(out, host_answer, flags,
                                                                           counters);
    check_launch("host mailbox await");
}

}  // namespace tandem::cuda
