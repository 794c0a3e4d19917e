// Gemma 4 models on the GPU against the CPU backend: teacher-forced logits (prompts in one batch,
// in prefill tiles of 16 and in decode batches of 4, whose sliding rings the 70 tokens wrap),
// decode steps (CUDA graphs) against prefill, every expert strategy against fused, and the
// sequence copies of the prefix cache over rings and shared caches. The models cover dense and
// MoE layers, sliding layers with their own head size, KV heads and rope base beside global
// layers with a partial rope, heads of 512 (a real file's global layers), shared KV caches,
// values that are the keys, per-expert scales, fused gate_up experts, per-layer embeddings,
// layer output scales and soft-capping. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <utility>
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

struct Gemma4Case {
    std::string name;
    SynthSpec spec;
};

std::ostream& operator<<(std::ostream& os, const Gemma4Case& c) {
    return os << c.name;
}

// `layers` layers, every period-th full (the others slide over 8 positions), 256 wide, heads of
// 64, `experts` experts (0: dense).
SynthSpec gemma(int layers, int period, int experts) {
    SynthSpec s;
    s.arch = "gemma4";
    s.n_layer = layers;
    s.swa_period = period;
    s.sliding_window = 8;
    s.n_embd = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.n_ff = 512;
    s.n_expert = experts;
    s.n_expert_used = experts >= 16 ? 4 : 2;
    s.n_ff_exp = 256;
    s.n_vocab = 600;
    s.n_ctx = 4096;
    s.fast_random = false;  // quantized random floats (model_gpu_test.cpp says why)
    return s;
}

const std::vector<Gemma4Case>& cases() {
    using T = GgmlType;
    static const std::vector<Gemma4Case> list = [] {
        std::vector<Gemma4Case> out;
        {
            // Dense: sliding layers of 32-value heads and 4 KV heads, their own rope base;
            // global layers rotating a quarter of their heads.
            SynthSpec s = gemma(6, 3, 0);
            s.head_dim_swa = 32;
            s.n_head_kv_swa = 4;
            s.rope_partial = 0.25f;
            out.push_back({"gemma4_dense_f32", s});
        }
        out.push_back({"gemma4_moe_f32", gemma(4, 2, 16)});
        {
            // Every optional part (as the CPU's conformance case of that name).
            SynthSpec s = gemma(6, 3, 8);
            s.shared_kv_layers = 3;
            s.n_embd_per_layer = 8;
            s.layer_out_scale = true;
            s.values_are_keys = true;
            s.expert_scale = true;
            s.gate_up_fused = true;
            s.head_dim_swa = 32;
            s.n_head_kv_swa = 1;
            s.rope_partial = 0.5f;
            s.tied_output = true;
            out.push_back({"gemma4_every_option_f32", s});
        }
        {
            // A real file's head sizes: global layers of 512 (one KV head), sliding of 256; q8_0
            // attention and per-layer embeddings, q4_0 experts with their scales.
            SynthSpec s = gemma(4, 2, 8);
            s.head_dim = 512;
            s.n_head_kv = 1;
            s.head_dim_swa = 256;
            s.n_head_kv_swa = 2;
            s.rope_partial = 0.25f;
            s.n_embd_per_layer = 32;
            s.expert_scale = true;
            s.embd_type = s.attn_type = s.ffn_type = T::kQ8_0;
            s.exp_gate_type = s.exp_up_type = s.exp_down_type = T::kQ4_0;
            s.out_type = T::kQ8_0;
            out.push_back({"gemma4_hd512_q8_0_q4_0", s});
        }
        {
            // The seeds' file types: Q4_0 (QAT), MXFP4 and NVFP4 experts, a type per layer, with
            // per-expert scales; values that are the keys on the global layers.
            SynthSpec s = gemma(6, 2, 16);
            s.values_are_keys = true;
            s.expert_scale = true;
            s.embd_type = s.attn_type = s.ffn_type = T::kQ4_0;
            s.layer_exp_types = {T::kQ4_0, T::kMXFP4, T::kNVFP4};
            s.out_type = T::kQ8_0;
            out.push_back({"gemma4_q4_0_mxfp4_nvfp4", s});
        }
        return out;
    }();
    return list;
}

std::vector<Gemma4Case> moe_cases() {
    std::vector<Gemma4Case> out;
    for (const Gemma4Case& c : cases())
        if (c.spec.n_expert > 0) out.push_back(c);
    return out;
}

std::unique_ptr<Model> load_case(const Gemma4Case& c, testing::TempDir& dir) {
    return Model::load(testing::write_model(c.spec, dir.file(c.name + ".gguf")));
}

class GpuGemma4Model : public ::testing::TestWithParam<Gemma4Case> {};

