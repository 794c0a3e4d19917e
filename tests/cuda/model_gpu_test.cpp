// Whole models on the GPU: teacher-forced logits against the CPU backend (every architecture and
// a matrix of weight types, mixed per layer too) and against llama.cpp through the oracle kit
// with the criteria of tests/engine/llama_conformance_test.cpp; decode steps (the matrix-vector
// path, replayed as CUDA graphs) against the prefill path; greedy generation on the GPU and the
// CPU from the same prompt. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "cuda/gpu_model_checks.h"
#include "cuda/gpu_test_util.h"
#include "cuda/matmul.h"
#include "engine/session.h"
#include "model/backend.h"
#include "model/decoder.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/model_files.h"
#include "support/oracle.h"
#include "support/oracle_runs.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::all_logits;
using testing::compare_logits;
using testing::expect_conformant;
using testing::expect_conformant_routed;
using testing::LogitComparison;
using testing::strategy;

ThreadPool& pool() { return testing::gpu_test_pool(); }

struct SynthCase {
    std::string name;
    std::string arch;
    GgmlType attn, experts, output;
    std::vector<GgmlType> layer_exp_types = {};
    bool tied = false;
    float yarn_factor = 0.0f;  // YaRN rope (gpt-oss's real files: 32)
};

std::ostream& operator<<(std::ostream& os, const SynthCase& c) {
    return os << c.name;
}

class GpuModel : public ::testing::TestWithParam<SynthCase> {};

SynthSpec spec_of(const SynthCase& c) {
    SynthSpec s;
    s.arch = c.arch;
    s.n_layer = 3;
    s.n_embd = 256;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.n_ff_exp = 256;
    s.n_ff = 512;
    s.n_vocab = 600;
    s.attn_type = s.ffn_type = c.attn;
    s.exp_gate_type = s.exp_up_type = s.exp_down_type = c.experts;
    s.embd_type = c.attn;
    s.out_type = c.output;
    s.layer_exp_types = c.layer_exp_types;
    s.tied_output = c.tied;
    s.yarn_factor = c.yarn_factor;
    s.yarn_orig_ctx = c.yarn_factor > 0.0f ? 32 : 0;
    s.sliding_window = 8;  // gpt-oss: layers 0 and 2 slide, far shorter than the prompts
    // Quantized random floats (the i-quants get random valid blocks either way): random blocks
    // everywhere make deep random models chaotic, where float-level differences grow into
    // argmax flips (the oracle kit's README, "--fast-random").
    s.fast_random = false;
    return s;
}

std::string write_case(const SynthCase& c, testing::TempDir& dir) {
    return testing::write_model(spec_of(c), dir.file(c.name + ".gguf"));
}

// With sliding windows, also in batches of 16 (prefill tiles) and 4 (the decode kernel), whose
// caches are rings of the window and a batch (23 and 11 positions) that the 70 tokens wrap.
TEST_P(GpuModel, TeacherForcedLogitsMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const SynthCase& c = GetParam();
    auto model = Model::load(write_case(c, dir));
    const std::vector<int32_t> tokens = testing::random_tokens(70, model->config().n_vocab, 5);
    const std::vector<float> cpu = all_logits(*model, tokens, Device::kCpu);
    std::vector<int> batches = {70};
    if (model->config().has_sliding_layers()) batches.insert(batches.end(), {16, 4});
    for (const int batch : batches) {
        const std::vector<float> gpu =
            all_logits(*model, tokens, Device::kCuda, KvType::kF32, {}, batch);
        const LogitComparison cmp = compare_logits(cpu, gpu, model->config().n_vocab);
        const std::string what = c.name + " gpu vs cpu, batches of " + std::to_string(batch);
        if (model->config().is_moe()) {
            expect_conformant_routed(cmp, what);
        } else {
            expect_conformant(cmp, what);
        }
    }
}

