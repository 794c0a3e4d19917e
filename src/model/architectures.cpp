// The architectures Tandem runs (facts from llama.cpp's src/models/<arch>.cpp).
#include "model/architectures.h"

namespace tandem {
namespace {

// clang-format off
constexpr ArchitectureTraits kArchitectures[] = {
    // name        rope                qk_norm experts                     norm_w rope_dim==head_dim
    {"llama",     RopeType::kNormal, false,  ExpertPresence::kOptional,  true,  true},
    {"qwen3",     RopeType::kNeox,   true,   ExpertPresence::kNone,      false, false},
    {"qwen3moe",  RopeType::kNeox,   true,   ExpertPresence::kRequired,  true,  false},
    {"gemma4",    RopeType::kNeox,   true,   ExpertPresence::kOptional,  true,  false, configure_gemma4, true},
    {"gpt-oss",   RopeType::kNeox,   false,  ExpertPresence::kRequired,  false, false, configure_gpt_oss, true,
                  "post_attention_norm"},
    {"deepseek2", RopeType::kNormal, false,  ExpertPresence::kRequired,  false, false, configure_deepseek2, true},
    {"qwen35",    RopeType::kNeox,   true,   ExpertPresence::kNone,      false, false, configure_qwen35, true,
                  "post_attention_norm"},
    {"qwen35moe", RopeType::kNeox,   true,   ExpertPresence::kRequired,  true,  false, configure_qwen35moe, true,
                  "post_attention_norm"},
};
// clang-format on

}  // namespace

const ArchitectureTraits* find_architecture(std::string_view name) {
    for (const ArchitectureTraits& a : kArchitectures) {
        if (a.name == name) return &a;
    }
    return nullptr;
}

std::span<const ArchitectureTraits> supported_architectures() { return kArchitectures; }

}  // namespace tandem