TEST_P(GpuGemma4Model, TeacherForcedLogitsMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Gemma4Case& c = GetParam();
    auto model = load_case(c, dir);
    ASSERT_TRUE(model->config().has_sliding_layers());
    const std::vector<int32_t> tokens = testing::random_tokens(70, model->config().n_vocab, 5);
    const std::vector<float> cpu = all_logits(*model, tokens, Device::kCpu);
    for (const int batch : {70, 16, 4}) {
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

// Token by token (matrix-vector products and the decode attention, replayed as CUDA graphs)
// against the whole prompt at once (tiles), on the GPU, f32 and f16 caches; the argmax on the
// GPU gives the host's.
TEST_P(GpuGemma4Model, DecodeStepsMatchPrefill) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Gemma4Case& c = GetParam();
    auto model = load_case(c, dir);
    const int V = model->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(40, V, 6);
    for (const KvType kv : {KvType::kF32, KvType::kF16}) {
        const std::vector<float> prefill = all_logits(*model, tokens, Device::kCuda, kv, {}, 0);
        const std::vector<float> decode = testing::decode_logits(*model, tokens, kv, 64);
        const std::string what =
            c.name + " decode vs prefill" + (kv == KvType::kF16 ? ", f16" : ", f32");
        const LogitComparison cmp = compare_logits(prefill, decode, V);
        if (model->config().is_moe()) {
            expect_conformant_routed(cmp, what);
        } else {
            expect_conformant(cmp, what);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuGemma4Model, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Gemma4Case>& info) {
                             return info.param.name;
                         });

class GpuGemma4Strategies : public ::testing::TestWithParam<Gemma4Case> {};

// Prompts of 70 tokens in one batch stream the host layers' experts to the GPU (the resident
// experts' kernels on the same bytes: fused's logits bit for bit); in batches of 16 the CPU
// executor computes them (its own rounding); offload's slots (one layer's worth: every layer
// evicts) give fused's logits bit for bit; hybrid's misses go to the CPU executor. Every path
// carries the per-expert scales (and fused gate_up experts where the model has them).
TEST_P(GpuGemma4Strategies, PrefillLogitsMatchResidentExperts) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Gemma4Case& c = GetParam();
    auto model = load_case(c, dir);
    const int V = model->config().n_vocab, X = model->config().n_expert;
    const std::vector<int32_t> tokens = testing::random_tokens(70, V, 15);
    const std::vector<float> fused =
        all_logits(*model, tokens, Device::kCuda, KvType::kF32, strategy(MoeStrategy::kFused));
    const std::vector<float> fused8 =
        all_logits(*model, tokens, Device::kCuda, KvType::kF32, strategy(MoeStrategy::kFused), 8);
    for (const auto& [name, gpu] : {std::pair{"cpu", strategy(MoeStrategy::kCpu)},
                                    std::pair{"cpu layers 1", strategy(MoeStrategy::kAuto, 1)}}) {
        EXPECT_EQ(
            compare_logits(fused, all_logits(*model, tokens, Device::kCuda, KvType::kF32, gpu), V)
                .worst_abs,
            0.0)
            << c.name << " " << name << " streamed";
        expect_conformant_routed(
            compare_logits(fused, all_logits(*model, tokens, Device::kCuda, KvType::kF32, gpu, 16),
                           V),
            c.name + " " + name + " cpu executor vs fused");
    }
    for (const int slots : {0, X}) {
        const GpuOptions offload = strategy(MoeStrategy::kOffload, -1, slots);
        EXPECT_EQ(compare_logits(
                      fused, all_logits(*model, tokens, Device::kCuda, KvType::kF32, offload), V)
                      .worst_abs,
                  0.0)
            << c.name << " offload, " << slots << " slots, streamed";
        EXPECT_EQ(
            compare_logits(fused8,
                           all_logits(*model, tokens, Device::kCuda, KvType::kF32, offload, 8), V)
                .worst_abs,
            0.0)
            << c.name << " offload, " << slots << " slots, batches of 8";
    }
    for (const int slots : {0, 1}) {
        const GpuOptions hybrid = strategy(MoeStrategy::kHybrid, -1, slots);
        expect_conformant_routed(
            compare_logits(fused8,
                           all_logits(*model, tokens, Device::kCuda, KvType::kF32, hybrid, 8), V),
            c.name + " hybrid, " + std::to_string(slots) + " slots, batches of 8 vs fused");
        EXPECT_EQ(compare_logits(fused,
                                 all_logits(*model, tokens, Device::kCuda, KvType::kF32, hybrid), V)
                      .worst_abs,
                  0.0)
            << c.name << " hybrid, " << slots << " slots, streamed";
    }
}

// Greedy decoding (CUDA graphs with the CPU executor's host functions inside) under each
// strategy: fused's tokens, except where fused's own top two tie within the strategies'
// disagreement.
TEST_P(GpuGemma4Strategies, GreedyTokensMatchFused) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Gemma4Case& c = GetParam();
    auto model = load_case(c, dir);
    testing::expect_strategies_decode_as_fused(*model, c.name, 64, 58, 2, 80);
}

INSTANTIATE_TEST_SUITE_P(Models, GpuGemma4Strategies, ::testing::ValuesIn(moe_cases()),
                         [](const ::testing::TestParamInfo<Gemma4Case>& info) {
                             return info.param.name;
                         });

// The prefix cache's copies on the GPU over sliding rings, shared caches and heads of their own
// sizes: a sequence saved to host memory and loaded into another slot continues exactly as the
// original, the bytes are as many as the CPU's, and saving the loaded slot gives them back.
TEST(GpuGemma4SequenceCopy, ALoadedSequenceContinuesAsTheSavedOne) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    for (const char* name : {"gemma4_every_option_f32", "gemma4_hd512_q8_0_q4_0"}) {
        const auto it = std::find_if(cases().begin(), cases().end(),
                                     [&](const Gemma4Case& c) { return c.name == name; });
        ASSERT_NE(it, cases().end());
        auto model = load_case(*it, dir);
        for (const KvType kv : {KvType::kF32, KvType::kF16}) {
            testing::expect_sequence_copy_continues(
                *model, kv, 8, 50, it->name + (kv == KvType::kF16 ? ", f16" : ", f32"));
        }
    }
}

}  // namespace
}  // namespace tandem
