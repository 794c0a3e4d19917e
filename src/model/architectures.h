// The architectures Tandem runs, as data: what each one's forward pass needs to know, and the
// hook that reads its own keys (arch_<name>.cpp).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "cpu/rope.h"

namespace tandem {

class ArchKeys;
struct ModelConfig;

enum class ExpertPresence { kNone, kOptional, kRequired };

struct ArchitectureTraits {
    std::string_view name;        // general.architecture
    RopeType rope_type;           // NEOX for qwen, NORMAL for llama (llama_model_rope_type)
    bool qk_norm;                 // attn_q_norm / attn_k_norm per head
    ExpertPresence experts;       // llama may carry Mixtral-style experts; qwen3moe must
    bool expert_weights_norm;     // build_moe_ffn's norm_w for this architecture
    bool rope_dim_must_equal_head_dim;
    // Reads the architecture's own keys and adjusts the config after the common keys
    // (nullptr: nothing beyond them).
    void (*configure)(ArchKeys& keys, ModelConfig& config) = nullptr;
    // Every key of the "{arch}." namespace must be read or accepted, and every tensor bound.
    bool strict = false;
    // The tensor of the FFN's input norm (gpt-oss calls it post_attention_norm).
    std::string_view ffn_norm = "ffn_norm";
};

// The traits of `name`, or nullptr when the architecture is not supported.
const ArchitectureTraits* find_architecture(std::string_view name);
std::span<const ArchitectureTraits> supported_architectures();

// Turns the layers marked in is_swa into sliding-window layers of `window` positions, with the
// head sizes and rotated dimensions of the *_swa keys (llama.cpp's defaults: those of the full
// layers) and the given rope base and scale (model_config.cpp).
void make_sliding_layers(ArchKeys& keys, ModelConfig& config, const std::vector<bool>& is_swa, int window,
                         float freq_base, float freq_scale);

// The architecture hooks (arch_<name>.cpp).
void configure_gemma4(ArchKeys& keys, ModelConfig& config);
void configure_gpt_oss(ArchKeys& keys, ModelConfig& config);
void configure_deepseek2(ArchKeys& keys, ModelConfig& config);
void configure_qwen35(ArchKeys& keys, ModelConfig& config);
void configure_qwen35moe(ArchKeys& keys, ModelConfig& config);

}  // namespace tandem
