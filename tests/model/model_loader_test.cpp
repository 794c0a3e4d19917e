// Loading checks every key and tensor: a missing tensor, a wrong shape, a missing key, an
// unknown architecture or an out-of-range value is one clear Error naming it.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::edit_model;
using testing::TempDir;
using testing::tiny_spec;
using testing::write_model;

void expect_load_error(const std::string& path, const std::string& fragment) {
    try {
        Model::load(path);
        ADD_FAILURE() << "loaded a broken model; expected: " << fragment;
    } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

TEST(ModelLoader, LoadsEveryArchitecture) {
    TempDir dir;
    for (const char* arch : {"qwen3moe", "qwen3", "llama"}) {
        auto model = Model::load(write_model(tiny_spec(arch), dir.file(std::string(arch) + ".gguf")));
        const ModelConfig& c = model->config();
        EXPECT_EQ(c.arch, arch);
        EXPECT_EQ(c.n_layer, 2);
        EXPECT_EQ(c.n_embd, 64);
        EXPECT_EQ(c.head_dim_k, 16);
        EXPECT_EQ(c.n_vocab, 300);
        EXPECT_EQ(c.is_moe(), std::string(arch) == "qwen3moe");
        EXPECT_EQ(c.qk_norm, std::string(arch) != "llama");
        EXPECT_EQ(c.rope.type, std::string(arch) == "llama" ? RopeType::kNormal : RopeType::kNeox);
        EXPECT_EQ(model->weights().layers.size(), 2u);
    }
}

TEST(ModelLoader, TiedOutputUsesTheEmbedding) {
    TempDir dir;
    SynthSpec s = tiny_spec("llama");
    s.tied_output = true;
    auto model = Model::load(write_model(s, dir.file("tied.gguf")));
    EXPECT_EQ(model->weights().output.data, model->weights().token_embd.data);
}

TEST(ModelLoader, MissingTensor) {
    TempDir dir;
    std::string good = write_model(tiny_spec(), dir.file("good.gguf"));
    GgufEdit edit;
    edit.keep_tensor = [](const GgufTensor& t) { return t.name != "blk.1.attn_k.weight"; };
    edit_model(good, dir.file("bad.gguf"), edit);
    expect_load_error(dir.file("bad.gguf"), "missing tensor 'blk.1.attn_k.weight'");
}

TEST(ModelLoader, WrongShape) {
    TempDir dir;
    std::string good = write_model(tiny_spec(), dir.file("good.gguf"));
    // Replace ffn_norm [64] by a [32] tensor.
    GgufEdit edit;
    edit.keep_tensor = [](const GgufTensor& t) { return t.name != "blk.0.ffn_norm.weight"; };
    auto file = GgufFile::open(good);
    GgufWriter w = copy_gguf(*file, edit);
    w.add_tensor("blk.0.ffn_norm.weight", GgmlType::kF32, {32}, std::vector<uint8_t>(128, 0));
    w.write(dir.file("bad.gguf"));
    expect_load_error(dir.file("bad.gguf"), "tensor 'blk.0.ffn_norm.weight' has shape [32], expected [64]");
}

TEST(ModelLoader, MissingKey) {
    TempDir dir;
    std::string good = write_model(tiny_spec(), dir.file("good.gguf"));
    GgufEdit edit;
    edit.keep_key = [](std::string_view key) { return key != "qwen3moe.block_count"; };
    edit_model(good, dir.file("bad.gguf"), edit);
    expect_load_error(dir.file("bad.gguf"), "missing metadata key 'qwen3moe.block_count'");
}

TEST(ModelLoader, UnknownArchitecture) {
    TempDir dir;
    std::string good = write_model(tiny_spec(), dir.file("good.gguf"));
    GgufEdit edit;
    edit.keep_key = [](std::string_view key) { return key != "general.architecture"; };
    edit.add_keys = [](GgufWriter& w) { w.set_string("general.architecture", "mamba9"); };
    edit_model(good, dir.file("bad.gguf"), edit);
    expect_load_error(dir.file("bad.gguf"), "unknown architecture 'mamba9'");
}

TEST(ModelLoader, OutOfRangeValues) {
    TempDir dir;
    std::string good = write_model(tiny_spec(), dir.file("good.gguf"));
    struct Case {
        const char* key;
        uint32_t value;
        const char* fragment;
    };
    for (const Case& c : {Case{"qwen3moe.expert_used_count", 9, "expert_used_count = 9 must be in 1..4"},
                          Case{"qwen3moe.attention.head_count_kv", 3, "is not a multiple of"},
                          Case{"qwen3moe.block_count", 0, "outside the valid range"}}) {
        GgufEdit edit;
        std::string key = c.key;
        uint32_t value = c.value;
        edit.keep_key = [key](std::string_view k) { return k != key; };
        edit.add_keys = [key, value](GgufWriter& w) { w.set<uint32_t>(key, value); };
        edit_model(good, dir.file("bad.gguf"), edit);
        expect_load_error(dir.file("bad.gguf"), c.fragment);
    }
}

TEST(ModelLoader, WrongKeyType) {
    TempDir dir;
    std::string good = write_model(tiny_spec(), dir.file("good.gguf"));
    GgufEdit edit;
    edit.keep_key = [](std::string_view k) { return k != "qwen3moe.attention.layer_norm_rms_epsilon"; };
    edit.add_keys = [](GgufWriter& w) { w.set_string("qwen3moe.attention.layer_norm_rms_epsilon", "tiny"); };
    edit_model(good, dir.file("bad.gguf"), edit);
    expect_load_error(dir.file("bad.gguf"), "has type string, expected f32 or f64");
}

TEST(ModelLoader, UnreadableFile) {
    expect_load_error("/nonexistent/dir/model.gguf", "cannot open");
}

}  // namespace
}  // namespace tandem
