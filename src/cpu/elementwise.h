// Row-wise operations on f32 activations, computed as ggml computes them (so results match
// llama.cpp to float rounding): RMSNorm, the gated activations, softmax, residual add.
#pragma once

#include <cstdint>

namespace tandem {

// The gated activation of an FFN: act(gate) · up.
enum class GluKind { kSilu, kGelu };

// y = x / sqrt(mean(x²) + eps) · w  (the mean accumulated in double, as ggml does).
// w may be nullptr (no weight). y may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);

// out[i] = silu(gate[i]) · up[i], silu(x) = x / (1 + e^-x).
void silu_glu(const float* gate, const float* up, int64_t n, float* out);
// out[i] = gelu_tanh(gate[i]) · up[i].
void gelu_glu(const float* gate, const float* up, int64_t n, float* out);

// out = act(gate) · up for the given kind.
void glu(GluKind kind, const float* gate, const float* up, int64_t n, float* out);

// In place: x = softmax(x · scale) over n values (max-subtracted, sum in double).
void softmax(float* x, int64_t n, float scale = 1.0f);

// y[i] += x[i].
void add_into(float* y, const float* x, int64_t n);

}  // namespace tandem