// Token by token (decode: matrix-vector products, graphs replayed) against the whole prompt at
// once (prefill: tensor-core tiles) on the GPU.
TEST_P(GpuModel, DecodeStepsMatchPrefill) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const SynthCase& c = GetParam();
    auto model = Model::load(write_case(c, dir));
    const int V = model->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(40, V, 6);
    const std::vector<float> prefill = all_logits(*model, tokens, Device::kCuda);
    const std::vector<float> decode = testing::decode_logits(*model, tokens, KvType::kF32, 64);
    // Decode's matrix-vector products and prefill's tiles sum in other orders: with quantized
    // experts, a near-tie now and then routes a token otherwise (as against the CPU).
    const LogitComparison cmp = compare_logits(prefill, decode, V);
    const bool routed = model->config().is_moe() && c.experts != GgmlType::kF32;
    routed ? expect_conformant_routed(cmp, c.name + " decode vs prefill")
           : expect_conformant(cmp, c.name + " decode vs prefill");
}

const std::vector<SynthCase>& cases() {
    using T = GgmlType;
    static const std::vector<SynthCase> list = {
        {"qwen3moe_f32", "qwen3moe", T::kF32, T::kF32, T::kF32},
        {"qwen3moe_q4_K", "qwen3moe", T::kQ8_0, T::kQ4_K, T::kQ6_K},
        {"qwen3moe_mixed_layers",
         "qwen3moe",
         T::kQ8_0,
         T::kQ4_K,
         T::kQ6_K,
         {T::kQ5_K, T::kIQ4_XS, T::kMXFP4}},
        {"qwen3moe_iq2_xxs", "qwen3moe", T::kBF16, T::kIQ2_XXS, T::kQ8_0},
        {"qwen3moe_nvfp4", "qwen3moe", T::kNVFP4, T::kNVFP4, T::kQ8_0},
        {"qwen3_q4_0", "qwen3", T::kQ4_0, T::kQ4_0, T::kQ4_0},
        {"qwen3_f16", "qwen3", T::kF16, T::kF16, T::kF16, {}, true},
        {"llama_q6_K", "llama", T::kQ6_K, T::kQ6_K, T::kQ8_0},
        {"llama_iq3_xxs", "llama", T::kIQ3_XXS, T::kIQ3_XXS, T::kQ5_0},
        // Sliding windows of 8 with sinks, biases, the clamped SwiGLU, softmax over the chosen.
        {"gpt_oss_f32", "gpt-oss", T::kF32, T::kF32, T::kF32},
        {"gpt_oss_q8_0_mxfp4_yarn", "gpt-oss", T::kQ8_0, T::kMXFP4, T::kQ8_0, {}, false, 32.0f},
    };
    return list;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuModel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<SynthCase>& info) {
                             return info.param.name;
                         });

// Greedy generation of 64 tokens on the GPU from a prompt, and the CPU fed the same tokens: at
// every step the GPU's token is the CPU's argmax, except where the CPU prefers its own by less
// than the two backends' disagreement on that row (a tie within noise: either token is right).
TEST(GpuModelGreedy, TheCpuAgreesWithEveryDecisiveToken) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const SynthCase c{"greedy_q4_K", "qwen3moe", GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
    auto model = Model::load(write_case(c, dir));
    const int V = model->config().n_vocab;
    const std::vector<int32_t> prompt = testing::random_tokens(12, V, 9);
    SessionOptions o;
    o.n_ctx = 128;
    o.kv_type = KvType::kF32;
    o.device = Device::kCpu;
    Session cpu(*model, pool(), o);
    o.device = Device::kCuda;
    Session gpu(*model, pool(), o);
    std::span<const float> a = cpu.feed(prompt);
    std::span<const float> b = gpu.feed(prompt);
    int decisive = 0, ties = 0;
    for (int step = 0; step < 64; ++step) {
        const int32_t token =
            static_cast<int32_t>(std::max_element(b.begin(), b.end()) - b.begin());
        const int32_t cpu_token =
            static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin());
        double noise = 1e-3;
        for (int v = 0; v < V; ++v) noise = std::max(noise, std::fabs(double(a[v]) - b[v]));
        // The CPU's preference for its own token over the GPU's, against the rows' disagreement.
        if (a[cpu_token] - a[token] > noise) {
            ADD_FAILURE() << "step " << step << ": the GPU chose " << token << ", the CPU "
                          << cpu_token << " by a margin of " << a[cpu_token] - a[token]
                          << " (rows differ by " << noise << ")";
        }
        (cpu_token == token ? decisive : ties)++;
        a = cpu.feed(std::span<const int32_t>(&token, 1));
        b = gpu.feed(std::span<const int32_t>(&token, 1));
    }
    std::printf("[ greedy ] 64 GPU tokens: the CPU's argmax at %d, within a tie at %d\n", decisive,
                ties);
    EXPECT_GE(decisive, 56);
}

