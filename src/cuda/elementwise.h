// Row-wise operations on f32 activations in device memory, as the CPU computes them
// (cpu/elementwise.h): RMS norm (of rows and of heads), biases, residual adds, the gated
// activations, row gathers and the argmax of logit rows. Every function queues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cpu/elementwise.h"
#include "formats/ggml_type.h"

namespace tandem::cuda {

// A device matrix view: rows × cols floats, rows `stride` apart.
struct DeviceRows {
    float* data = nullptr;
    int rows = 0;
    int64_t cols = 0;
    int64_t stride = 0;
};

// out = x / sqrt(mean(x²) + eps) · w per row (w may be nullptr); out may be x. Row length `cols`
// is split in groups of `group` values normed separately (group = cols: whole rows; group =
// head_dim: per-head norms).
void rms_norm(DeviceRows x, const float* w, int64_t group, float eps, DeviceRows out,
              cudaStream_t stream);
// x[t] += bias.
void add_bias(DeviceRows x, const float* bias, cudaStream_t stream);
// y += x.
void add(DeviceRows y, DeviceRows x, cudaStream_t stream);
// x *= s.
void scale_rows(DeviceRows x, float s, cudaStream_t stream);
// x[t][i] *= w[i], or x[t][i] *= w[0] when w_size is 1 (w: a device array of w_size values).
void mul_rows(DeviceRows x, const float* w, int64_t w_size, cudaStream_t stream);
// x = cap · tanh(x · (1/cap)), as the CPU's softcap computes it.
void softcap_rows(DeviceRows x, float cap, cudaStream_t stream);
// out = act(gate) · up. GluKind::kGelu reads ggml's fp16 table (cpu/elementwise.h), which
// upload_gelu_table() must have put on the device first.
void glu(GluKind kind, DeviceRows gate, DeviceRows up, DeviceRows out, cudaStream_t stream);

// Copies the GELU table to the device (once; later calls return at once). Not inside a stream
// capture: the GPU backend calls it when it is built.
void upload_gelu_table();
// The device copy's address, for kernels of other files (cuda/glu_value.cuh); after
// upload_gelu_table() only.
const uint16_t* gelu_table_on_device();
// dst = src, row by row (same rows and cols; either may be a strided view, e.g. per-head slices
// of packed rows). src and dst must not overlap.
void copy_rows(DeviceRows src, DeviceRows dst, cudaStream_t stream);
// out[i] = x[rows[i]] for i < out.rows (rows: a device array).
void gather_rows(DeviceRows x, const int32_t* rows, DeviceRows out, cudaStream_t stream);
// Activations as the q8 codes behind their rounding (q8_0, q8_1, q8_K): row r's codes at
// q + r · q_stride, the scale of its values [32 g, 32 g + 32) at d[r · d_stride + g] (q8_K's one
// scale per 256 repeated), so that the rounded value is d · q. The integer matrix kernels take
// these where the weights have an integer view (cuda/block_int.h).
struct Q8Rows {
    int8_t* q = nullptr;
    float* d = nullptr;
    int64_t q_stride = 0;  // bytes
    int64_t d_stride = 0;  // floats
};

// out = x rounded through the activation type `dot_type` (cuda/activation_rounding.h); a plain
// copy for f32. Rows must be multiples of the type's block. With q8 (and a q8 type) the codes
// and scales go there too.
void round_activations(DeviceRows x, GgmlType dot_type, DeviceRows out, cudaStream_t stream,
                       const Q8Rows* q8 = nullptr);
// out (and q8) = act(gate) · up rounded through `dot_type`, a type with q8 codes: glu() and
// round_activations() in one pass.
void glu_round_activations(GluKind kind, DeviceRows gate, DeviceRows up, GgmlType dot_type,
                           DeviceRows out, const Q8Rows& q8, cudaStream_t stream);
// Whether round_activations gives q8 codes for `dot_type`.
bool has_q8_codes(GgmlType dot_type);
// keys[t] = the key of the largest value of row t (the lowest index among equals), merged over
// the blocks that split the row; argmax_index(keys[t]) is its index.
void argmax_rows(DeviceRows x, uint64_t* keys, cudaStream_t stream);
inline int32_t argmax_index(uint64_t key) {
    return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key));
}

}  // namespace tandem::cuda
