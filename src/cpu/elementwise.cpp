// Row-wise operations on f32 activations.
#include "cpu/elementwise.h"

#include <cmath>
#include <limits>

namespace tandem {

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (w == nullptr) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    }
}

void silu_glu(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void gelu_glu(const float* gate, const float* up, int64_t n, float* out) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoef * g * g)));
        out[i] = gelu * up[i];
    }
}

void glu(GluKind kind, const float* gate, const float* up, int64_t n, float* out) {
    if (kind == GluKind::kSilu) {
        silu_glu(gate, up, n, out);
    } else {
        gelu_glu(gate, up, n, out);
    }
}

void softmax(float* x, int64_t n, float scale) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
        x[i] *= scale;
        if (x[i] > max) max = x[i];
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - max);
        sum += e;
        x[i] = e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void add_into(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace tandem
