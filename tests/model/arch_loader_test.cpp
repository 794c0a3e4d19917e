// gemma4 and gpt-oss: their configs as llama.cpp reads them (per-layer heads and head sizes,
// windows, rope, shared KV caches), every key of their namespace and every tensor read or refused
// by name, and KV caches of sliding layers that hold only their window.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/thread_pool.h"
#include "gguf/gguf_copy.h"
#include "gguf/gguf_reader.h"
#include "model/cpu_backend.h"
#include "model/model.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::edit_model;
using testing::TempDir;
using testing::tiny_spec;
using testing::write_model;

std::string load_error(const std::string& path) {
    try {
        Model::load(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

SynthSpec gemma_spec() {
    SynthSpec s = tiny_spec("gemma4");
    s.n_layer = 6;
    s.swa_period = 3;  // layers 2 and 5 full
    s.head_dim_swa = 8;
    s.n_head_kv_swa = 4;
    s.sliding_window = 8;
    s.rope_partial = 0.5f;
    s.shared_kv_layers = 3;
    s.n_embd_per_layer = 4;
    s.layer_out_scale = true;
    s.expert_scale = true;
    return s;
}

TEST(ArchLoader, Gemma4Config) {
    TempDir dir;
    auto model = Model::load(write_model(gemma_spec(), dir.file("g.gguf")));
    const ModelConfig& c = model->config();
    ASSERT_EQ(c.layers.size(), 6u);
    for (int il = 0; il < 6; ++il) {
        const LayerConfig& L = c.layers[il];
        const bool full = il % 3 == 2;
        EXPECT_EQ(L.attention, full ? AttentionKind::kFull : AttentionKind::kSliding) << il;
        EXPECT_EQ(L.window, full ? 0 : 8) << il;
        EXPECT_EQ(L.head_dim_k, full ? 16 : 8) << il;
        EXPECT_EQ(L.n_head_kv, full ? 2 : 4) << il;
        EXPECT_EQ(L.rope.freq_base, full ? 1000000.0f : 10000.0f) << il;
        EXPECT_EQ(L.rope.n_dims, full ? 16 : 8) << il;
        EXPECT_EQ(L.rope.freq_factors != nullptr, full) << il;  // proportional rope on full layers only
        EXPECT_EQ(L.attn_scale, 1.0f);
        EXPECT_TRUE(L.moe && L.dense_ffn);
    }
    // Layers 3..5 read the caches of layer 1 (the last sliding one before them) and 2 (full).
    EXPECT_EQ(c.layers[3].kv_layer, 1);
    EXPECT_EQ(c.layers[4].kv_layer, 1);
    EXPECT_EQ(c.layers[5].kv_layer, 2);
    EXPECT_EQ(c.layers[2].kv_layer, 2);
    EXPECT_EQ(c.norm_placement, NormPlacement::kSandwich);
    EXPECT_EQ(c.final_logit_softcap, 30.0f);
    EXPECT_FLOAT_EQ(c.embed_scale, 8.0f);  // √64
    EXPECT_EQ(c.n_embd_per_layer, 4);
    EXPECT_EQ(c.expert_activation, GluKind::kGelu);
    EXPECT_EQ(c.router_input, RouterInput::kScaledRmsNorm);
    const ModelWeights& w = model->weights();
    EXPECT_TRUE(w.layers[3].wk.empty());           // shared layers compute queries only
    EXPECT_FALSE(w.layers[0].out_scale.empty());
    EXPECT_NE(w.layers[0].experts.down.scales, nullptr);  // per-expert scale on f32 experts
    EXPECT_FALSE(w.layers[0].router_scale.empty());
    EXPECT_NE(describe(c).find("4 sliding-window layers (window 8)"), std::string::npos) << describe(c);
}

TEST(ArchLoader, GptOssConfig) {
    TempDir dir;
    SynthSpec s = tiny_spec("gpt-oss");
    s.n_layer = 4;
    s.yarn_factor = 32;
    s.yarn_orig_ctx = 64;
    auto model = Model::load(write_model(s, dir.file("o.gguf")));
    const ModelConfig& c = model->config();
    for (int il = 0; il < 4; ++il) {
        EXPECT_EQ(c.layers[il].attention, il % 2 == 0 ? AttentionKind::kSliding : AttentionKind::kFull);
        EXPECT_FLOAT_EQ(c.layers[il].attn_scale, 0.25f);  // 1 / √16
        EXPECT_FLOAT_EQ(c.layers[il].rope.freq_scale, 1.0f / 32);
        EXPECT_EQ(c.layers[il].rope.ext_factor, 1.0f);
        EXPECT_EQ(c.layers[il].rope.n_ctx_orig, 64);
    }
    EXPECT_TRUE(c.attn_sinks);
    EXPECT_EQ(c.gating, ExpertGating::kSoftmaxSelected);
    EXPECT_EQ(c.expert_activation, GluKind::kSwigluOai);
    EXPECT_FALSE(model->weights().layers[0].attn_sinks.empty());
    EXPECT_FALSE(model->weights().layers[0].router_bias.empty());
    EXPECT_NE(model->weights().layers[0].experts.down.bias, nullptr);
}

TEST(ArchLoader, UnknownKeysOfTheNamespaceAreRefused) {
    TempDir dir;
    for (const char* arch : {"gemma4", "gpt-oss"}) {
        SynthSpec s = arch == std::string("gemma4") ? gemma_spec() : tiny_spec(arch);
        const std::string good = write_model(s, dir.file("good.gguf"));
        GgufEdit edit;
        const std::string key = std::string(arch) + ".attention.logit_softcapping_magic";
        edit.add_keys = [key](GgufWriter& w) { w.set<float>(key, 50.0f); };
        edit_model(good, dir.file("bad.gguf"), edit);
        const std::string msg = load_error(dir.file("bad.gguf"));
        EXPECT_NE(msg.find("metadata key '" + key + "' is not supported"), std::string::npos) << msg;
        // Keys of other namespaces (general.*, tokenizer.*) are not the architecture's business.
        GgufEdit other;
        other.add_keys = [](GgufWriter& w) { w.set_string("general.license", "apache-2.0"); };
        edit_model(good, dir.file("ok.gguf"), other);
        EXPECT_EQ(load_error(dir.file("ok.gguf")), "");
    }
}

TEST(ArchLoader, UnknownTensorsAreRefused) {
    TempDir dir;
    const std::string good = write_model(gemma_spec(), dir.file("good.gguf"));
    auto file = GgufFile::open(good);
    GgufWriter w = copy_gguf(*file);
    w.add_tensor("blk.0.attn_gate.weight", GgmlType::kF32, {64, 64},
                 [](uint8_t* dst, size_t n) { std::memset(dst, 0, n); });
    w.write(dir.file("bad.gguf"));
    const std::string msg = load_error(dir.file("bad.gguf"));
    EXPECT_NE(msg.find("tensor 'blk.0.attn_gate.weight' is not part of a gemma4 model"), std::string::npos) << msg;
}

TEST(ArchLoader, RequiredPartsAreRequired) {
    TempDir dir;
    struct Case {
        const char* arch;
        const char* tensor;
        const char* fragment;
    };
    for (const Case& c : {Case{"gpt-oss", "blk.1.attn_q.bias", "missing tensor 'blk.1.attn_q.bias'"},
                          Case{"gpt-oss", "blk.0.attn_sinks.weight", "missing tensor 'blk.0.attn_sinks.weight'"},
                          Case{"gpt-oss", "blk.0.ffn_down_exps.bias", "needs the biases of every expert"},
                          Case{"gemma4", "blk.1.post_ffw_norm.weight", "missing tensor 'blk.1.post_ffw_norm.weight'"},
                          Case{"gemma4", "blk.0.ffn_gate_inp.scale", "missing tensor 'blk.0.ffn_gate_inp.scale'"},
                          Case{"gemma4", "blk.1.attn_k.weight", "missing tensor 'blk.1.attn_k.weight'"}}) {
        SynthSpec s = c.arch == std::string("gemma4") ? gemma_spec() : tiny_spec(c.arch);
        const std::string good = write_model(s, dir.file("good.gguf"));
        GgufEdit edit;
        const std::string name = c.tensor;
        edit.keep_tensor = [name](const GgufTensor& t) { return t.name != name; };
        edit_model(good, dir.file("bad.gguf"), edit);
        const std::string msg = load_error(dir.file("bad.gguf"));
        EXPECT_NE(msg.find(c.fragment), std::string::npos) << c.tensor << ": " << msg;
    }
    // Gemma-4's sliding pattern and window are required keys.
    const std::string good = write_model(gemma_spec(), dir.file("good.gguf"));
    for (const char* key : {"gemma4.attention.sliding_window_pattern", "gemma4.attention.sliding_window",
                            "gemma4.embedding_length_per_layer_input", "gemma4.attention.key_length_swa"}) {
        GgufEdit edit;
        const std::string k = key;
        edit.keep_key = [k](std::string_view x) { return x != k; };
        edit_model(good, dir.file("bad.gguf"), edit);
        EXPECT_NE(load_error(dir.file("bad.gguf")).find("missing metadata key '" + k + "'"), std::string::npos) << k;
    }
}

TEST(ArchLoader, SlidingLayersKeepOnlyTheirWindow) {
    TempDir dir;
    auto model = Model::load(write_model(gemma_spec(), dir.file("g.gguf")));
    ThreadPool pool(1);
    CpuBackendOptions o;
    o.n_ctx = 4096;
    o.max_batch = 16;
    o.n_seq = 2;
    o.kv_type = KvType::kF32;
    CpuBackend backend(*model, pool, o);
    for (int il = 0; il < 6; ++il) {
        const KvShape& s = backend.kv_cache(il).shape();
        const bool full = model->config().layers[il].attention == AttentionKind::kFull;
        // A sliding layer's ring: its window plus the positions of one batch before it.
        EXPECT_EQ(s.n_ctx, full ? 4096 : 8 + 16 - 1) << il;
    }
    // Layers 0..2 own caches, the last three share them: one full cache of 4096 positions and two
    // rings of 23, with keys and values of 2 KV heads × 16 floats (full) and 4 × 8 (sliding).
    const size_t full = size_t{4096} * o.n_seq * 2 * (16 + 16) * 4, ring = size_t{23} * o.n_seq * 4 * (8 + 8) * 4;
    EXPECT_EQ(backend.kv_bytes(), full + 2 * ring);
    EXPECT_EQ(max_rewind(model->config(), o.n_ctx, o.max_batch), 16);
}

SynthSpec deepseek_spec() {
    SynthSpec s = tiny_spec("deepseek2");
    s.n_layer = 3;
    s.n_head = 4;
    s.n_head_kv = 1;
    s.head_dim = 16;
    s.qk_nope = 32;
    s.kv_lora_rank = 64;
    s.v_head_mla = 32;
    s.q_lora_rank = 48;
    s.n_expert = 8;
    s.n_expert_shared = 2;
    s.n_expert_groups = 4;
    s.n_group_used = 2;
    return s;
}

TEST(ArchLoader, Deepseek2Config) {
    TempDir dir;
    auto model = Model::load(write_model(deepseek_spec(), dir.file("d.gguf")));
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.mla.kv_lora_rank, 64);
    EXPECT_EQ(c.mla.q_lora_rank, 48);
    EXPECT_EQ(c.mla.qk_nope, 32);
    EXPECT_EQ(c.mla.qk_rope, 16);
    EXPECT_EQ(c.mla.v_head, 32);
    EXPECT_EQ(c.gating, ExpertGating::kSigmoid);
    EXPECT_EQ(c.n_expert_groups, 4);
    EXPECT_EQ(c.n_group_used, 2);
    EXPECT_TRUE(c.expert_weights_norm);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
    EXPECT_EQ(c.rope.type, RopeType::kNormal);
    for (int il = 0; il < 3; ++il) {
        const LayerConfig& L = c.layers[il];
        EXPECT_EQ(L.n_head_kv, 1);
        EXPECT_EQ(L.head_dim_k, 64 + 16);  // the latent and the rotated key
        EXPECT_EQ(L.head_dim_v, 64);       // the latent
        EXPECT_TRUE(L.values_in_keys);
        EXPECT_FLOAT_EQ(L.attn_scale, 1.0f / std::sqrt(48.0f));
        EXPECT_EQ(L.moe, il >= 1);         // one leading dense layer
        EXPECT_EQ(L.n_ff_shexp, il >= 1 ? 2 * 32 : 0);
    }
    EXPECT_FALSE(model->weights().layers[1].expert_bias.empty());
    EXPECT_NE(model->weights().layers[0].wk_b.matrix.data, nullptr);
}

// The latent cache holds the latent and the rotated key of each position, no values: as
// llama.cpp's K-only MLA cache.
TEST(ArchLoader, Deepseek2CachesTheLatentOnly) {
    TempDir dir;
    auto model = Model::load(write_model(deepseek_spec(), dir.file("d.gguf")));
    ThreadPool pool(1);
    CpuBackendOptions o;
    o.n_ctx = 1024;
    o.kv_type = KvType::kF16;
    CpuBackend backend(*model, pool, o);
    EXPECT_EQ(backend.kv_bytes(), size_t{3} * 1024 * (64 + 16) * 2);
}

TEST(ArchLoader, Deepseek2RefusesWhatItCannotRun) {
    TempDir dir;
    const std::string good = write_model(deepseek_spec(), dir.file("good.gguf"));
    // Files without the MLA key lengths carry the unsplit attn_kv_b of old conversions.
    GgufEdit legacy;
    legacy.keep_key = [](std::string_view k) { return k != "deepseek2.attention.key_length_mla"; };
    edit_model(good, dir.file("legacy.gguf"), legacy);
    EXPECT_NE(load_error(dir.file("legacy.gguf")).find("unsplit attn_kv_b"), std::string::npos);
    GgufEdit gating;
    gating.keep_key = [](std::string_view k) { return k != "deepseek2.expert_gating_func"; };
    gating.add_keys = [](GgufWriter& w) { w.set<uint32_t>("deepseek2.expert_gating_func", 3); };
    edit_model(good, dir.file("gating.gguf"), gating);
    EXPECT_NE(load_error(dir.file("gating.gguf")).find("expert_gating_func = 3 is not supported"), std::string::npos);
}

TEST(ArchLoader, Qwen35Config) {
    TempDir dir;
    SynthSpec s = tiny_spec("qwen35moe");
    s.n_layer = 8;
    s.ssm_state = 16;
    s.ssm_k_heads = 2;
    s.ssm_v_heads = 4;
    auto model = Model::load(write_model(s, dir.file("q.gguf")));
    const ModelConfig& c = model->config();
    for (int il = 0; il < 8; ++il) {
        EXPECT_EQ(c.layers[il].attention, il % 4 == 3 ? AttentionKind::kFull : AttentionKind::kRecurrent) << il;
    }
    EXPECT_EQ(c.delta.conv_width(), 2 * 32 + 64);
    EXPECT_TRUE(c.layers[3].rope.imrope);
    EXPECT_EQ(c.layers[3].rope.n_dims, 4);  // head_dim / 4
    EXPECT_TRUE(c.attn_output_gate);
    EXPECT_TRUE(c.shared_expert_gate);
    EXPECT_EQ(c.layers[0].n_ff_shexp, 64);
    EXPECT_EQ(max_rewind(c, 4096, 512), 0);  // a recurrent state cannot be rewound
    ThreadPool pool(1);
    CpuBackendOptions o;
    o.n_ctx = 256;
    CpuBackend backend(*model, pool, o);
    EXPECT_EQ(backend.kv_bytes(), size_t{2} * 256 * 2 * (16 + 16) * 2);  // two full layers only
}

// nextn draft layers (block_count counts them) are known and not run.
TEST(ArchLoader, NextnLayersAreSkipped) {
    TempDir dir;
    SynthSpec s = deepseek_spec();
    const std::string three = write_model(s, dir.file("three.gguf"));
    GgufEdit edit;
    edit.add_keys = [](GgufWriter& w) { w.set<uint32_t>("deepseek2.nextn_predict_layers", 1); };
    edit_model(three, dir.file("nextn.gguf"), edit);
    auto model = Model::load(dir.file("nextn.gguf"));
    EXPECT_EQ(model->config().n_layer, 2);
    EXPECT_EQ(model->config().n_layer_nextn, 1);
}

}  // namespace
}  // namespace tandem
