// Rotary position embedding as ggml computes it.
#include "cpu/rope.h"

#include <algorithm>
#include <cmath>

namespace tandem {
namespace {

// YaRN's correction dimension: the rotary dim whose wavelength spans n_rot turns over the
// original context (ggml_rope_yarn_corr_dim).
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, int i0) {
    const float y = (i0 / 2 - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

Rope::Rope(const RopeParams& params) : p_(params) {
    theta_scale_ = std::pow(p_.freq_base, -2.0f / static_cast<float>(p_.n_dims));
    const int n_ctx_orig = p_.n_ctx_orig > 0 ? p_.n_ctx_orig : 4096;
    float start = std::floor(yarn_corr_dim(p_.n_dims, n_ctx_orig, p_.beta_fast, p_.freq_base));
    float end = std::ceil(yarn_corr_dim(p_.n_dims, n_ctx_orig, p_.beta_slow, p_.freq_base));
    corr_dims_[0] = std::max(0.0f, start);
    corr_dims_[1] = std::min(static_cast<float>(p_.n_dims - 1), end);
}

void Rope::fill_cache(int64_t pos, float* cache) const {
    // theta_i = pos · base^(-2i/n_dims), built by repeated multiplication in float as ggml does.
    float theta_extrap = static_cast<float>(pos);
    const int sect_dims = p_.sections[0] + p_.sections[1] + p_.sections[2] + p_.sections[3];
    for (int i0 = 0; i0 < p_.n_dims; i0 += 2) {
        const float ff = p_.freq_factors != nullptr ? p_.freq_factors[i0 / 2] : 1.0f;
        float theta_pos = theta_extrap;
        if (p_.imrope && sect_dims > 0) {
            // ggml_mrope_cache_init with positions (pos, pos, pos, 0): the extra section's theta is 0.
            const int sector = (i0 / 2) % sect_dims;
            const bool t = sector % 3 == 0 && sector < 3 * p_.sections[0];
            const bool h = sector % 3 == 1 && sector < 3 * p_.sections[1];
            const bool w = sector % 3 == 2 && sector < 3 * p_.sections[2];
            if (!t && !h && !w) theta_pos = 0.0f;
        }
        const float theta_base = theta_pos / ff;
        const float theta_interp = p_.freq_scale * theta_base;
        float theta = theta_interp;
        float mscale = p_.attn_factor;
        if (p_.ext_factor != 0.0f) {
            const float ramp_mix = yarn_ramp(corr_dims_[0], corr_dims_[1], i0) * p_.ext_factor;
            theta = theta_interp * (1 - ramp_mix) + theta_base * ramp_mix;
            mscale *= 1.0f + 0.1f * std::log(1.0f / p_.freq_scale);
        }
        cache[i0 + 0] = std::cos(theta) * mscale;
        cache[i0 + 1] = std::sin(theta) * mscale;
        theta_extrap *= theta_scale_;
    }
}

void Rope::apply(float* heads, int n_heads, int head_dim, int64_t pos, float* cache) const {
    fill_cache(pos, cache);
    const int n = p_.n_dims;
    for (int h = 0; h < n_heads; ++h) {
        float* x = heads + static_cast<int64_t>(h) * head_dim;
        for (int i0 = 0; i0 < n; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            // NORMAL rotates (x[i0], x[i0+1]); NEOX rotates (x[i], x[i + n/2]) with i = i0/2.
            const int a = p_.type == RopeType::kNormal ? i0 : i0 / 2;
            const int b = p_.type == RopeType::kNormal ? i0 + 1 : i0 / 2 + n / 2;
            const float x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

}  // namespace tandem
