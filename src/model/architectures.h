// The architectures Tandem runs, as data: what each one's forward pass needs to know.
#pragma once

#include <span>
#include <string_view>

#include "cpu/rope.h"

namespace tandem {

enum class ExpertPresence { kNone, kOptional, kRequired };

struct ArchitectureTraits {
    std::string_view name;        // general.architecture
    RopeType rope_type;           // NEOX for qwen, NORMAL for llama (llama_model_rope_type)
    bool qk_norm;                 // attn_q_norm / attn_k_norm per head
    ExpertPresence experts;       // llama may carry Mixtral-style experts; qwen3moe must
    bool expert_weights_norm;     // build_moe_ffn's norm_w for this architecture
    bool rope_dim_must_equal_head_dim;
};

// The traits of `name`, or nullptr when the architecture is not supported.
const ArchitectureTraits* find_architecture(std::string_view name);
std::span<const ArchitectureTraits> supported_architectures();

}  // namespace tandem
