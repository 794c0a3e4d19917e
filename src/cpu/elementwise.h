// Row-wise operations on f32 activations, computed as ggml computes them (so results match
// llama.cpp to float rounding): RMSNorm, the gated activations, softmax, residual add.
#pragma once

#include <cstdint>

namespace tandem {

// The gated activation of an FFN, as ggml's CPU backend computes it.
enum class GluKind {
    kSilu,       // silu(gate) · up
    kGelu,       // gelu_tanh(gate) · up, gelu read from ggml's fp16 table (the gate rounded to
                 // fp16, the gelu rounded to fp16; gate <= -10 gives 0, gate >= 10 gives gate · up)
    kSwigluOai,  // gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7): g · sigmoid(1.702 · g) · (u + 1)
};

// y = x / sqrt(mean(x²) + eps) · w  (the mean accumulated in double, as ggml does).
// w may be nullptr (no weight). y may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);

// out[i] = silu(gate[i]) · up[i], silu(x) = x / (1 + e^-x).
void silu_glu(const float* gate, const float* up, int64_t n, float* out);
// out[i] = gelu_tanh(gate[i]) · up[i] through ggml's fp16 table (see GluKind::kGelu).
void gelu_glu(const float* gate, const float* up, int64_t n, float* out);
// gpt-oss's clamped SwiGLU (ggml_swiglu_oai with alpha 1.702, limit 7).
void swiglu_oai(const float* gate, const float* up, int64_t n, float* out);

// ggml_table_gelu_f16: gelu_tanh of every fp16 value (indexed by its bits), rounded to fp16, as
// gelu_glu reads it (65536 values; the GPU backend uploads the same table).
const uint16_t* gelu_fp16_table();

// out = act(gate) · up for the given kind.
void glu(GluKind kind, const float* gate, const float* up, int64_t n, float* out);

// In place: x = softmax(x · scale) over n values (max-subtracted, sum in double).
void softmax(float* x, int64_t n, float scale = 1.0f);
// The same with a sink: the max is taken over the scaled x and the sink, and exp(sink - max)
// joins the sum (ggml's soft_max with soft_max_add_sinks); the sink gets no output.
void softmax_with_sink(float* x, int64_t n, float scale, float sink);

// y[i] += x[i].
void add_into(float* y, const float* x, int64_t n);

// x[i] = cap · tanh(x[i] · (1/cap)).
void softcap(float* x, int64_t n, float cap);

}  // namespace tandem