// The prefix cache's copies (--cache-mem) on the GPU: a sequence's KV saved to host memory and
// loaded into another sequence slot continues exactly as the original (bit for bit), where the
// slot without it does not; the bytes saved from the loaded slot are the bytes loaded, as many as
// the CPU's. gpt-oss: a prompt of 50 tokens in batches of 8 over sliding layers' rings of 15.
TEST(GpuSequenceCopy, ALoadedSequenceContinuesAsTheSavedOne) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    struct CopyCase {
        SynthCase model;
        int max_batch, prompt;
    };
    const CopyCase cases[] = {
        {{"copy_q4_K", "qwen3moe", GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}, 32, 21},
        {{"copy_gpt_oss", "gpt-oss", GgmlType::kQ8_0, GgmlType::kMXFP4, GgmlType::kQ8_0}, 8, 50},
    };
    for (const CopyCase& c : cases) {
        auto model = Model::load(write_case(c.model, dir));
        for (const KvType kv : {KvType::kF32, KvType::kF16}) {
            testing::expect_sequence_copy_continues(
                *model, kv, c.max_batch, c.prompt,
                c.model.name + (kv == KvType::kF16 ? ", f16" : ", f32"));
        }
    }
}

// Split models on the GPU: a model written as 7 parts, so that layers' expert tensors lie in
// different parts (separate mappings), gives the whole file's logits bit for bit with every
// expert in VRAM and under hybrid, whose expert slots read the host experts in place.
TEST(GpuSplitModel, PartsGiveTheWholeFilesLogits) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const SynthCase c{"split", "qwen3moe", GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
    const SynthSpec spec = spec_of(c);
    write_synthetic_model(spec, dir.file("whole.gguf"));
    const std::vector<std::string> parts =
        write_synthetic_model(spec, dir.file("split.gguf"), GgufSplitLayout{7});
    ASSERT_EQ(parts.size(), 7u);
    auto whole = Model::load(dir.file("whole.gguf"));
    auto split = Model::load(parts[3]);
    const std::vector<int32_t> tokens = testing::random_tokens(24, whole->config().n_vocab, 3);
    GpuOptions hybrid = strategy(MoeStrategy::kHybrid);
    hybrid.moe_slots = whole->config().n_expert;
    for (const GpuOptions& g : {strategy(MoeStrategy::kFused), hybrid}) {
        EXPECT_EQ(all_logits(*whole, tokens, Device::kCuda, KvType::kF32, g, 8),
                  all_logits(*split, tokens, Device::kCuda, KvType::kF32, g, 8))
            << moe_strategy_name(g.moe_strategy);
    }
}

const std::vector<SynthCase>& strategy_cases() {
    using T = GgmlType;
    static const std::vector<SynthCase> list = {
        {"mixed_layers", "qwen3moe", T::kQ8_0, T::kQ4_K, T::kQ6_K, {T::kQ5_K, T::kIQ4_XS, T::kMXFP4}},
        {"mxfp4", "qwen3moe", T::kQ8_0, T::kMXFP4, T::kQ8_0},
        {"nvfp4", "qwen3moe", T::kNVFP4, T::kNVFP4, T::kQ8_0},
        {"gpt_oss_mxfp4", "gpt-oss", T::kQ8_0, T::kMXFP4, T::kQ8_0},  // expert biases in slots
    };
    return list;
}

