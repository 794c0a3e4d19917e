// SentencePiece (tokenizer.ggml.model = llama) on a hand-made vocabulary: the ▁ space marker,
// the space prefix, byte fallback, special tokens, and agreement with llama.cpp.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>

#include "gguf/gguf_reader.h"
#include "support/oracle.h"
#include "support/temp_dir.h"
#include "tokenizer_test_support.h"

namespace tandem {
namespace {

using namespace tandem::testing;

constexpr std::string_view kMarker = "\xE2\x96\x81";  // ▁

// <unk> <s> </s>, 256 byte tokens, then pieces: characters, and for a few dozen words the
// ▁-prefixed prefixes and the inner substrings, with scores from a fixed hash so that merge
// order is not simply "longest first". Also "世" (but not "界"), user-defined <tool> and a
// control token <ctrl>.
VocabSpec small_spm_vocab() {
    VocabSpec v;
    v.model = "llama";
    v.arch = "";  // add_llama_arch_keys names it where needed
    v.pre = "";
    v.write_merges = false;
    auto add = [&](const std::string& text, int32_t type, float score) {
        v.tokens.push_back(text);
        v.types.push_back(type);
        v.scores.push_back(score);
    };
    add("<unk>", 2, 0);
    add("<s>", 3, 0);
    add("</s>", 3, 0);
    for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 6, 0);
    std::set<std::string> pieces;
    auto piece = [&](const std::string& p) {
        if (!pieces.insert(p).second) return;
        uint32_t h = 2166136261u;
        for (unsigned char c : p) h = (h ^ c) * 16777619u;
        add(p, 1, -static_cast<float>(h % 1000) / 100.0f - 1.0f / static_cast<float>(p.size()));
    };
    piece(std::string(kMarker));
    for (char c = 'a'; c <= 'z'; ++c) piece(std::string(1, c));
    for (char c = 'A'; c <= 'Z'; ++c) piece(std::string(1, c));
    for (char c : std::string("0123456789.,!?'-:;()\n\t")) piece(std::string(1, c));
    piece("\xC3\xA9");      // é
    piece("\xE4\xB8\x96");  // 世
    for (const std::string word :
         {"hello", "world", "the",    "quick", "brown",     "fox",        "jumps",
          "over",  "lazy",  "dog",    "token", "tokenizer", "sentence",   "piece",
          "is",    "a",     "test",   "of",    "and",       "in",         "it",
          "was",   "best",  "times",  "worst", "Hello",     "The",        "It",
          "code",  "def",   "return", "int",   "main",      "caf\xC3\xA9"}) {
        for (size_t n = 1; n <= word.size(); ++n) piece(std::string(kMarker) + word.substr(0, n));
        for (size_t i = 0; i < word.size(); ++i) {
            for (size_t n = 2; n <= 4 && i + n <= word.size(); ++n) piece(word.substr(i, n));
        }
    }
    piece(std::string(kMarker) + std::string(kMarker));  // "▁▁"
    add("<tool>", 4, 0);
    add("<ctrl>", 3, 0);
    return v;
}

class SmallSpm : public ::testing::Test {
  protected:
    SmallSpm() : tok(tokenizer_from(small_spm_vocab().writer())) {}
    TokenId id(std::string_view text) const {
        const TokenId t = tok.vocab().find(text);
        EXPECT_NE(t, kNoToken) << text;
        return t;
    }
    Tokenizer tok;
};

TEST_F(SmallSpm, DefaultsAndSpacePrefix) {
    EXPECT_EQ(tok.kind(), VocabKind::kSpm);
    EXPECT_EQ(tok.unk(), 0);
    EXPECT_EQ(tok.bos(), 1);
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());
    EXPECT_TRUE(tok.vocab().add_space_prefix());
    EXPECT_TRUE(tok.is_eog(2));

    const std::vector<TokenId> ids = tok.encode("hello world", false);
    std::string joined;
    for (TokenId t : ids) joined += tok.vocab().text(t);
    EXPECT_EQ(joined, std::string(kMarker) + "hello" + std::string(kMarker) + "world");
    EXPECT_EQ(tok.encode("hello world", true)[0], 1);
    EXPECT_EQ(tok.decode(ids), "hello world");
    // One leading space is the prefix's; more are the text's.
    EXPECT_EQ(tok.decode(tok.encode("  hello", false)), "  hello");
    EXPECT_TRUE(tok.encode("", false).empty());
    EXPECT_EQ(tok.encode("", true), (std::vector<TokenId>{1}));
}

