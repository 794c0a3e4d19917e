// Rotary position embedding as ggml computes it (ggml_rope_ext): NORMAL (adjacent pairs, llama)
// or NEOX (halves, qwen), with linear and YaRN context scaling.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem {

enum class RopeType { kNormal, kNeox };

struct RopeParams {
    RopeType type = RopeType::kNormal;
    int n_dims = 0;           // rotated dimensions (the first n_dims of each head)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear and YaRN
    float ext_factor = 0.0f;  // YaRN extrapolation mix: 1 with YaRN, else 0
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    int n_ctx_orig = 0;       // rope.scaling.original_context_length (or the training context)
    // Optional per-pair frequency divisors (llama-3's rope_freqs tensor), n_dims / 2 values.
    const float* freq_factors = nullptr;
    // Interleaved multimodal rope (qwen3-vl, qwen3.5: ggml's IMROPE) over text, where the
    // temporal, height and width positions are the token's and the extra one is 0: pair i
    // (sector i mod Σsections) rotates by the token's position when sector % 3 is 0, 1 or 2 and
    // sector < 3·sections[that index], else by position 0 (not at all). NEOX pairs otherwise.
    bool imrope = false;
    int sections[4] = {0, 0, 0, 0};
};

// Per-position cos/sin tables, filled once per position and reused for every head.
class Rope {
public:
    explicit Rope(const RopeParams& params);
    // Rotates n_heads heads of head_dim values each (stride head_dim) at position pos, in place.
    // `cache` must hold n_dims floats (per-thread scratch).
    void apply(float* heads, int n_heads, int head_dim, int64_t pos, float* cache) const;
    void fill_cache(int64_t pos, float* cache) const;
    int n_dims() const { return p_.n_dims; }

private:
    RopeParams p_;
    float theta_scale_;
    float corr_dims_[2];
};

}  // namespace tandem
