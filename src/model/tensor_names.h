// GGUF tensor names of the architectures (llama.cpp's LLM_TENSOR_NAMES), kept apart from logic.
#pragma once

#include <string>
#include <string_view>

namespace tandem::tensor_names {

inline constexpr std::string_view kTokenEmbd = "token_embd";
inline constexpr std::string_view kOutputNorm = "output_norm";
inline constexpr std::string_view kOutput = "output";
inline constexpr std::string_view kRopeFreqs = "rope_freqs";
// Gemma per-layer embeddings.
inline constexpr std::string_view kPerLayerTokenEmbd = "per_layer_token_embd";
inline constexpr std::string_view kPerLayerModelProj = "per_layer_model_proj";
inline constexpr std::string_view kPerLayerProjNorm = "per_layer_proj_norm";

// Per-layer tensors: blk.N.<suffix>.weight
inline constexpr std::string_view kAttnNorm = "attn_norm";
inline constexpr std::string_view kAttnQ = "attn_q";
inline constexpr std::string_view kAttnK = "attn_k";
inline constexpr std::string_view kAttnV = "attn_v";
inline constexpr std::string_view kAttnOutput = "attn_output";
inline constexpr std::string_view kAttnQNorm = "attn_q_norm";
inline constexpr std::string_view kAttnKNorm = "attn_k_norm";
inline constexpr std::string_view kAttnSinks = "attn_sinks";
inline constexpr std::string_view kAttnPostNorm = "post_attention_norm";
inline constexpr std::string_view kFfnNorm = "ffn_norm";
inline constexpr std::string_view kFfnPostNorm = "post_ffw_norm";
inline constexpr std::string_view kFfnPreNorm2 = "pre_ffw_norm_2";
inline constexpr std::string_view kFfnPostNorm1 = "post_ffw_norm_1";
inline constexpr std::string_view kFfnPostNorm2 = "post_ffw_norm_2";
inline constexpr std::string_view kLayerOutScale = "layer_output_scale";
inline constexpr std::string_view kPerLayerInpGate = "inp_gate";
inline constexpr std::string_view kPerLayerProj = "proj";
inline constexpr std::string_view kPerLayerPostNorm = "post_norm";
inline constexpr std::string_view kFfnGate = "ffn_gate";
inline constexpr std::string_view kFfnUp = "ffn_up";
inline constexpr std::string_view kFfnDown = "ffn_down";
inline constexpr std::string_view kFfnRouter = "ffn_gate_inp";
inline constexpr std::string_view kFfnGateExps = "ffn_gate_exps";
inline constexpr std::string_view kFfnUpExps = "ffn_up_exps";
inline constexpr std::string_view kFfnGateUpExps = "ffn_gate_up_exps";
inline constexpr std::string_view kFfnDownExps = "ffn_down_exps";
inline constexpr std::string_view kFfnExpProbsB = "exp_probs_b";
inline constexpr std::string_view kFfnGateInpShexp = "ffn_gate_inp_shexp";
// Gated delta-net (qwen3.5).
inline constexpr std::string_view kAttnQkv = "attn_qkv";
inline constexpr std::string_view kAttnGate = "attn_gate";
inline constexpr std::string_view kSsmConv1d = "ssm_conv1d";
inline constexpr std::string_view kSsmDt = "ssm_dt";
inline constexpr std::string_view kSsmA = "ssm_a";  // no .weight suffix in the files
inline constexpr std::string_view kSsmBeta = "ssm_beta";
inline constexpr std::string_view kSsmAlpha = "ssm_alpha";
inline constexpr std::string_view kSsmNorm = "ssm_norm";
inline constexpr std::string_view kSsmOut = "ssm_out";
inline constexpr std::string_view kFfnGateShexp = "ffn_gate_shexp";
inline constexpr std::string_view kFfnUpShexp = "ffn_up_shexp";
inline constexpr std::string_view kFfnDownShexp = "ffn_down_shexp";
// Multi-head latent attention (deepseek2).
inline constexpr std::string_view kAttnQA = "attn_q_a";
inline constexpr std::string_view kAttnQANorm = "attn_q_a_norm";
inline constexpr std::string_view kAttnQB = "attn_q_b";
inline constexpr std::string_view kAttnKvAMqa = "attn_kv_a_mqa";
inline constexpr std::string_view kAttnKvANorm = "attn_kv_a_norm";
inline constexpr std::string_view kAttnKB = "attn_k_b";
inline constexpr std::string_view kAttnVB = "attn_v_b";

// "token_embd.weight"
inline std::string global(std::string_view base, std::string_view kind = "weight") {
    return std::string(base) + "." + std::string(kind);
}
// "blk.3.attn_q.weight"
inline std::string layer(int il, std::string_view base, std::string_view kind = "weight") {
    return "blk." + std::to_string(il) + "." + std::string(base) + "." + std::string(kind);
}

}  // namespace tandem::tensor_names
