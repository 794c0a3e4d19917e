// Byte-level BPE on a small hand-made vocabulary: merge order, special tokens, EOG, decoding
// and the streaming decoder.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "text/stream_decoder.h"
#include "tokenizer_test_support.h"

namespace tandem {
namespace {

using testing::find_token;
using testing::small_bpe_vocab;
using testing::tokenizer_from;

class SmallBpe : public ::testing::Test {
  protected:
    SmallBpe() : tok(tokenizer_from(small_bpe_vocab().writer())) {}
    TokenId id(std::string_view text) const {
        const TokenId t = find_token(tok, text);
        EXPECT_NE(t, kNoToken) << text;
        return t;
    }
    std::vector<TokenId> bytes(std::string_view s) const {
        std::vector<TokenId> out;
        for (char c : s) out.push_back(static_cast<uint8_t>(c));  // token i is byte i
        return out;
    }
    Tokenizer tok;
};

TEST_F(SmallBpe, MergesByRank) {
    EXPECT_EQ(tok.kind(), VocabKind::kBpe);
    EXPECT_EQ(tok.encode("hello world", false),
              (std::vector<TokenId>{id("hello"), id("\xC4\xA0world")}));
    // "a b" outranks "b c": abc -> ab c.
    EXPECT_EQ(tok.encode("abc", false), (std::vector<TokenId>{id("ab"), 'c'}));
    EXPECT_EQ(tok.encode("bc", false), (std::vector<TokenId>{id("bc")}));
    // Merges never cross pre-tokenizer pieces ("he" | " llo").
    EXPECT_EQ(tok.encode("he llo", false), (std::vector<TokenId>{id("he"), ' ', id("ll"), 'o'}));
    EXPECT_EQ(tok.encode("\xC3\xA9", false), (std::vector<TokenId>{id("\xC3\x83\xC2\xA9")}));
    EXPECT_TRUE(tok.encode("", false).empty());
}

TEST_F(SmallBpe, SpecialTokens) {
    const TokenId start = id("<|im_start|>"), end = id("<|im_end|>"), think = id("<think>");
    EXPECT_EQ(tok.encode("<|im_start|>hello<|im_end|>", false, true),
              (std::vector<TokenId>{start, id("hello"), end}));
    // Without parse_special control tokens are plain text...
    std::vector<TokenId> plain = tok.encode("<|im_start|>", false, false);
    EXPECT_EQ(plain, bytes("<|im_start|>"));
    // ... but user-defined tokens are always matched.
    EXPECT_EQ(tok.encode("<think>hello", false, false), (std::vector<TokenId>{think, id("hello")}));
    EXPECT_EQ(tok.encode("<<|im_end|>>", false, true), (std::vector<TokenId>{'<', end, '>'}));

    EXPECT_EQ(tok.bos(), id("<|endoftext|>"));
    EXPECT_EQ(tok.eos(), end);
    EXPECT_FALSE(tok.add_bos());  // qwen2 default
    EXPECT_EQ(tok.encode("hello", true), (std::vector<TokenId>{id("hello")}));
    // <|endoftext|> and <|im_end|> end generation by name; the eos id too.
    EXPECT_TRUE(tok.is_eog(end));
    EXPECT_TRUE(tok.is_eog(id("<|endoftext|>")));
    EXPECT_FALSE(tok.is_eog(start));
    EXPECT_FALSE(tok.is_eog(id("hello")));
    // EOT found by text: both qualify, the lowest id is taken.
    EXPECT_EQ(tok.eot(), id("<|endoftext|>"));
    EXPECT_TRUE(tok.is_control(start));
    EXPECT_FALSE(tok.is_control(think));
}

TEST_F(SmallBpe, AddSpecialFollowsTheFlags) {
    auto spec = small_bpe_vocab();
    spec.flags = {{"add_bos_token", true}, {"add_eos_token", true}};
    Tokenizer t = tokenizer_from(spec.writer());
    EXPECT_EQ(t.encode("hello", true), (std::vector<TokenId>{t.bos(), id("hello"), t.eos()}));
    EXPECT_EQ(t.encode("", true), (std::vector<TokenId>{t.bos(), t.eos()}));
    EXPECT_EQ(t.encode("hello", false), (std::vector<TokenId>{id("hello")}));
}

TEST_F(SmallBpe, IgnoreMergesTakesWholeTokens) {
    auto spec = small_bpe_vocab();
    spec.tokens.push_back("xyz");  // no merge builds it
    spec.types.push_back(1);
    EXPECT_EQ(tokenizer_from(spec.writer()).encode("xyz", false),
              (std::vector<TokenId>{'x', 'y', 'z'}));
    spec.pre = "llama-bpe";  // ignore_merges, and add_bos by default
    Tokenizer t = tokenizer_from(spec.writer());
    EXPECT_EQ(t.encode("xyz", false), (std::vector<TokenId>{t.vocab().size() - 1}));
    EXPECT_TRUE(t.add_bos());
}

TEST_F(SmallBpe, MalformedUtf8IsReadAsReplacementCharacters) {
    // As llama.cpp: each malformed byte becomes U+FFFD (EF BF BD), tokenized as bytes.
    EXPECT_EQ(tok.encode("a\xFF", false), (std::vector<TokenId>{'a', 0xEF, 0xBF, 0xBD}));
}

TEST_F(SmallBpe, DecodeAndPieces) {
    const std::vector<std::string> texts = {"hello world", "<|im_start|>abc\n\n  x<|im_end|>",
                                            "\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80", "", " "};
    for (const std::string& text : texts) {
        EXPECT_EQ(tok.decode(tok.encode(text, false, true)), text);
        EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text);
    }
    const TokenId start = id("<|im_start|>");
    EXPECT_EQ(tok.token_to_piece(start), "<|im_start|>");
    EXPECT_EQ(tok.token_to_piece(start, false), "");
    EXPECT_EQ(tok.token_to_piece(id("<think>"), false), "<think>");
    EXPECT_EQ(tok.token_to_piece(' '), " ");
    EXPECT_EQ(tok.token_to_piece(id("[PAD0]")), "");
    const std::vector<TokenId> ids = tok.encode("<|im_start|>hello", false, true);
    EXPECT_EQ(tok.decode(ids, false), "hello");
    EXPECT_THROW(tok.token_to_piece(-1), Error);
    EXPECT_THROW(tok.token_to_piece(tok.n_tokens()), Error);
    const std::vector<TokenId> bad = {id("hello"), 1 << 30};
    EXPECT_THROW(tok.decode(bad), Error);
}

TEST_F(SmallBpe, StreamDecoderHoldsSplitCharacters) {
    StreamDecoder stream(tok);
    // "é" as two byte tokens, then a 4-byte emoji one byte at a time.
    EXPECT_EQ(stream.feed(0xC3), "");
    EXPECT_TRUE(stream.has_pending());
    EXPECT_EQ(stream.feed(0xA9), "\xC3\xA9");
    EXPECT_EQ(stream.feed(id("hello")), "hello");
    EXPECT_EQ(stream.feed(0xF0), "");
    EXPECT_EQ(stream.feed(0x9F), "");
    EXPECT_EQ(stream.feed(0x98), "");
    EXPECT_EQ(stream.feed(0x80), "\xF0\x9F\x98\x80");
    // Bytes that can never complete a character come out as U+FFFD at once.
    EXPECT_EQ(stream.feed(0xFF), "\xEF\xBF\xBD");
    EXPECT_EQ(stream.feed(0xE4), "");
    EXPECT_EQ(stream.feed('a'),
              "\xEF\xBF\xBD"
              "a");
    // A truncated character at the end is flushed as U+FFFD.
    EXPECT_EQ(stream.feed(0xE4), "");
    EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
    EXPECT_FALSE(stream.has_pending());

    StreamDecoder quiet(tok, /*render_special=*/false);
    EXPECT_EQ(quiet.feed(id("<|im_end|>")), "");
    EXPECT_EQ(quiet.feed(id("<think>")), "<think>");

    // Streaming a whole encoding gives the text back.
    const std::string text =
        "\xE4\xBD\xA0\xE5\xA5\xBD hello \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD world";
    StreamDecoder s2(tok);
    std::string joined;
    for (TokenId t : tok.encode(text, false)) joined += s2.feed(t);
    joined += s2.flush();
    EXPECT_EQ(joined, text);
}

TEST_F(SmallBpe, EncodeIsThreadSafe) {
    const std::string text = "hello world abc <think> \xC3\xA9 ";
    std::string big;
    for (int i = 0; i < 200; ++i) big += text;
    const std::vector<TokenId> expected = tok.encode(big, false);
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 20; ++i) {
                if (tok.encode(big, false) != expected) ++mismatches;
            }
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace tandem
