// `tandem synth`: writes a random-weight model (qwen3moe, qwen3, llama, gemma4 or gpt-oss) that
// llama.cpp loads.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/type_option.h"
#include "model/synthetic_model.h"

namespace tandem::cli {
namespace {

struct SynthOptions {
    SynthSpec spec;
    std::string out = "synthetic.gguf";
    GgufSplitLayout split;
    std::string wtype, embd_type, attn_type, ffn_type, exp_type, exp_gate_type, exp_up_type,
        exp_down_type, router_type = "f32", out_type, layer_exp_types;
};

void resolve_types(SynthOptions& o) {
    SynthSpec& s = o.spec;
    const std::string w = o.wtype.empty() ? "f32" : o.wtype;
    auto pick = [](const std::string& specific, const std::string& fallback) {
        return specific.empty() ? fallback : specific;
    };
    s.embd_type = parse_type(pick(o.embd_type, w), "--embd-type");
    s.attn_type = parse_type(pick(o.attn_type, w), "--attn-type");
    s.ffn_type = parse_type(pick(o.ffn_type, w), "--ffn-type");
    const std::string exp = pick(o.exp_type, w);
    s.exp_gate_type = parse_type(pick(o.exp_gate_type, exp), "--exp-gate-type");
    s.exp_up_type = parse_type(pick(o.exp_up_type, exp), "--exp-up-type");
    s.exp_down_type = parse_type(pick(o.exp_down_type, exp), "--exp-down-type");
    s.router_type = parse_type(o.router_type, "--router-type");
    s.out_type = parse_type(pick(o.out_type, w), "--out-type");
    s.layer_exp_types.clear();
    if (!o.layer_exp_types.empty()) s.layer_exp_types = parse_type_list(o.layer_exp_types, "--layer-exp-types");
}

}  // namespace

void add_synth_command(CLI::App& app) {
    auto o = std::make_shared<SynthOptions>();
    SynthSpec& s = o->spec;
    CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight model for tests, demos and benchmarks");
    cmd->add_option("-o,--out", o->out, "Output GGUF path")->capture_default_str();
    cmd->add_option("--arch", s.arch, "Architecture: qwen3moe, qwen3, llama, gemma4, gpt-oss, deepseek2, qwen35 or qwen35moe")->capture_default_str();
    cmd->add_option("--name", s.name, "general.name");
    cmd->add_option("--layers", s.n_layer, "Number of layers")->capture_default_str();
    cmd->add_option("--embd", s.n_embd, "Embedding width")->capture_default_str();
    cmd->add_option("--heads", s.n_head, "Attention heads")->capture_default_str();
    cmd->add_option("--kv-heads", s.n_head_kv, "Key/value heads")->capture_default_str();
    cmd->add_option("--head-dim", s.head_dim, "Head dimension")->capture_default_str();
    cmd->add_option("--experts", s.n_expert, "Experts per layer (MoE)")->capture_default_str();
    cmd->add_option("--experts-used", s.n_expert_used, "Experts used per token (MoE)")->capture_default_str();
    cmd->add_option("--expert-ffn", s.n_ff_exp, "Expert FFN width (MoE)")->capture_default_str();
    cmd->add_option("--ffn", s.n_ff, "Dense FFN width (qwen3, llama, gemma4)")->capture_default_str();
    cmd->add_option("--vocab", s.n_vocab, "Vocabulary size (>= 259)")->capture_default_str();
    cmd->add_option("--ctx", s.n_ctx, "context_length")->capture_default_str();
    cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
    cmd->add_flag("--tied", s.tied_output, "No output.weight: the head reuses token_embd");
    cmd->add_option("--sliding-window", s.sliding_window, "gemma4, gpt-oss: positions a sliding layer sees")
        ->capture_default_str();
    cmd->add_option("--swa-period", s.swa_period,
                    "gemma4, gpt-oss: layer L is full when L % period == period - 1 (0: all slide)")
        ->capture_default_str();
    cmd->add_option("--head-dim-swa", s.head_dim_swa, "gemma4: head size of sliding layers (0: --head-dim)");
    cmd->add_option("--kv-heads-swa", s.n_head_kv_swa, "gemma4: KV heads of sliding layers (0: --kv-heads)");
    cmd->add_option("--rope-base-swa", s.rope_base_swa, "gemma4: rope base of sliding layers")->capture_default_str();
    cmd->add_option("--rope-partial", s.rope_partial,
                    "gemma4: share of a full layer's head that rotates (< 1 writes rope_freqs)")
        ->capture_default_str();
    cmd->add_option("--softcap", s.final_softcap, "gemma4: final logit soft-capping (0: key not written)")
        ->capture_default_str();
    cmd->add_option("--shared-kv-layers", s.shared_kv_layers, "gemma4: last layers that read earlier KV caches");
    cmd->add_option("--per-layer-embd", s.n_embd_per_layer, "gemma4: per-layer embedding width (0: none)");
    cmd->add_flag("--layer-out-scale", s.layer_out_scale, "gemma4: layer_output_scale tensors");
    cmd->add_flag("--values-are-keys", s.values_are_keys, "gemma4: full layers without attn_v");
    cmd->add_flag("--expert-scale", s.expert_scale, "gemma4: per-expert ffn_down_exps.scale");
    cmd->add_flag("--gate-up-fused", s.gate_up_fused, "gemma4: experts' gate and up in one tensor");
    cmd->add_option("--yarn-factor", s.yarn_factor, "YaRN rope scaling factor (0: none)");
    cmd->add_option("--yarn-orig-ctx", s.yarn_orig_ctx, "YaRN original context (0: --ctx)");
    cmd->add_option("--yarn-log-mul", s.yarn_log_mul, "deepseek2: rope.scaling.yarn_log_multiplier (0: none)");
    cmd->add_option("--q-lora-rank", s.q_lora_rank, "deepseek2: query low-rank width (0: plain attn_q)");
    cmd->add_option("--kv-lora-rank", s.kv_lora_rank, "deepseek2: latent width")->capture_default_str();
    cmd->add_option("--qk-nope", s.qk_nope, "deepseek2: unrotated query/key dims (--head-dim: rotated)")
        ->capture_default_str();
    cmd->add_option("--v-head-mla", s.v_head_mla, "deepseek2: value dims per head")->capture_default_str();
    cmd->add_option("--shared-experts", s.n_expert_shared, "deepseek2: shared experts")->capture_default_str();
    cmd->add_option("--dense-lead", s.n_dense_lead, "deepseek2: leading dense layers")->capture_default_str();
    cmd->add_option("--expert-groups", s.n_expert_groups, "deepseek2: expert groups (group-limited routing)");
    cmd->add_option("--groups-used", s.n_group_used, "deepseek2: groups used per token");
    cmd->add_option("--weights-scale", s.expert_weights_scale, "deepseek2: expert_weights_scale")
        ->capture_default_str();
    cmd->add_flag("!--softmax-gating,--sigmoid-gating", s.sigmoid_gating, "deepseek2: softmax (V2) or sigmoid (V3) gating");
    cmd->add_flag("!--no-expert-bias", s.expert_bias, "deepseek2: no exp_probs_b");
    cmd->add_flag("!--no-weights-norm", s.expert_weights_norm, "deepseek2: do not renormalise the routing weights");
    cmd->add_option("--ssm-state", s.ssm_state, "qwen35: delta-net head size (state size)")->capture_default_str();
    cmd->add_option("--ssm-k-heads", s.ssm_k_heads, "qwen35: delta-net key heads")->capture_default_str();
    cmd->add_option("--ssm-v-heads", s.ssm_v_heads, "qwen35: delta-net value heads")->capture_default_str();
    cmd->add_option("--conv-kernel", s.conv_kernel, "qwen35: short convolution taps")->capture_default_str();
    cmd->add_option("--full-attn-interval", s.full_attn_interval, "qwen35: every Nth layer is full attention")
        ->capture_default_str();
    cmd->add_option("--rope-dims", s.rope_dims, "qwen35: rotated dims of a head (0: head-dim / 4)");
    cmd->add_option("--rope-sections", s.rope_sections, "qwen35: four interleaved rope section sizes")
        ->delimiter(',');
    cmd->add_option("--shexp-ffn", s.n_ff_shexp, "qwen35moe: shared expert width")->capture_default_str();
    cmd->add_flag("--fast-random", s.fast_random,
                  "Quantized tensors as random valid blocks (fast, for big models)");
    cmd->add_option("--threads", s.threads, "Threads (default: one per physical core)")
        ->check(non_negative_number());
    cmd->add_option("--wtype", o->wtype, "Default type of every weight (f32)");
    cmd->add_option("--embd-type", o->embd_type, "token_embd type");
    cmd->add_option("--attn-type", o->attn_type, "Attention weights type");
    cmd->add_option("--ffn-type", o->ffn_type, "Dense FFN weights type");
    cmd->add_option("--exp-type", o->exp_type, "Expert gate/up/down type");
    cmd->add_option("--exp-gate-type", o->exp_gate_type, "Expert gate type");
    cmd->add_option("--exp-up-type", o->exp_up_type, "Expert up type");
    cmd->add_option("--exp-down-type", o->exp_down_type, "Expert down type");
    cmd->add_option("--router-type", o->router_type, "Router type")->capture_default_str();
    cmd->add_option("--out-type", o->out_type, "output.weight type");
    cmd->add_option("--layer-exp-types", o->layer_exp_types,
                    "Comma-separated expert types; layer L uses entry L % n for all its experts");
    cmd->add_option("--split", o->split.n_parts,
                    "Write N parts OUT-0000i-of-0000N.gguf as llama.cpp's gguf-split does")
        ->check(positive_number());
    cmd->add_flag("--split-metadata-first", o->split.metadata_only_first,
                  "With --split: the first part holds only metadata (gguf-split --no-tensor-first-split)");
    cmd->callback([o] {
        resolve_types(*o);
        Stopwatch watch;
        std::fprintf(stderr, "synth: writing %s (%s, %d layers, embd %d)\n", o->out.c_str(),
                     o->spec.arch.c_str(), o->spec.n_layer, o->spec.n_embd);
        const std::vector<std::string> paths = write_synthetic_model(o->spec, o->out, o->split);
        if (paths.size() == 1) {
            std::fprintf(stderr, "synth: wrote %s in %.1f s\n", paths[0].c_str(), watch.seconds());
        } else {
            std::fprintf(stderr, "synth: wrote %zu parts, %s to %s, in %.1f s\n", paths.size(),
                         paths.front().c_str(), paths.back().c_str(), watch.seconds());
        }
    });
}

}  // namespace tandem::cli
