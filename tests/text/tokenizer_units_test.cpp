// Unit tests of the tokenizer building blocks: UTF-8 helpers, the byte-level alphabet, the
// Unicode compatibility stand-ins and the pre-tokenizer split.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/pre_tokenizer.h"
#include "text/split_regex.h"
#include "text/unicode_compat.h"
#include "text/utf8.h"

namespace tandem {
namespace {

std::string valid(std::string_view in, bool final, size_t* consumed = nullptr) {
    std::string out;
    const size_t n = append_valid_utf8(in, out, final);
    if (consumed != nullptr) *consumed = n;
    return out;
}

std::vector<std::string> pieces(const PreTokenizerSpec& spec, std::string_view input) {
    std::string text, subject;
    prepare_split_text(input, text, subject);
    std::vector<std::string> out;
    for (const TextSpan& s : PreTokenizer(spec).split(subject)) {
        out.push_back(text.substr(s.begin, s.end - s.begin));
    }
    return out;
}

TEST(TokenizerUtf8, LenientDecodeFollowsLlamaCpp) {
    auto decode_all = [](std::string_view s) {
        std::vector<uint32_t> cps;
        for (size_t pos = 0; pos < s.size();) cps.push_back(decode_utf8_lenient(s, pos));
        return cps;
    };
    EXPECT_EQ(decode_all("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
    EXPECT_EQ(decode_all("\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x1F600}));
    // A malformed sequence costs one byte and yields U+FFFD; the rest is read again.
    EXPECT_EQ(decode_all("\xE4\xB8"
                         "a"),
              (std::vector<uint32_t>{0xFFFD, 0xFFFD, 'a'}));
    EXPECT_EQ(decode_all("\x80\xFF"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
    // Overlong forms and surrogates pass, as in llama.cpp.
    EXPECT_EQ(decode_all("\xC0\x80"), (std::vector<uint32_t>{0}));
    EXPECT_EQ(decode_all("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
}

TEST(TokenizerUtf8, StrictValidation) {
    size_t consumed = 0;
    EXPECT_EQ(valid("h\xC3\xA9llo", false, &consumed), "h\xC3\xA9llo");
    EXPECT_EQ(consumed, 6u);
    // An unfinished character waits unless final.
    EXPECT_EQ(valid("ab\xE4\xB8", false, &consumed), "ab");
    EXPECT_EQ(consumed, 2u);
    EXPECT_EQ(valid("ab\xE4\xB8", true, &consumed), "ab\xEF\xBF\xBD");
    EXPECT_EQ(consumed, 4u);
    // Invalid bytes become one U+FFFD per maximal subpart.
    EXPECT_EQ(valid("\xFF"
                    "a",
                    false),
              "\xEF\xBF\xBD"
              "a");
    EXPECT_EQ(valid("\xE0\xA0"
                    "a",
                    false),
              "\xEF\xBF\xBD"
              "a");
    EXPECT_EQ(valid("\xC0\x80", false), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(valid("\xED\xA0\x80", false), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(valid("\xF4\x90\x80\x80", false).size(), 12u);
    // Whole texts: valid throughout, or not (overlong, surrogate, past U+10FFFF, truncated).
    EXPECT_TRUE(is_valid_utf8(""));
    EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
    for (const char* bad : {"\xC0\x80", "a\xED\xA0\x80", "\xF4\x90\x80\x80", "ab\xE4\xB8", "\xFF"})
        EXPECT_FALSE(is_valid_utf8(bad)) << bad;
}

TEST(TokenizerByteLevel, AlphabetRoundTrips) {
    EXPECT_EQ(byte_to_unicode('A'), "A");
    EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // Ġ
    EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // Ċ
    EXPECT_EQ(byte_to_unicode(0xAD), "\xC5\x83");  // the last of the remapped bytes: U+0143
    std::string all, encoded;
    for (int b = 0; b < 256; ++b) {
        all.push_back(static_cast<char>(b));
        encoded.append(byte_to_unicode(static_cast<uint8_t>(b)));
    }
    std::string decoded;
    append_unicode_as_bytes(encoded, decoded);
    EXPECT_EQ(decoded, all);
    // Outside the alphabet: copied through.
    decoded.clear();
    append_unicode_as_bytes("\xE4\xB8\x96", decoded);
    EXPECT_EQ(decoded, "\xE4\xB8\x96");
}

// Whether PCRE2 puts `s` in the class of `pattern`: "\x01" (in no class) on both sides, the
// split gives three pieces exactly when `pattern+` matches `s`.
bool in_class(const std::string& pattern, const std::string& s) {
    const std::string subject = "\x01" + s + "\x01";
    std::vector<TextSpan> out;
    SplitRegex(pattern + "+").split(subject, {0, subject.size()}, out);
    return out.size() == 3;
}

TEST(TokenizerUnicodeCompat, StandInsHaveTheirClassInPcre2) {
    const std::vector<std::pair<UnicodeClass, std::string>> classes = {
        {UnicodeClass::kLetter, "\\p{L}"}, {UnicodeClass::kNumber, "\\p{N}"},
        {UnicodeClass::kMark, "\\p{M}"},   {UnicodeClass::kPunctuation, "\\p{P}"},
        {UnicodeClass::kSymbol, "\\p{S}"}, {UnicodeClass::kSpace, "\\s"},
        {UnicodeClass::kOther, ""}};
    for (const auto& [cls, own] : classes) {
        for (size_t length = 2; length <= 4; ++length) {
            if (cls == UnicodeClass::kSpace && length == 4) continue;  // there are none
            std::string s;
            const uint32_t cp = unicode_stand_in(cls, length);
            append_utf8(s, cp);
            ASSERT_EQ(s.size(), length) << std::hex << cp;
            for (const auto& [other, pattern] : classes) {
                if (pattern.empty()) continue;
                EXPECT_EQ(in_class(pattern, s), other == cls)
                    << "U+" << std::hex << cp << " in " << pattern;
            }
        }
    }
}

TEST(TokenizerUnicodeCompat, NewerCodePointsSplitAsInLlamaCpp) {
    UnicodeClass cls;
    ASSERT_TRUE(unicode_compat_class(0x31350, &cls));  // CJK extension H (Unicode 15)
    EXPECT_EQ(cls, UnicodeClass::kLetter);
    EXPECT_FALSE(unicode_compat_class('a', &cls));
    EXPECT_FALSE(unicode_compat_class(0x4E00, &cls));
    ASSERT_TRUE(unicode_compat_class(0x180E, &cls));  // llama.cpp: not white space
    EXPECT_EQ(cls, UnicodeClass::kOther);

    const PreTokenizerSpec& qwen2 = *find_pre_tokenizer_spec("qwen2");
    EXPECT_EQ(pieces(qwen2, "a\U00031350b"), (std::vector<std::string>{"a\U00031350b"}));
    // U+180E is white space to PCRE2 but not to llama.cpp.
    EXPECT_EQ(pieces(qwen2, "a\u180e\u180eb"),
              (std::vector<std::string>{"a", "\u180e\u180e", "b"}));
}

TEST(TokenizerUnicodeCompat, PrepareKeepsLengthsAndReadsBytesAsLlamaCpp) {
    std::string text, subject;
    prepare_split_text("a\xFF\xED\xA0\x80\xC0\x80z", text, subject);
    // 0xFF -> U+FFFD; the surrogate stays (llama.cpp re-encodes it) but PCRE2 sees U+FEFF;
    // the overlong NUL becomes a real NUL.
    EXPECT_EQ(text, std::string("a\xEF\xBF\xBD\xED\xA0\x80\0z", 9));
    EXPECT_EQ(subject, std::string("a\xEF\xBF\xBD\xEF\xBB\xBF\0z", 9));
}

TEST(TokenizerPreTokenizer, Qwen2AndLlama3Splits) {
    const PreTokenizerSpec& qwen2 = *find_pre_tokenizer_spec("qwen2");
    const PreTokenizerSpec& llama3 = *find_pre_tokenizer_spec("llama-bpe");
    EXPECT_EQ(
        pieces(qwen2, "Hello, world! 12345"),
        (std::vector<std::string>{"Hello", ",", " world", "!", " ", "1", "2", "3", "4", "5"}));
    EXPECT_EQ(pieces(llama3, "Hello, world! 12345"),
              (std::vector<std::string>{"Hello", ",", " world", "!", " ", "123", "45"}));
    EXPECT_EQ(pieces(llama3, "I'M here   now\n\n  x"),
              (std::vector<std::string>{"I", "'M", " here", "  ", " now", "\n\n", " ", " x"}));
    EXPECT_EQ(pieces(llama3, "a  \t"), (std::vector<std::string>{"a", "  \t"}));
    EXPECT_TRUE(pieces(llama3, "").empty());
}

TEST(TokenizerPreTokenizer, MultiPatternSpecsRefinePieces) {
    // default: punctuation runs first, then the GPT-2 pattern inside the rest, then digits.
    const PreTokenizerSpec& def = default_pre_tokenizer_spec();
    EXPECT_EQ(pieces(def, "hi!! 1234567"),
              (std::vector<std::string>{"hi", "!!", " ", "123", "456", "7"}));
    // deepseek-llm's "\s+$" only matches at the very end of a piece.
    const PreTokenizerSpec& ds = *find_pre_tokenizer_spec("deepseek-llm");
    EXPECT_EQ(pieces(ds, "ab  \ncd  "), (std::vector<std::string>{"ab", "  ", "\n", "cd", "  "}));
}

TEST(TokenizerPreTokenizer, EverySpecCompilesAndCoversItsInput) {
    const std::string text = "Hello World's 12345 ÀÉ 你好 😀 \t\n  x ¡¿ Ⅻ '";
    for (std::string_view name : {"default",
                                  "llama-bpe",
                                  "dbrx",
                                  "jais-2",
                                  "qwen2",
                                  "qwen35",
                                  "gpt-2",
                                  "starcoder",
                                  "falcon",
                                  "deepseek-llm",
                                  "deepseek-coder",
                                  "deepseek-v3",
                                  "youtu",
                                  "bloom",
                                  "viking",
                                  "tekken",
                                  "chameleon",
                                  "gpt-4o",
                                  "granite-embed-multi-97m",
                                  "bailingmoe",
                                  "seed-coder",
                                  "laguna",
                                  "exaone-moe",
                                  "minicpm5"}) {
        const PreTokenizerSpec* spec = find_pre_tokenizer_spec(name);
        ASSERT_NE(spec, nullptr) << name;
        std::string joined;
        for (const std::string& p : pieces(*spec, text)) {
            EXPECT_FALSE(p.empty()) << name;
            joined += p;
        }
        EXPECT_EQ(joined, text) << name;
    }
    EXPECT_EQ(find_pre_tokenizer_spec("no-such-thing"), nullptr);
    EXPECT_TRUE(is_unsupported_pre_tokenizer("kimi-k2"));
}

TEST(TokenizerPreTokenizer, LongRunsDoNotExhaustTheRegexStack) {
    // The gpt-4o pattern's lookahead groups overflow PCRE2's default JIT stack on long words.
    const PreTokenizerSpec& gpt4o = *find_pre_tokenizer_spec("gpt-4o");
    const std::string word(200000, 'a');
    EXPECT_EQ(pieces(gpt4o, word).size(), 1u);
    EXPECT_EQ(pieces(gpt4o, std::string(100000, ' ') + "x").size(), 2u);
}

TEST(TokenizerPreTokenizer, BadPatternIsAnError) {
    EXPECT_THROW(SplitRegex("(unclosed"), Error);
}

}  // namespace
}  // namespace tandem
