// The property continuous batching rests on: a token's logits do not depend on what else is in
// the batch. Eight sequences evaluated together (prompt chunks and decode rows mixed, as the
// scheduler builds them) against each alone, one token at a time, for several weight formats:
// bit for bit.
//
// It rests on the kernels' batch invariance (a column's result does not depend on its tile,
// src/kernels/README.md) and on the decoder keeping each sequence's attention to itself. The
// test runs on the kernels this machine picks, and BatchRowsBaseline runs it again on the
// baseline kernels in a child process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "model/cpu_backend.h"
#include "model/decoder.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

ThreadPool& pool() {
    static ThreadPool p(2);
    return p;
}

struct FormatCase {
    const char* name;
    int n_embd;
    GgmlType attn, experts, output;
};

std::ostream& operator<<(std::ostream& os, const FormatCase& c) {
    return os << c.name;
}

class BatchRows : public ::testing::TestWithParam<FormatCase> {};

TEST_P(BatchRows, LogitsIndependentOfTheBatch) {
    const FormatCase& f = GetParam();
    testing::TempDir dir;
    SynthSpec s;
    s.arch = "qwen3moe";
    s.n_layer = 2;
    s.n_embd = f.n_embd;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 32;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = f.n_embd;
    s.n_vocab = 300;
    s.attn_type = f.attn;
    s.exp_gate_type = s.exp_up_type = s.exp_down_type = f.experts;
    s.out_type = f.output;
    s.seed = 5;
    write_synthetic_model(s, dir.file("m.gguf"));
    auto model = Model::load(dir.file("m.gguf"));
    const int V = model->config().n_vocab;
    constexpr int kSeqs = 8, kCtx = 64;

    std::mt19937 rng(1);
    std::vector<std::vector<int32_t>> seqs(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
        seqs[i].resize(3 + 2 * i);
        for (int32_t& t : seqs[i]) t = static_cast<int32_t>(rng() % V);
    }

    // Alone: every sequence token by token (the one-row paths), logits of every position.
    std::vector<std::vector<float>> alone(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
        CpuBackend backend(*model, pool(), {64, 1, kCtx, KvType::kF16});
        Decoder decoder(*model, backend, 64);
        alone[i].resize(seqs[i].size() * V);
        for (size_t p = 0; p < seqs[i].size(); ++p) {
            const TokenPlace place{0, static_cast<int>(p)};
            const uint8_t want = 1;
            decoder.eval({&seqs[i][p], 1}, {&place, 1}, {&want, 1}, alone[i].data() + p * V);
        }
    }

    // Together: the first half of every sequence as one batch, then the rest one token per
    // sequence per step, all sequences in each batch.
    CpuBackend backend(*model, pool(), {64, kSeqs, kCtx, KvType::kF16});
    Decoder decoder(*model, backend, 64);
    std::vector<std::vector<float>> together(kSeqs);
    for (int i = 0; i < kSeqs; ++i) together[i].resize(seqs[i].size() * V);
    std::vector<size_t> done(kSeqs, 0);
    for (bool first = true;; first = false) {
        std::vector<int32_t> tokens;
        std::vector<TokenPlace> places;
        std::vector<uint8_t> want;
        std::vector<std::pair<int, size_t>> rows;  // (sequence, position) of each logits row
        for (int i = 0; i < kSeqs; ++i) {
            const size_t n =
                first ? seqs[i].size() / 2 : std::min<size_t>(1, seqs[i].size() - done[i]);
            for (size_t k = 0; k < n; ++k) {
                tokens.push_back(seqs[i][done[i] + k]);
                places.push_back({i, static_cast<int>(done[i] + k)});
                want.push_back(1);
                rows.emplace_back(i, done[i] + k);
            }
            done[i] += n;
        }
        if (tokens.empty()) break;
        std::vector<float> logits(rows.size() * V);
        ASSERT_EQ(decoder.eval(tokens, places, want, logits.data()), static_cast<int>(rows.size()));
        for (size_t r = 0; r < rows.size(); ++r) {
            std::memcpy(together[rows[r].first].data() + rows[r].second * V, logits.data() + r * V,
                        sizeof(float) * V);
        }
    }
    size_t total_rows = 0;
    int rows_differing = 0;
    float worst = 0.0f;
    for (int i = 0; i < kSeqs; ++i) {
        for (size_t p = 0; p < seqs[i].size(); ++p) {
            ++total_rows;
            const float* x = alone[i].data() + p * V;
            const float* y = together[i].data() + p * V;
            if (std::memcmp(x, y, sizeof(float) * V) != 0) ++rows_differing;
            for (int v = 0; v < V; ++v) worst = std::max(worst, std::fabs(x[v] - y[v]));
        }
    }
    const std::string variant(chosen_kernel_variant().name);
    std::printf(
        "[ %s ] kernels %s: %d of %zu logit rows differ between batched and solo, max |d| %.3g\n",
        f.name, variant.c_str(), rows_differing, total_rows, worst);
    EXPECT_EQ(rows_differing, 0) << "batched logits differ from the solo run (max |d| " << worst
                                 << ")";
}

// The test above in a child process on the baseline kernels, which this machine may not pick.
TEST(BatchRowsBaseline, BitForBitWithBaselineKernels) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string out;
    const int status =
        testing::run_command("TANDEM_CPU_VARIANT=baseline " + testing::shell_quote(self) +
                                 " --gtest_filter='Formats/BatchRows.*'",
                             &out);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.find("SKIPPED ]"), std::string::npos) << out;
    EXPECT_NE(out.find("PASSED  ] 6 tests"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, BatchRows,
    ::testing::Values(FormatCase{"f32", 128, GgmlType::kF32, GgmlType::kF32, GgmlType::kF32},
                      FormatCase{"f16", 128, GgmlType::kF16, GgmlType::kF16, GgmlType::kF16},
                      FormatCase{"q8_0", 128, GgmlType::kQ8_0, GgmlType::kQ8_0, GgmlType::kQ8_0},
                      FormatCase{"q4_0", 128, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_0},
                      FormatCase{"q4_k", 256, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K},
                      FormatCase{"q5_k", 256, GgmlType::kQ8_0, GgmlType::kQ5_K, GgmlType::kQ4_K}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tandem
