// A model split into parts gives the logits of the whole file: in Tandem for 1, 2, 3 and 7 parts
// (whichever part is given, and with a first part of metadata only), under --no-mmap and
// --mlock, and against llama.cpp loading the same parts (its llama_logits takes the first).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/session.h"
#include "gguf/gguf_copy.h"
#include "gguf/gguf_split.h"
#include "model/model.h"
#include "support/model_files.h"
#include "support/oracle.h"
#include "support/oracle_runs.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

ThreadPool& pool() {
    static ThreadPool p(2);
    return p;
}

std::vector<float> all_logits(const std::string& path, const std::vector<int32_t>& tokens,
                              const LoadOptions& load = {}) {
    auto model = Model::load(path, load);
    SessionOptions o;
    o.n_ctx = static_cast<int>(tokens.size());
    o.max_batch = static_cast<int>(tokens.size());
    o.kv_type = KvType::kF32;
    Session session(*model, pool(), o);
    std::span<const float> logits = session.feed_all(tokens);
    return {logits.begin(), logits.end()};
}

// Bit for bit: the same weights through the same code.
void expect_identical(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

SynthSpec split_spec(const std::string& arch) {
    SynthSpec s = testing::tiny_spec(arch);
    s.attn_type = GgmlType::kQ8_0;
    s.exp_gate_type = s.exp_up_type = GgmlType::kQ8_0;
    s.exp_down_type = GgmlType::kF16;
    return s;
}

TEST(SplitModel, SameLogitsForOneTwoThreeAndSevenParts) {
    for (const char* arch : {"qwen3moe", "llama"}) {
        SCOPED_TRACE(arch);
        testing::TempDir dir;
        const SynthSpec spec = split_spec(arch);
        const std::string whole = testing::write_model(spec, dir.file("whole.gguf"));
        const std::vector<int32_t> tokens = testing::random_tokens(12, spec.n_vocab, 4);
        const std::vector<float> ref = all_logits(whole, tokens);
        for (const GgufSplitLayout layout : {GgufSplitLayout{1}, GgufSplitLayout{2}, GgufSplitLayout{3},
                                             GgufSplitLayout{7}, GgufSplitLayout{4, true}}) {
            const std::string name = "m" + std::to_string(layout.n_parts) + (layout.metadata_only_first ? "e" : "");
            const std::vector<std::string> parts = write_synthetic_model(spec, dir.file(name + ".gguf"), layout);
            ASSERT_EQ(parts.size(), static_cast<size_t>(layout.n_parts));
            ASSERT_EQ(Model::load(parts[0])->file().parts().size(), parts.size());
            // The first part, as llama.cpp wants it, and the last, as it would refuse.
            expect_identical(ref, all_logits(parts.front(), tokens), name + " given its first part");
            expect_identical(ref, all_logits(parts.back(), tokens), name + " given its last part");
        }
    }
}

TEST(SplitModel, NoMmapAndMlockGiveTheSameLogits) {
    testing::TempDir dir;
    const SynthSpec spec = split_spec("qwen3moe");
    const std::string whole = testing::write_model(spec, dir.file("whole.gguf"));
    const std::vector<std::string> parts = write_synthetic_model(spec, dir.file("m.gguf"), {3});
    const std::vector<int32_t> tokens = testing::random_tokens(10, spec.n_vocab, 9);
    const std::vector<float> ref = all_logits(whole, tokens);
    for (const std::string& path : {whole, parts[1]}) {
        for (bool mmap : {true, false}) {
            for (bool mlock : {false, true}) {
                LoadOptions o;
                o.mmap = mmap;
                o.mlock = mlock;
                expect_identical(ref, all_logits(path, tokens, o),
                                 path + (mmap ? " mmap" : " no-mmap") + (mlock ? " mlock" : ""));
            }
        }
    }
}

// llama.cpp loads the parts Tandem writes (given the first), and both engines agree on them as
// on the whole file.
struct SplitCase {
    std::string name;
    std::string args;  // make_gguf.py
    bool exact;        // f32 weights: max |Δ| ≤ 1e-4
};

class SplitConformance : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitConformance, LlamaCppOnTheFirstPart) {
    TANDEM_REQUIRE_ORACLE();
    const SplitCase& c = GetParam();
    const std::string path = testing::oracle_model(c.args);
    const int n_vocab = Model::load(path)->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(24, n_vocab, 21);
    const std::vector<float> llama_whole = testing::llama_all_logits(path, tokens);
    const std::vector<float> ours_whole = all_logits(path, tokens);
    auto source = GgufFile::open(path);
    const GgufWriter writer = copy_gguf(*source);
    for (int n : {2, 3, 7}) {
        SCOPED_TRACE(n);
        testing::TempDir dir;
        const std::vector<std::string> parts = write_gguf_parts(writer, dir.file("m.gguf"), {n});
        const std::vector<float> llama_split = testing::llama_all_logits(parts.front(), tokens);
        const std::vector<float> ours_split = all_logits(parts.back(), tokens);
        expect_identical(ours_whole, ours_split, "tandem, split vs whole");
        const testing::LogitComparison self = testing::compare_logits(llama_whole, llama_split, n_vocab);
        EXPECT_EQ(self.worst_abs, 0.0) << "llama.cpp, split vs whole";
        const testing::LogitComparison cmp = testing::compare_logits(llama_split, ours_split, n_vocab);
        std::printf("[ %s, %d parts ] %d rows: max|d| %.3e, KL %.3e, argmax flips %d\n", c.name.c_str(), n,
                    cmp.rows, cmp.worst_abs, cmp.worst_kl, cmp.argmax_flips);
        ASSERT_EQ(cmp.rows, static_cast<int>(tokens.size()));
        if (c.exact) {
            EXPECT_LE(cmp.worst_abs, 1e-4);
        } else {
            EXPECT_LE(cmp.worst_kl, 1e-2);
            EXPECT_EQ(cmp.flips_beyond_noise, 0);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SplitConformance,
    ::testing::Values(SplitCase{"qwen3moe_f32", "--arch qwen3moe --n-embd 128 --n-head 4 --n-head-kv 2 --head-dim 32 --n-ff-exp 64", true},
                      SplitCase{"qwen3moe_q4_K_q8_0", "--arch qwen3moe --wtype q8_0 --exp-type q4_K --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 64 --n-ff-exp 256", false},
                      SplitCase{"llama_q8_0", "--arch llama --wtype q8_0 --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 64 --n-ff 512", false}),
    [](const ::testing::TestParamInfo<SplitCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tandem
