// Perplexity's arithmetic on a case worked by hand, its windows, and, against llama.cpp, the
// figure `tandem perplexity` prints next to the one computed from llama.cpp's logits of the same
// windows.
#include "engine/perplexity.h"

#include "engine/kl_base_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>

#include "base/error.h"
#include "support/model_files.h"
#include "support/oracle.h"
#include "support/oracle_runs.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

TEST(Perplexity, ArithmeticByHand) {
    // Two-token vocabulary. Row 0, logits (0, ln 3), predicts token 1: p = 3/4. Row 1, (0, 0),
    // predicts token 0: p = 1/2. Row 2 predicts nothing (the window ends).
    const std::vector<float> logits = {0.0f, std::log(3.0f), 0.0f, 0.0f, 5.0f, -5.0f};
    const std::vector<int32_t> tokens = {1, 1, 0};
    const std::vector<double> nll = window_nll(logits, 2, tokens, 1);
    ASSERT_EQ(nll.size(), 2u);
    EXPECT_NEAR(nll[0], std::log(4.0 / 3.0), 1e-7);
    EXPECT_NEAR(nll[1], std::log(2.0), 1e-7);
    EXPECT_EQ(window_nll(logits, 2, tokens, 2).size(), 1u);  // only token 2 scored
    const PerplexityEstimate e = estimate_perplexity(nll);
    EXPECT_EQ(e.n, 2);
    EXPECT_NEAR(e.ppl, std::sqrt(8.0 / 3.0), 1e-7);  // exp of the mean of ln 4/3 and ln 2
    // sd = |ln 2 - ln 4/3| / sqrt 2, over sqrt 2 tokens: ppl · ln(3/2) / 2.
    EXPECT_NEAR(e.error, std::sqrt(8.0 / 3.0) * std::log(1.5) / 2.0, 1e-7);
    EXPECT_EQ(estimate_perplexity({}).n, 0);
}

