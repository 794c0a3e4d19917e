// The gated delta-net's short causal convolution on the device.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/delta_net.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

// Thread (channel c, span blockIdx.y): the channel's last kTaps - 1 inputs in registers (oldest
// first) through the span's rows in order, then back to the state.
template <int kTaps>
__global__ void __launch_bounds__(kThreads)
    short_conv_kernel(DeviceRows x, const float* w, RecurrentBatch batch, RecurrentState state,
                      DeviceRows out) {
    constexpr int kHistory = kTaps > 1 ? kTaps - 1 : 1;
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (c >= x.cols) return;
    const SequenceSpan span = batch.spans[blockIdx.y];
    if (span.count == 0) return;
    float* history = state.data + span.seq * state.seq_stride;  // kTaps - 1 rows of x.cols
    float taps[kTaps], u_prev[kHistory];
#pragma unroll
    for (int i = 0; i < kTaps; ++i) taps[i] = w[c * kTaps + i];
#pragma unroll
    for (int i = 0; i < kHistory; ++i)
        u_prev[i] = i < kTaps - 1 && !span.reset ? history[i * x.cols + c] : 0.0f;
    for (int r = 0; r < span.count; ++r) {
        const int64_t t = batch.rows[span.first + r];
        const float u = x.data[t * x.stride + c];
        // The CPU's order: the earlier inputs oldest first, then this one; unfused.
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kTaps - 1; ++i) sum = __fadd_rn(sum, __fmul_rn(u_prev[i], taps[i]));
        sum = __fadd_rn(sum, __fmul_rn(u, taps[kTaps - 1]));
        out.data[t * out.stride + c] = sum / (1.0f + expf(-sum));
#pragma unroll
        for (int i = 0; i + 1 < kTaps - 1; ++i) u_prev[i] = u_prev[i + 1];
        if constexpr (kTaps > 1) u_prev[kTaps - 2] = u;
    }
#pragma unroll
    for (int i = 0; i < kTaps - 1; ++i) history[i * x.cols + c] = u_prev[i];
}

template <int kTaps>
void launch(DeviceRows x, const float* w, const RecurrentBatch& batch, RecurrentState state,
            DeviceRows out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((x.cols + kThreads - 1) / kThreads),
                    static_cast<unsigned>(batch.n_spans));
    short_conv_kernel<kTaps><<<grid, kThreads, 0, stream>>>(x, w, batch, state, out);
}

}  // namespace

void short_conv(DeviceRows x, const float* w, int taps, const RecurrentBatch& batch,
                RecurrentState state, DeviceRows out, cudaStream_t stream) {
    if (x.rows == 0 || batch.n_spans == 0) return;
    if (taps < 1 || taps > kMaxConvTaps) check(cudaErrorInvalidValue, "short_conv: taps");
    using Launch = void (*)(DeviceRows, const float*, const RecurrentBatch&, RecurrentState,
                            DeviceRows, cudaStream_t);
    static constexpr Launch kLaunch[kMaxConvTaps] = {launch<1>, launch<2>, launch<3>, launch<4>,
                                                     launch<5>, launch<6>, launch<7>, launch<8>};
    kLaunch[taps - 1](x, w, batch, state, out, stream);
    check_launch("short_conv");
}

}  // namespace tandem::cuda