// Prompts of 70 tokens in one batch stream the host layers' experts to the GPU; in batches of 16
// the CPU executor computes them; in batches of 8 under offload the expert slots hold them.
TEST(GpuExpertStrategies, PrefillLogitsMatchResidentExperts) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    for (const SynthCase& c : strategy_cases()) {
        testing::expect_strategies_prefill_as_fused(*Model::load(write_case(c, dir)), c.name);
    }
}

// Greedy decoding of 128 tokens (CUDA graphs with the CPU executor's requests through the host
// mailbox inside, on a side stream under hybrid) under each strategy: the same tokens as fused,
// except where fused's own top two logits tie within the strategies' disagreement.
TEST(GpuExpertStrategies, GreedyTokensMatchFused) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    for (const SynthCase& c : strategy_cases()) {
        auto model = Model::load(write_case(c, dir));
        testing::expect_strategies_decode_as_fused(*model, c.name, 128, 120, 2, 160);
    }
}

// Conformance against llama.cpp (the kit's llama_logits, f32 KV) on the kit's models, and on
// models of architectures the kit does not write (qwen35, qwen35moe, gemma4) from tandem synth.
struct OracleCase {
    std::string name;
    std::string args;  // the kit's make_gguf.py arguments, or empty: `synth` through tandem synth
    int n_tokens;
    SynthSpec synth = {};
};

class GpuLlamaConformance : public ::testing::TestWithParam<OracleCase> {};

TEST_P(GpuLlamaConformance, TeacherForcedLogits) {
    TANDEM_REQUIRE_GPU();
    TANDEM_REQUIRE_ORACLE();
    const OracleCase& c = GetParam();
    testing::TempDir dir;
    const std::string path = c.args.empty()
                                 ? testing::write_model(c.synth, dir.file(c.name + ".gguf"))
                                 : testing::oracle_model(c.args);
    auto model = Model::load(path);
    const int V = model->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(c.n_tokens, V, 1000 + c.n_tokens);
    const std::vector<float> ref = testing::llama_all_logits(path, tokens);
    // Float weights take no quantized activations: tighter (KL <= 1e-3 on every row).
    const bool float_weights =
        c.name.find("f32") != std::string::npos || c.name.find("f16") != std::string::npos;
    const LogitComparison cmp = compare_logits(ref, all_logits(*model, tokens, Device::kCuda), V);
    expect_conformant(cmp, c.name + " gpu vs llama.cpp", float_weights ? 1e-3 : 1e-2);
}

const std::string kSmall =
    "--n-embd 128 --n-head 4 --n-head-kv 2 --head-dim 32 --n-ff-exp 64 --n-ff 256";
const std::string kQuant =
    "--n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 64 --n-ff-exp 256 --n-ff 512";