TEST(Perplexity, WindowsAndTheirErrors) {
    PerplexityWindows w = plan_windows(1000, 128, 128);
    EXPECT_EQ(w.first_target, 65);  // llama-perplexity: targets 65..127 of each window
    EXPECT_EQ(w.count, 7);
    w = plan_windows(1000, 128, 32);
    EXPECT_EQ(w.first_target, 96);  // the last 32: each token scored once
    EXPECT_EQ(w.count, 28);
    auto error_of = [](int64_t n, int ctx, int stride) -> std::string {
        try {
            plan_windows(n, ctx, stride);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    };
    EXPECT_NE(error_of(100, 128, 128).find("100 tokens, fewer than one window of --ctx 128"),
              std::string::npos);
    EXPECT_NE(error_of(1000, 128, 0).find("--stride 0 must be at least 1"), std::string::npos);
    EXPECT_NE(error_of(1000, 128, 129).find("longer than --ctx"), std::string::npos);
    EXPECT_NE(error_of(1000, 1, 1).find("--ctx 1 must be at least 2"), std::string::npos);
}

// KL(P ‖ Q) for P = (1/2, 1/4, 1/4), Q = (1/4, 1/2, 1/4): 1/2 ln 2 + 1/4 ln(1/2) = ln 2 / 4.
TEST(KlDivergence, ArithmeticByHand) {
    const std::vector<float> p = {std::log(0.5f), std::log(0.25f), std::log(0.25f)};
    const std::vector<float> q = {std::log(0.25f), std::log(0.5f), std::log(0.25f)};
    EXPECT_NEAR(kl_divergence(p, q), std::log(2.0) / 4.0, 1e-7);
    EXPECT_EQ(kl_divergence(p, p), 0.0);
    EXPECT_EQ(top_token(p), 0);
    EXPECT_EQ(top_token(q), 1);
    // log_softmax of rows (0, ln 3) and (ln 2, ln 2), predicting tokens 1 and 2 of a window of 3.
    const std::vector<float> logits = {0.0f, std::log(3.0f), std::log(2.0f), std::log(2.0f)};
    const std::vector<float> lp = window_log_probs(logits, 2, 3, 1);
    ASSERT_EQ(lp.size(), 4u);
    EXPECT_NEAR(lp[0], std::log(0.25), 1e-6);
    EXPECT_NEAR(lp[1], std::log(0.75), 1e-6);
    EXPECT_NEAR(lp[2], std::log(0.5), 1e-6);
    EXPECT_EQ(window_log_probs(logits, 2, 3, 2).size(), 2u);  // only the row predicting token 2
    // Four rows: mean 0.25, sample sd of (0, 0, 0, 1) = 0.5 over sqrt 4; median and the top.
    const std::vector<double> kl = {0.0, 1.0, 0.0, 0.0};
    const KlEstimate e = estimate_kl(kl, 3);
    EXPECT_EQ(e.n, 4);
    EXPECT_DOUBLE_EQ(e.mean, 0.25);
    EXPECT_DOUBLE_EQ(e.error, 0.25);
    EXPECT_DOUBLE_EQ(e.median, 0.0);
    EXPECT_DOUBLE_EQ(e.max, 1.0);
    EXPECT_DOUBLE_EQ(e.p99, 1.0);
    EXPECT_DOUBLE_EQ(e.same_top, 0.75);
}

using testing::error_of;

// The base file: what is written is read back; a file cut short, padded, of another kind or
// with a header out of range is refused in one line naming it.
TEST(KlDivergence, BaseFileRoundTripAndBadFiles) {
    testing::TempDir dir;
    const std::string path = dir.file("base.kld");
    const KlBaseHeader h{5, 4, 4, 3, 2};  // one scored row a window
    {
        KlBaseWriter w(path, h);
        w.add_window(std::vector<int32_t>{1, 2, 3, 4}, std::vector<float>{-1, -2, -3, -4, -5});
        w.add_window(std::vector<int32_t>{5, 6, 7, 8}, std::vector<float>{-6, -7, -8, -9, -10});
        w.finish();
    }
    {
        KlBaseReader r(path);
        EXPECT_EQ(r.header(), h);
        std::vector<int32_t> tokens;
        std::vector<float> lp;
        r.next_window(tokens, lp);
        r.next_window(tokens, lp);
        EXPECT_EQ(tokens, (std::vector<int32_t>{5, 6, 7, 8}));
        EXPECT_EQ(lp, (std::vector<float>{-6, -7, -8, -9, -10}));
        EXPECT_NE(error_of([&] { r.next_window(tokens, lp); }).find("holds 2 windows"),
                  std::string::npos);
    }
    std::string bytes;
    {
        std::ifstream in(path, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const auto write = [&](const std::string& name, const std::string& content) {
        std::ofstream(dir.file(name), std::ios::binary) << content;
        return dir.file(name);
    };
    const std::string cut = write("cut.kld", bytes.substr(0, bytes.size() - 3));
    const std::string padded = write("padded.kld", bytes + "x");
    const std::string other = write("other.kld", "GGUF" + bytes.substr(4));
    std::string hostile = bytes;
    hostile[12] = '\xff';  // n_vocab = 0xff000005... out of range
    hostile[15] = '\x7f';
    const std::string big = write("hostile.kld", hostile);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {cut, "truncated"},
        {padded, "trailing bytes"},
        {other, "not a KL divergence base file"},
        {big, "header out of range"},
        {dir.file("missing.kld"), "cannot open"},
    };
    for (const auto& [file, fragment] : cases) {
        const std::string e = error_of([&] { KlBaseReader r(file); });
        EXPECT_NE(e.find(file), std::string::npos) << e;
        EXPECT_NE(e.find(fragment), std::string::npos) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
}

// `tandem perplexity --kl-divergence`: a model against its own base run agrees everywhere; a
// coarser quantization of it does not, and says so; windows of another size are refused.
TEST(KlDivergence, CommandComparesWithTheBaseRun) {
    testing::TempDir dir;
    using testing::run_command, testing::shell_quote, testing::tandem_binary;
    SynthSpec spec = testing::tiny_spec("qwen3moe");
    spec.fast_random = false;
    const std::string model = testing::write_model(spec, dir.file("m.gguf"));
    const std::string coarse = dir.file("q2.gguf");
    const std::string tandem = shell_quote(tandem_binary());
    std::string out;
    ASSERT_EQ(run_command(tandem + " quantize --quiet --exp-type q2_K --attn-type q4_0 " +
                              shell_quote(model) + " " + shell_quote(coarse) + " 2>&1",
                          &out),
              0)
        << out;
    std::string text;
    for (int i = 0; i < 60; ++i) text += "word" + std::to_string(i * 37 % 101) + " and more. ";
    std::ofstream(dir.file("text.txt")) << text;
    const std::string args = " -f " + shell_quote(dir.file("text.txt")) +
                             " --ctx 32 --chunks 3 --kl-divergence-base " +
                             shell_quote(dir.file("base.kld"));
    ASSERT_EQ(run_command(tandem + " perplexity -m " + shell_quote(model) + args + " 2>&1", &out), 0)
        << out;
    const auto figure = [](const std::string& s, const std::string& key) {
        const size_t at = s.find(key);
        return at == std::string::npos ? -1.0 : std::stod(s.substr(at + key.size()));
    };
    const double ppl = figure(out, "PPL = ");
    ASSERT_GT(ppl, 1.0) << out;
    ASSERT_EQ(run_command(tandem + " perplexity -m " + shell_quote(model) + args +
                              " --kl-divergence 2>&1",
                          &out),
              0)
        << out;
    EXPECT_EQ(figure(out, "Mean KLD: "), 0.0) << out;
    EXPECT_EQ(figure(out, "Same top token: "), 100.0) << out;
    EXPECT_NEAR(figure(out, "Base PPL = ") / ppl, 1.0, 1e-6) << out;  // (from f32 log-probs)
    ASSERT_EQ(run_command(tandem + " perplexity -m " + shell_quote(coarse) + args +
                              " --kl-divergence 2>&1",
                          &out),
              0)
        << out;
    EXPECT_GT(figure(out, "Mean KLD: "), 1e-5) << out;
    EXPECT_NEAR(figure(out, "Base PPL = ") / ppl, 1.0, 1e-6) << out;  // (from f32 log-probs)
    ASSERT_NE(run_command(tandem + " perplexity -m " + shell_quote(model) + " -f " +
                              shell_quote(dir.file("text.txt")) +
                              " --ctx 16 --kl-divergence --kl-divergence-base " +
                              shell_quote(dir.file("base.kld")) + " 2>&1",
                          &out),
              0);
    EXPECT_NE(out.find("use the base run's --ctx and --stride"), std::string::npos) << out;
}

// `tandem perplexity` against the figure from llama.cpp's logits of the same windows, f32 weights:
// within 0.05% (the issue asks 0.5%; tighter, so that a window scored one token off would show)
TEST(Perplexity, MatchesLlamaCppLogits) {
    TANDEM_REQUIRE_ORACLE();
    const std::string model = testing::oracle_model("--arch qwen3moe --wtype f32");
    testing::TempDir dir;
    const std::string text_path = dir.path() + "/text.txt";
    std::string text;
    for (int i = 0; i < 40; ++i)
        text += "The quick brown fox " + std::to_string(i * 7919 % 1000) + " jumps over the lazy dog. ";
    std::ofstream(text_path) << text;
    using testing::run_command, testing::shell_quote, testing::tandem_binary;
    const std::string tandem = shell_quote(tandem_binary());
    std::string ids_text, out;
    ASSERT_EQ(run_command(tandem + " tokenize -m " + shell_quote(model) + " -f " +
                              shell_quote(text_path) + " 2>/dev/null",
                          &ids_text),
              0);
    ASSERT_EQ(run_command(tandem + " perplexity -m " + shell_quote(model) + " -f " +
                              shell_quote(text_path) + " --ctx 64 --chunks 3 2>/dev/null",
                          &out),
              0)
        << out;
    const size_t at = out.find("PPL = ");
    ASSERT_NE(at, std::string::npos) << out;
    const double ours = std::stod(out.substr(at + 6));

    auto parse_ids = [](const std::string& line) {
        std::vector<int32_t> ids;
        std::istringstream in(line);
        for (int32_t id; in >> id;) ids.push_back(id);
        return ids;
    };
    const std::vector<int32_t> ids = parse_ids(ids_text);
    // Whether the model starts a text with BOS: "a" is one byte token, two with a BOS.
    std::string a_text;
    ASSERT_EQ(run_command(tandem + " tokenize -m " + shell_quote(model) + " a 2>/dev/null", &a_text),
              0);
    const bool bos = parse_ids(a_text).size() == 2;
    const PerplexityWindows w = plan_windows(static_cast<int64_t>(ids.size()), 64, 64);
    ASSERT_GE(w.count, 3);
    std::vector<double> nll;
    for (int k = 0; k < 3; ++k) {
        std::vector<int32_t> window(ids.begin() + k * 64, ids.begin() + k * 64 + 64);
        if (bos) window[0] = ids[0];  // as llama-perplexity: every window starts with BOS
        const std::vector<float> logits = testing::llama_all_logits(model, window);
        const int n_vocab = static_cast<int>(logits.size() / window.size());
        const std::vector<double> scored = window_nll(logits, n_vocab, window, w.first_target);
        nll.insert(nll.end(), scored.begin(), scored.end());
    }
    const double theirs = estimate_perplexity(nll).ppl;
    std::printf("[ perplexity ] tandem %.4f, from llama.cpp's logits %.4f\n", ours, theirs);
    EXPECT_NEAR(ours / theirs, 1.0, 5e-4);
}

}  // namespace
}  // namespace tandem
