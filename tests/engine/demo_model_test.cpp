// The shipped demo model (models/kjv-moe.gguf, trained by tools/train_demo_model.py): it loads,
// its perplexity on the held-out chapters shipped beside it is far below that of the same model
// with random weights, greedy text is made of English words, and llama.cpp's logits agree.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "engine/perplexity.h"
#include "engine/session.h"
#include "gguf/gguf_copy.h"
#include "model/model.h"
#include "support/oracle.h"
#include "support/oracle_runs.h"
#include "support/temp_dir.h"
#include "text/tokenizer.h"

namespace tandem {
namespace {

constexpr int kCtx = 512;      // tandem perplexity's default window
constexpr int kWindows = 3;    // of the held-out text: enough to tell trained from random

const std::string kModel = std::string(TANDEM_SOURCE_DIR) + "/models/kjv-moe.gguf";
const std::string kHeldOut = std::string(TANDEM_SOURCE_DIR) + "/models/kjv-heldout.txt";

ThreadPool& pool() {
    static ThreadPool p(2);
    return p;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The first kWindows windows of the held-out text, as tandem perplexity scores them.
double heldout_perplexity(const std::string& model_path, const std::vector<int32_t>& ids) {
    auto model = Model::load(model_path);
    SessionOptions o;
    o.n_ctx = kCtx;
    o.max_batch = kCtx;
    o.kv_type = KvType::kF32;
    Session session(*model, pool(), o);
    const PerplexityWindows w = plan_windows(static_cast<int64_t>(ids.size()), kCtx, kCtx);
    std::vector<double> nll;
    for (int k = 0; k < kWindows; ++k) {
        session.reset();
        const std::vector<int32_t> window(ids.begin() + k * kCtx, ids.begin() + (k + 1) * kCtx);
        const std::vector<double> s = window_nll(session.feed_all(window), model->config().n_vocab, window,
                                                 w.first_target);
        nll.insert(nll.end(), s.begin(), s.end());
    }
    return estimate_perplexity(nll).ppl;
}

std::vector<int32_t> heldout_ids() {
    auto file = GgufFile::open(kModel);
    const Tokenizer tok = Tokenizer::from_gguf(*file);
    const std::string text = read_file(kHeldOut);
    EXPECT_GT(text.size(), 10000u) << kHeldOut;
    std::vector<int32_t> ids = tok.encode(text);
    EXPECT_GE(ids.size(), size_t{kWindows * kCtx});
    ids.resize(std::min(ids.size(), size_t{kWindows * kCtx}));
    return ids;
}

TEST(DemoModel, LoadsWithItsTokenizerAndTemplate) {
    auto model = Model::load(kModel);
    EXPECT_EQ(model->config().arch, "qwen3moe");
    EXPECT_EQ(model->config().n_vocab, 4096);
    const GgufFile& f = model->file();
    EXPECT_LE(f.file_size(), 16u << 20);
    EXPECT_EQ(f.get<uint32_t>("general.file_type"), 15u);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, GgmlType::kQ8_0);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_down_exps.weight")->type, GgmlType::kQ4_K);
    EXPECT_TRUE(f.has("tokenizer.chat_template"));
    const Tokenizer tok = Tokenizer::from_gguf(f);
    EXPECT_EQ(tok.decode(tok.encode("In the beginning God created the heaven and the earth.")),
              "In the beginning God created the heaven and the earth.");
}

// The trained model against the same file with random weights (N(0, 0.02), as training began).
TEST(DemoModel, HeldOutPerplexityFarBelowRandom) {
    const std::vector<int32_t> ids = heldout_ids();
    const double trained = heldout_perplexity(kModel, ids);

    testing::TempDir dir;
    auto file = GgufFile::open(kModel);
    GgufEdit edit;
    edit.keep_tensor = [](const GgufTensor&) { return false; };
    GgufWriter w = copy_gguf(*file, edit);
    for (const GgufTensor& t : file->tensors()) {
        const bool norm = t.n_dims == 1;
        w.add_tensor(t.name, GgmlType::kF32, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                     [norm, seed = t.offset](uint8_t* dst, size_t n) {
                         std::mt19937 rng(static_cast<uint32_t>(seed));
                         std::normal_distribution<float> normal(0.0f, 0.02f);
                         float* v = reinterpret_cast<float*>(dst);
                         for (size_t i = 0; i < n / sizeof(float); ++i) v[i] = norm ? 1.0f : normal(rng);
                     });
    }
    const std::string random_path = dir.file("random.gguf");
    w.write(random_path);
    const double random = heldout_perplexity(random_path, ids);
    std::printf("[ demo model ] held-out perplexity %.2f trained, %.1f with random weights (%d windows of %d)\n",
                trained, random, kWindows, kCtx);
    EXPECT_LT(trained, 150.0);
    EXPECT_GT(random, 2000.0);
    EXPECT_LT(trained * 20, random);
}

TEST(DemoModel, GreedyTextIsEnglishWords) {
    auto model = Model::load(kModel);
    const Tokenizer tok = Tokenizer::from_gguf(model->file());
    SessionOptions o;
    o.n_ctx = 256;
    o.max_batch = 64;
    Session session(*model, pool(), o);
    std::vector<int32_t> ids = tok.encode("And God said unto Moses,");
    int32_t next = session.feed_greedy(ids);
    std::vector<int32_t> generated;
    for (int i = 0; i < 60 && !tok.is_eog(next); ++i) {
        generated.push_back(next);
        next = session.feed_greedy(std::vector<int32_t>{next});
    }
    const std::string text = tok.decode(generated);
    std::printf("[ demo model ] And God said unto Moses,%s\n", text.c_str());

    // The words of the held-out chapters (never trained on) and of this file's list stand for
    // English here; the model's words should nearly all be among them.
    std::set<std::string> english;
    auto words_of = [](const std::string& s) {
        std::vector<std::string> words;
        std::string w;
        for (char c : s + " ") {
            if (std::isalpha(static_cast<unsigned char>(c))) {
                w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            } else if (c != '\'' && !w.empty()) {
                words.push_back(w);
                w.clear();
            }
        }
        return words;
    };
    for (const std::string& w : words_of(read_file(kHeldOut))) english.insert(w);
    const std::vector<std::string> words = words_of(text);
    ASSERT_GE(words.size(), 20u) << text;
    int known = 0;
    for (const std::string& w : words) known += english.count(w) ? 1 : 0;
    EXPECT_GE(known, static_cast<int>(words.size()) * 9 / 10) << text;
    for (char c : text) EXPECT_TRUE(c == '\n' || (c >= ' ' && c <= '~')) << text;
}

// Teacher-forced logits of a held-out window against llama.cpp's (f32 KV): the same model file,
// q8_0 and q4_K weights, and the perplexity both give the window within 0.5%.
TEST(DemoModel, MatchesLlamaCppLogits) {
    TANDEM_REQUIRE_ORACLE();
    std::vector<int32_t> window = heldout_ids();
    window.resize(kCtx);
    const std::vector<float> theirs = testing::llama_all_logits(kModel, window);
    auto model = Model::load(kModel);
    SessionOptions o;
    o.n_ctx = kCtx;
    o.max_batch = kCtx;
    o.kv_type = KvType::kF32;
    Session session(*model, pool(), o);
    const std::span<const float> l = session.feed_all(window);
    const std::vector<float> ours(l.begin(), l.end());
    const int n_vocab = model->config().n_vocab;
    ASSERT_EQ(theirs.size(), ours.size());
    const testing::LogitComparison c = testing::compare_logits(theirs, ours, n_vocab);
    const int first = plan_windows(kCtx, kCtx, kCtx).first_target;
    const double ppl_ours = estimate_perplexity(window_nll(ours, n_vocab, window, first)).ppl;
    const double ppl_theirs = estimate_perplexity(window_nll(theirs, n_vocab, window, first)).ppl;
    std::printf("[ demo model ] max |d| %.2e, max KL %.2e, argmax flips %d (beyond noise %d); window ppl "
                "%.4f tandem, %.4f llama.cpp\n",
                c.worst_abs, c.worst_kl, c.argmax_flips, c.flips_beyond_noise, ppl_ours, ppl_theirs);
    EXPECT_LT(c.worst_kl, 1e-3);
    EXPECT_EQ(c.flips_beyond_noise, 0);
    EXPECT_NEAR(ppl_ours / ppl_theirs, 1.0, 5e-3);
}

// The held-out text's first 20 KB tokenized as llama.cpp tokenizes it (its pre-tokenizer "qwen2"
// and the model's merges), through node-llama-cpp.
TEST(DemoModel, TokenizesAsLlamaCpp) {
    TANDEM_REQUIRE_ORACLE();
    testing::TempDir dir;
    const std::string text = read_file(kHeldOut).substr(0, 20000);
    const std::string path = dir.file("text.txt");
    std::ofstream(path, std::ios::binary) << text;
    std::string out;
    ASSERT_EQ(testing::run_command("node " + testing::shell_quote(testing::oracle_kit_dir() + "/greedy.mjs") + " " +
                                       testing::shell_quote(kModel) + " --tokenize-file " +
                                       testing::shell_quote(path) + " 2>/dev/null",
                                   &out),
              0)
        << out;
    const std::vector<int32_t> theirs = nlohmann::json::parse(out).get<std::vector<int32_t>>();
    auto file = GgufFile::open(kModel);
    const std::vector<int32_t> ours = Tokenizer::from_gguf(*file).encode(text);
    EXPECT_GT(ours.size(), 4000u);
    EXPECT_EQ(ours, theirs);
}

}  // namespace
}  // namespace tandem
