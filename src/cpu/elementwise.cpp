// Row-wise operations on f32 activations.
#include "cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "formats/float16.h"

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

namespace {

float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// ggml_table_gelu_f16: gelu of every fp16 value, rounded to fp16.
const std::vector<uint16_t>& gelu_table() {
    static const std::vector<uint16_t> table = [] {
        std::vector<uint16_t> t(1 << 16);
        for (uint32_t i = 0; i < t.size(); ++i) t[i] = f32_to_fp16(gelu_tanh(fp16_to_f32(static_cast<uint16_t>(i))));
        return t;
    }();
    return table;
}

}  // namespace

const uint16_t* gelu_fp16_table() {
    return gelu_table().data();
}

void gelu_glu(const float* gate, const float* up, int64_t n, float* out) {
    const uint16_t* table = gelu_fp16_table();
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        if (g <= -10.0f) {
            out[i] = 0.0f;
        } else if (g >= 10.0f) {
            out[i] = g * up[i];
        } else {
            out[i] = fp16_to_f32(table[f32_to_fp16(g)]) * up[i];
        }
    }
}

void swiglu_oai(const float* gate, const float* up, int64_t n, float* out) {
    constexpr float kAlpha = 1.702f;
    constexpr float kLimit = 7.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float x = std::min(gate[i], kLimit);
        const float y = std::clamp(up[i], -kLimit, kLimit);
        out[i] = x / (1.0f + std::exp(kAlpha * (-x))) * (y + 1.0f);
    }
}

void glu(GluKind kind, const float* gate, const float* up, int64_t n, float* out) {
    switch (kind) {
        case GluKind::kSilu: silu_glu(gate, up, n, out); return;
        case GluKind::kGelu: gelu_glu(gate, up, n, out); return;
        case GluKind::kSwigluOai: swiglu_oai(gate, up, n, out); return;
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

void softmax_with_sink(float* x, int64_t n, float scale, float sink) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
        x[i] *= scale;
        if (x[i] > max) max = x[i];
    }
    max = std::max(max, sink);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - max);
        sum += e;
        x[i] = e;
    }
    sum += static_cast<double>(std::exp(sink - max));
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void add_into(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softcap(float* x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

}  // namespace tandem
