// Tokenizer metadata checks: every inconsistency is an Error naming the key, and hostile files
// never crash the loader or the tokenizer.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "tokenizer_test_support.h"

namespace tandem {
namespace {

using testing::load_error;
using testing::small_bpe_vocab;
using testing::VocabSpec;

// The error for `spec`, which must mention every one of `parts`.
void expect_error(const VocabSpec& spec, std::initializer_list<std::string_view> parts) {
    const std::string error = load_error(spec.writer());
    ASSERT_FALSE(error.empty()) << "loaded, expected an error mentioning " << *parts.begin();
    for (std::string_view part : parts) {
        EXPECT_NE(error.find(part), std::string::npos) << "'" << part << "' not in: " << error;
    }
}

TEST(TokenizerMetadata, SmallVocabularyLoads) {
    EXPECT_EQ(load_error(small_bpe_vocab().writer()), "");
}

TEST(TokenizerMetadata, ModelNames) {
    VocabSpec v = small_bpe_vocab();
    v.model = "bert";
    expect_error(v, {"tokenizer.ggml.model", "bert", "not supported"});
    v.model = "frobnicate";
    expect_error(v, {"tokenizer.ggml.model", "frobnicate"});
    GgufWriter none;
    none.set_string("general.architecture", "qwen3");
    const std::string error = testing::load_error(none);
    EXPECT_NE(error.find("tokenizer.ggml.model"), std::string::npos) << error;
}

TEST(TokenizerMetadata, PreTokenizerNames) {
    VocabSpec v = small_bpe_vocab();
    v.pre = "frobnicate";
    expect_error(v, {"tokenizer.ggml.pre", "frobnicate", "not a known pre-tokenizer"});
    v.pre = "kimi-k2";
    expect_error(v, {"tokenizer.ggml.pre", "kimi-k2", "not supported"});
    v.pre = "";  // absent: the default pre-tokenizer, as llama.cpp
    Tokenizer t = testing::tokenizer_from(v.writer());
    EXPECT_EQ(t.vocab().pre_name(), "default");
}

TEST(TokenizerMetadata, Lengths) {
    VocabSpec v = small_bpe_vocab();
    v.types.pop_back();
    expect_error(v, {"tokenizer.ggml.token_type", "tokenizer.ggml.tokens"});
    v = small_bpe_vocab();
    v.scores.assign(v.tokens.size() + 1, 0.0f);
    expect_error(v, {"tokenizer.ggml.scores", "entries"});
    v = small_bpe_vocab();
    v.types[3] = 42;
    expect_error(v, {"tokenizer.ggml.token_type[3]", "42"});
    v = small_bpe_vocab();
    v.tokens.clear();
    v.types.clear();
    v.merges.clear();
    v.ids.clear();
    expect_error(v, {"tokenizer.ggml.tokens", "empty"});
}

TEST(TokenizerMetadata, WrongTypes) {
    VocabSpec v = small_bpe_vocab();
    GgufWriter bad;
    bad.set_string("tokenizer.ggml.model", "gpt2");
    bad.set_string("tokenizer.ggml.pre", "qwen2");
    const std::vector<int32_t> ints = {1, 2, 3};
    bad.set_array<int32_t>("tokenizer.ggml.tokens", ints);
    std::string error = testing::load_error(bad);
    EXPECT_NE(error.find("tokenizer.ggml.tokens"), std::string::npos) << error;

    GgufWriter bad_flag = v.writer();
    bad_flag.set<uint32_t>("tokenizer.ggml.add_bos_token", 1);
    error = testing::load_error(bad_flag);
    EXPECT_NE(error.find("tokenizer.ggml.add_bos_token"), std::string::npos) << error;
}

TEST(TokenizerMetadata, Merges) {
    VocabSpec v = small_bpe_vocab();
    v.write_merges = false;
    expect_error(v, {"tokenizer.ggml.merges", "missing"});
    v = small_bpe_vocab();
    v.merges.push_back("nospace");
    expect_error(v, {"tokenizer.ggml.merges[12]", "nospace"});
    v = small_bpe_vocab();
    v.merges.push_back("he qqq");
    expect_error(v, {"tokenizer.ggml.merges[12]", "'qqq'", "not a token"});
    v = small_bpe_vocab();
    v.merges.push_back("x y");  // "xy" is not a token
    expect_error(v, {"tokenizer.ggml.merges[12]", "'xy'"});
}

TEST(TokenizerMetadata, SpecialIds) {
    VocabSpec v = small_bpe_vocab();
    v.ids = {{"bos", 100000}};
    expect_error(v, {"tokenizer.ggml.bos_token_id", "100000"});
    v = small_bpe_vocab();
    v.ids.push_back({"eot", -1});
    expect_error(v, {"tokenizer.ggml.eot_token_id"});
    v = small_bpe_vocab();
    v.ids.push_back({"padding", static_cast<int64_t>(v.tokens.size())});
    expect_error(v, {"tokenizer.ggml.padding_token_id"});
    v = small_bpe_vocab();
    v.ids.clear();
    v.flags = {{"add_bos_token", true}};
    expect_error(v, {"tokenizer.ggml.add_bos_token", "no BOS"});
    v.flags = {{"add_eos_token", true}};
    expect_error(v, {"tokenizer.ggml.add_eos_token", "no EOS"});
}

TEST(TokenizerMetadata, SentencePieceByteTokens) {
    VocabSpec v;
    v.model = "llama";
    v.pre = "";
    v.write_merges = false;
    v.tokens = {"<unk>", "<s>", "</s>", "<0x4G>", "a"};
    v.types = {2, 3, 3, 6, 1};
    v.scores = {0, 0, 0, 0, -1};
    expect_error(v, {"<0x4G>", "<0xXX>"});
    v.tokens[3] = "<0x41>";
    EXPECT_EQ(load_error(v.writer()), "");
    v.scores[4] = std::numeric_limits<float>::quiet_NaN();
    expect_error(v, {"tokenizer.ggml.scores[4]", "not finite"});
}

TEST(TokenizerMetadata, EmptyTokenTextsAreRenamed) {
    VocabSpec v = small_bpe_vocab();
    v.tokens.push_back("");
    v.types.push_back(3);  // an empty control token would otherwise match everywhere
    Tokenizer t = testing::tokenizer_from(v.writer());
    EXPECT_EQ(t.vocab().text(t.n_tokens() - 1), "[EMPTY_" + std::to_string(t.n_tokens() - 1) + "]");
    EXPECT_EQ(t.encode("hello", false, true).size(), 1u);
}

// Random byte flips of a valid file: loading either works or throws Error, and whatever
// loads can encode and decode.
TEST(TokenizerMetadata, HostileBytesNeverCrash) {
    VocabSpec v = small_bpe_vocab();
    v.scores.assign(v.tokens.size(), -1.0f);
    const std::vector<uint8_t> good = v.writer().to_bytes();
    std::mt19937 rng(7);
    int loaded = 0;
    for (int iter = 0; iter < 400; ++iter) {
        std::vector<uint8_t> bytes = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
        try {
            std::unique_ptr<GgufFile> gguf =
                GgufFile::parse("fuzz.gguf", bytes.data(), bytes.size());
            Tokenizer t = Tokenizer::from_gguf(*gguf);
            const std::vector<TokenId> ids =
                t.encode("<|im_start|>hello world\xC3\xA9 abc", true, true);
            t.decode(ids);
            ++loaded;
        } catch (const Error&) {
        }
    }
    EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace tandem