TEST_F(SmallSpm, ByteFallback) {
    // 世 is a piece, 界 (E7 95 8C) is not: its bytes become <0xE7> <0x95> <0x8C>.
    const std::vector<TokenId> ids = tok.encode("\xE4\xB8\x96\xE7\x95\x8C", false);
    ASSERT_EQ(ids.size(), 5u);
    EXPECT_EQ(ids[0], id(kMarker));
    EXPECT_EQ(ids[1], id("\xE4\xB8\x96"));
    EXPECT_EQ(ids[2], id("<0xE7>"));
    EXPECT_EQ(ids[3], id("<0x95>"));
    EXPECT_EQ(ids[4], id("<0x8C>"));
    EXPECT_EQ(tok.token_to_piece(id("<0xE7>")), "\xE7");
    EXPECT_EQ(tok.decode(ids), "\xE4\xB8\x96\xE7\x95\x8C");
    // Without byte tokens, bytes fall back to <unk>.
    VocabSpec v = small_spm_vocab();
    for (int b = 0; b < 256; ++b) {
        v.tokens[3 + b] = fmt::format("[unused{}]", b);
        v.types[3 + b] = 5;
    }
    Tokenizer no_bytes = tokenizer_from(v.writer());
    EXPECT_EQ(no_bytes.encode("\xE7\x95\x8C", false), (std::vector<TokenId>{id(kMarker), 0, 0, 0}));
}

TEST_F(SmallSpm, SpecialTokensAndPrefix) {
    // Text after a special token gets a space prefix again, as in llama.cpp.
    const std::vector<TokenId> ids = tok.encode("<s>hello<tool>world", false, true);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(tok.vocab().text(ids[1]).substr(0, 3), kMarker);
    EXPECT_NE(std::find(ids.begin(), ids.end(), id("<tool>")), ids.end());
    // <tool> is user-defined: matched without parse_special too; <ctrl> only with it.
    const std::vector<TokenId> plain = tok.encode("a<tool>b<ctrl>", false, false);
    EXPECT_NE(std::find(plain.begin(), plain.end(), id("<tool>")), plain.end());
    EXPECT_EQ(std::find(plain.begin(), plain.end(), id("<ctrl>")), plain.end());
}

TEST_F(SmallSpm, NoSpacePrefixWhenTheKeySaysSo) {
    VocabSpec v = small_spm_vocab();
    v.flags = {{"add_space_prefix", false}, {"add_bos_token", false}};
    Tokenizer t = tokenizer_from(v.writer());
    const std::vector<TokenId> ids = t.encode("hello", true);
    ASSERT_FALSE(ids.empty());
    EXPECT_NE(t.vocab().text(ids[0]).substr(0, 3), kMarker);
    EXPECT_EQ(t.decode(t.encode(" hello", false)), " hello");
}

TEST(TokenizerSpmConformance, MatchesLlamaCpp) {
    TANDEM_REQUIRE_ORACLE();
    TempDir dir;
    const VocabSpec spec = small_spm_vocab();
    // llama.cpp reads the architecture's hyperparameters even for a vocabulary-only load.
    GgufWriter full = spec.writer();
    add_llama_arch_keys(full);
    const std::string path = dir.file("spm.gguf");
    full.write(path);
    Tokenizer tok = Tokenizer::from_gguf(*GgufFile::open(path));

    std::vector<std::string> texts = load_corpus();
    for (const std::string extra :
         {"hello world", "Hello World", " hello", "hello  world", "the quick brown fox",
          "tokenizer test of sentence piece", "<s>hello</s>", "<tool>x", "<ctrl>",
          "a<tool>b<ctrl>c", "caf\xC3\xA9 \xE4\xB8\x96\xE7\x95\x8C", "\xF0\x9F\x98\x80 emoji"}) {
        texts.push_back(extra);
    }
    OracleJob job{path, texts, {}, special_candidates(tok)};
    for (const std::string& text : texts) job.detokenize.push_back(tok.encode(text, false, true));
    const OracleTokens want = run_tokenizer_oracle({job}).at(0);

    size_t same_plain = 0, same_special = 0, same_detok = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
        const std::vector<TokenId> plain = tok.encode(texts[i], false, false);
        const std::vector<TokenId> special = tok.encode(texts[i], false, true);
        same_plain += plain == want.plain[i];
        same_special += special == want.special[i];
        EXPECT_EQ(plain, want.plain[i])
            << "#" << i << " " << texts[i] << "\n ours:  " << ids_string(plain)
            << "\n llama: " << ids_string(want.plain[i]);
        EXPECT_EQ(special, want.special[i]) << "(special) #" << i << " " << texts[i];
        const bool detok = tok.decode(special, false) == want.detokenized[i] &&
                           tok.decode(special, true) == want.detokenized_special[i];
        same_detok += detok;
        EXPECT_TRUE(detok) << "detokenize #" << i << " " << texts[i] << "\n ours:  '"
                           << tok.decode(special, true) << "'\n llama: '"
                           << want.detokenized_special[i] << "'";
    }
    std::printf(
        "[ conformance ] spm: %zu/%zu identical (parse_special off), %zu/%zu (on), detokenize "
        "%zu/%zu\n",
        same_plain, texts.size(), same_special, texts.size(), same_detok, texts.size());
    std::vector<TokenId> eog, control;
    for (TokenId id : special_candidates(tok)) {
        if (tok.is_eog(id)) eog.push_back(id);
        if (tok.vocab().has_attr(id, kTokenAttrControl)) control.push_back(id);
    }
    EXPECT_EQ(eog, want.eog);
    EXPECT_EQ(control, want.control);
    EXPECT_EQ(tok.bos(), want.bos);
    EXPECT_EQ(tok.eos(), want.eos);
    EXPECT_EQ(tok.add_bos(), want.add_bos);
}

}  // namespace
}  // namespace tandem