std::vector<OracleCase> oracle_cases() {
    std::vector<OracleCase> out = {
        {"qwen3moe_f32", "--arch qwen3moe " + kSmall, 50},
        {"qwen3_f32_hd128", "--arch qwen3 --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 128",
         40},
        {"llama_f32_tied", "--arch llama --tied " + kSmall, 20},
        {"qwen3moe_nvfp4_scales", "--arch qwen3moe --wtype nvfp4 --nvfp4-scales " + kSmall, 48},
        // gpt-oss as the CPU's conformance takes it (tests/engine/arch_conformance_test.cpp).
        {"gpt_oss_f32",
         "--arch gpt-oss --n-embd 128 --n-head 4 --n-head-kv 2 --head-dim 32 --n-ff-exp 64 "
         "--n-layer 4",
         64},
        {"gpt_oss_q8_0_mxfp4",
         "--arch gpt-oss --wtype q8_0 --exp-type mxfp4 --n-embd 256 --n-head 4 --n-head-kv 2 "
         "--head-dim 64 --n-ff-exp 256 --n-layer 3 --sliding-window 16",
         64},
        {"qwen3moe_q4_K_200tok",
         "--arch qwen3moe --wtype q4_K --n-embd 256 --n-head 4 --n-head-kv 1 --head-dim 128 "
         "--n-expert 16 --n-expert-used 4 --n-ff-exp 256",
         200},
    };
    // qwen3.5 as the CPU's conformance takes it (tests/engine/arch_conformance_test.cpp): the
    // recurrent state over hundreds of tokens, key heads shared by value heads, rope sections.
    {
        SynthSpec q = testing::tiny_spec("qwen35moe");
        q.n_layer = 4;
        q.n_embd = 128;
        q.head_dim = 32;
        q.n_ff = 256;
        q.n_expert = 8;
        q.n_ff_exp = 64;
        q.n_ctx = 4096;
        out.push_back({"qwen35moe_f32_300tok", "", 300, q});
        SynthSpec d = q;
        d.arch = "qwen35";
        d.n_layer = 3;
        d.full_attn_interval = 3;
        d.conv_kernel = 2;
        d.head_dim = 64;
        d.rope_dims = 64;
        d.rope_sections = {11, 11, 10, 0};
        d.ssm_k_heads = 1;
        d.ssm_v_heads = 4;
        d.ssm_state = 32;
        out.push_back({"qwen35_f32_sections_200tok", "", 200, d});
    }
    // gemma4 as the CPU's conformance takes it (arch_conformance_test.cpp): every optional part
    // (shared KV caches, per-layer embeddings, values that are the keys, expert scales, fused
    // gate_up, sliding layers of their own heads, a partial rope), and a q8_0 MoE model.
    {
        SynthSpec s = testing::tiny_spec("gemma4");
        s.n_layer = 6;
        s.swa_period = 3;
        s.n_embd = 128;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 32;
        s.n_ff = 256;
        s.n_expert = 4;
        s.n_expert_used = 2;
        s.n_ff_exp = 64;
        s.n_vocab = 300;
        s.n_ctx = 4096;
        s.sliding_window = 8;
        s.shared_kv_layers = 3;
        s.n_embd_per_layer = 8;
        s.layer_out_scale = true;
        s.values_are_keys = true;
        s.expert_scale = true;
        s.gate_up_fused = true;
        s.head_dim_swa = 16;
        s.n_head_kv_swa = 1;
        s.rope_partial = 0.5f;
        s.tied_output = true;
        out.push_back({"gemma4_moe_every_option_f32", "", 48, s});
        SynthSpec q = testing::tiny_spec("gemma4");
        q.n_layer = 4;
        q.swa_period = 2;
        q.n_embd = 256;
        q.n_head = 4;
        q.n_head_kv = 2;
        q.head_dim = 64;
        q.n_ff = 512;
        q.n_expert = 8;
        q.n_expert_used = 2;
        q.n_ff_exp = 256;
        q.n_vocab = 300;
        q.n_ctx = 4096;
        q.sliding_window = 8;
        q.expert_scale = true;
        q.embd_type = q.attn_type = q.ffn_type = q.out_type = GgmlType::kQ8_0;
        q.exp_gate_type = q.exp_up_type = q.exp_down_type = GgmlType::kQ8_0;
        out.push_back({"gemma4_q8_0", "", 48, q});
    }
    for (const char* type : {"f16", "bf16", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K", "mxfp4",
                             "iq4_xs", "iq2_xxs", "iq3_xxs"}) {
        const std::string t(type);
        const std::string fast = t.rfind("iq", 0) == 0 ? " --fast-random" : "";
        out.push_back({"qwen3moe_" + t, "--arch qwen3moe --wtype " + t + " " + kQuant + fast, 64});
        out.push_back({"llama_" + t, "--arch llama --wtype " + t + " " + kQuant + fast, 40});
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuLlamaConformance, ::testing::ValuesIn(oracle_cases()),
                         [](const ::testing::TestParamInfo<OracleCase>& info) {
                             return info.param.name;
                         });

}  // namespace
}  // namespace tandem
