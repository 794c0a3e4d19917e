// The gated delta-net layers of qwen3.5 on the device, as the CPU backend computes them
// (Ops::l2_norm_heads, ssm_decay, short_conv, delta_net): the per-head L2 norm of the queries and
// keys, the decay, the short causal convolution with its state of the last inputs, and the gated
// delta rule with its state per value head. The two states of a sequence live in device memory
// and are read and written by the kernels alone, so a decode pass replays as a CUDA graph; which
// rows of the batch belong to which sequence comes from device arrays the backend uploads with
// the batch (RecurrentBatch).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/elementwise.h"

namespace tandem::cuda {

constexpr int kMaxConvTaps = 8;        // short_conv's taps (qwen3.5: 4)
constexpr int kMaxDeltaHeadDim = 256;  // delta_net's head size (qwen3.5: 128)

// One sequence's rows of a batch: rows[first .. first + count) of RecurrentBatch::rows, in
// position order; reset: the first is at position 0, so the states start at zero (not read).
struct SequenceSpan {
    int32_t seq = 0;
    int32_t first = 0;
    int32_t count = 0;  // 0: no sequence (a span past the batch's sequences)
    int32_t reset = 0;
};

// The batch grouped by sequence (device arrays): the kernels take n_spans spans, those past the
// batch's sequences with count 0, so that a graph recorded for a batch size serves any mix of
// sequences of that size.
struct RecurrentBatch {
    const int32_t* rows =
        nullptr;  // [batch rows]: each sequence's rows in order, one after the other
    const SequenceSpan* spans = nullptr;  // [n_spans]
    int n_spans = 0;
};

// A recurrent layer's state of every sequence: sequence s's at data + s · seq_stride floats.
struct RecurrentState {
    float* data = nullptr;
    int64_t seq_stride = 0;
};

// In place, every head_dim slice of every row: x = x / max(‖x‖₂, eps), the sum of squares in f64.
void l2_norm_heads(DeviceRows x, int head_dim, float eps, cudaStream_t stream);
// x[t][h] = softplus(x[t][h] + bias[h]) · a[h] (softplus(y) = y > 20 ? y : log(1 + exp(y))).
void ssm_decay(DeviceRows x, const float* bias, const float* a, cudaStream_t stream);
// out[t][c] = silu(Σ_i w[c·taps + i] · u_{p-taps+1+i}[c]), the earlier inputs of the token's
// sequence from its earlier rows in the batch or from the state (taps - 1 rows of x.cols values
// per sequence, oldest first), which then keeps the sequence's last taps - 1 inputs. Sums in the
// CPU's order, unfused: the same values as the CPU's up to silu's exp.
void short_conv(DeviceRows x, const float* w, int taps, const RecurrentBatch& batch,
                RecurrentState state, DeviceRows out, cudaStream_t stream);
// The gated delta rule per token of each sequence in order and per value head h (key head
// h mod n_k_heads), on the sequence's state S_h (head_dim² values, S_h[i][j] at
// [h · head_dim² + j · head_dim + i], as the CPU's): S_h *= exp(g[t][h]); d = (v[t][h] -
// S_hᵀ k[t][h]) · beta[t][h]; S_h += k[t][h] dᵀ; out[t][h] = S_hᵀ q[t][h] · scale. A warp per
// column j of a state, which stays in its registers over the sequence's rows of the batch.
void delta_net(DeviceRows q, DeviceRows k, DeviceRows v, DeviceRows g, DeviceRows beta,
               int n_k_heads, int n_v_heads, int head_dim, float scale, const RecurrentBatch& batch,
               RecurrentState state, DeviceRows out, cudaStream_t stream);

}  // namespace tandem::cuda
