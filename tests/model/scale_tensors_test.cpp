// The loader rules for NVFP4 second-level `.scale` tensors (one check shared by every
// architecture): accepted only next to an NVFP4 weight of the same name, shaped {1} for a dense
// tensor and {n_expert} for stacked experts, never on a merged gate_up tensor; `.input_scale` is
// read and ignored; files without scale tensors load as before.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::TempDir;

std::vector<uint8_t> f32_bytes(std::vector<float> values) {
    std::vector<uint8_t> b(values.size() * 4);
    std::memcpy(b.data(), values.data(), b.size());
    return b;
}

// A tiny NVFP4 model (attention, experts, output all NVFP4) plus extra tensors.
std::string nvfp4_model(TempDir& dir, const std::string& name,
                        std::vector<std::pair<std::string, std::vector<float>>> extra) {
    SynthSpec s = testing::tiny_spec("qwen3moe");
    s.n_ff_exp = 64;
    s.attn_type = s.exp_gate_type = s.exp_up_type = s.exp_down_type = s.out_type = GgmlType::kNVFP4;
    const std::string base = testing::write_model(s, dir.file(name + ".base.gguf"));
    auto file = GgufFile::open(base);
    GgufWriter w = copy_gguf(*file);
    for (auto& [tensor, values] : extra) {
        const int64_t n = static_cast<int64_t>(values.size());
        w.add_tensor(tensor, GgmlType::kF32, {n}, f32_bytes(values));
    }
    const std::string path = dir.file(name + ".gguf");
    w.write(path);
    return path;
}

void expect_refused(const std::string& path, const std::string& fragment) {
    try {
        Model::load(path);
        ADD_FAILURE() << "accepted; expected: " << fragment;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
}

TEST(ScaleTensors, AcceptsScalesNextToNvfp4Weights) {
    TempDir dir;
    auto model = Model::load(nvfp4_model(dir, "ok", {{"blk.0.attn_q.scale", {0.25f}},
                                                     {"blk.0.attn_q.input_scale", {3.0f}},
                                                     {"blk.1.ffn_down_exps.scale", {1, 2, 3, 4}},
                                                     {"output.scale", {0.5f}}}));
    const ModelWeights& w = model->weights();
    EXPECT_EQ(w.layers[0].wq.scale, 0.25f);
    EXPECT_EQ(w.layers[0].wk.scale, 1.0f);
    EXPECT_EQ(w.output.scale, 0.5f);
    ASSERT_NE(w.layers[1].experts.down.scales, nullptr);
    EXPECT_EQ(w.layers[1].experts.down.expert(2).scale, 3.0f);
    EXPECT_EQ(w.layers[0].experts.down.scales, nullptr);
}

TEST(ScaleTensors, RefusesScaleWithoutWeight) {
    TempDir dir;
    expect_refused(nvfp4_model(dir, "orphan", {{"blk.0.attn_z.scale", {1.0f}}}),
                   "scale tensor 'blk.0.attn_z.scale' has no weight 'blk.0.attn_z.weight'");
    expect_refused(nvfp4_model(dir, "orphan2", {{"blk.0.attn_z.input_scale", {1.0f}}}),
                   "'blk.0.attn_z.input_scale' has no weight");
}

TEST(ScaleTensors, RefusesScaleNextToOtherTypes) {
    TempDir dir;
    // attn_norm is f32; the router is f32.
    expect_refused(nvfp4_model(dir, "norm", {{"blk.0.attn_norm.scale", {1.0f}}}),
                   "scale tensor 'blk.0.attn_norm.scale' sits next to a f32 weight");
    expect_refused(nvfp4_model(dir, "router", {{"blk.0.ffn_gate_inp.scale", {1.0f}}}), "sits next to a f32 weight");
}

TEST(ScaleTensors, RefusesWrongShapes) {
    TempDir dir;
    expect_refused(nvfp4_model(dir, "dense", {{"blk.0.attn_v.scale", {1.0f, 2.0f}}}),
                   "scale tensor 'blk.0.attn_v.scale' has shape [2], expected [1]");
    expect_refused(nvfp4_model(dir, "experts", {{"blk.0.ffn_up_exps.scale", {1.0f}}}),
                   "scale tensor 'blk.0.ffn_up_exps.scale' has shape [1], expected [4]");
}

TEST(ScaleTensors, RefusesScaleOnMergedGateUp) {
    TempDir dir;
    SynthSpec s = testing::tiny_spec("qwen3moe");
    s.n_ff_exp = 64;
    s.exp_gate_type = s.exp_up_type = s.exp_down_type = GgmlType::kNVFP4;
    auto base = GgufFile::open(testing::write_model(s, dir.file("base.gguf")));
    // Merge gate and up of layer 0 into ffn_gate_up_exps (gate rows, then up rows, per expert).
    GgufEdit edit;
    edit.keep_tensor = [](const GgufTensor& t) {
        return t.name != "blk.0.ffn_gate_exps.weight" && t.name != "blk.0.ffn_up_exps.weight";
    };
    GgufWriter w = copy_gguf(*base, edit);
    const GgufTensor* gate = base->find_tensor("blk.0.ffn_gate_exps.weight");
    const GgufTensor* up = base->find_tensor("blk.0.ffn_up_exps.weight");
    const size_t per_expert = gate->n_bytes / gate->ne[2];
    std::vector<uint8_t> merged;
    for (int64_t e = 0; e < gate->ne[2]; ++e) {
        merged.insert(merged.end(), gate->data + e * per_expert, gate->data + (e + 1) * per_expert);
        merged.insert(merged.end(), up->data + e * per_expert, up->data + (e + 1) * per_expert);
    }
    w.add_tensor("blk.0.ffn_gate_up_exps.weight", GgmlType::kNVFP4, {gate->ne[0], 2 * gate->ne[1], gate->ne[2]},
                 merged);
    w.write(dir.file("merged.gguf"));
    EXPECT_NO_THROW(Model::load(dir.file("merged.gguf")));  // merged without a scale is fine
    auto merged_file = GgufFile::open(dir.file("merged.gguf"));
    GgufWriter with_scale = copy_gguf(*merged_file);
    with_scale.add_tensor("blk.0.ffn_gate_up_exps.scale", GgmlType::kF32, {4}, f32_bytes({1, 1, 1, 1}));
    with_scale.write(dir.file("merged-scale.gguf"));
    expect_refused(dir.file("merged-scale.gguf"), "per-expert scale on a merged gate_up NVFP4 tensor");
}

TEST(ScaleTensors, FilesWithoutScalesAreUnaffected) {
    TempDir dir;
    for (GgmlType t : {GgmlType::kMXFP4, GgmlType::kBF16, GgmlType::kQ4_K}) {
        SynthSpec s = testing::tiny_spec("qwen3moe");
        s.n_embd = 256;
        s.n_ff_exp = 256;
        s.head_dim = 64;
        s.attn_type = s.exp_gate_type = s.exp_up_type = s.exp_down_type = t;
        auto model = Model::load(testing::write_model(s, dir.file("plain.gguf")));
        EXPECT_EQ(model->weights().layers[0].wq.scale, 1.0f);
        EXPECT_EQ(model->weights().layers[0].experts.gate.scales, nullptr);
    }
}

}  // namespace
}  // namespace tandem
