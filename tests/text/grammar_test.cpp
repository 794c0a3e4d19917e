// GBNF grammars: parsing and its errors, UTF-8 byte sequences of code point ranges, matching
// bytes, and the tokens a state allows (the vocabulary trie against a brute-force check).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/utf8.h"

namespace tandem {
namespace {

GrammarMatcher matcher(const std::string& gbnf) {
    return GrammarMatcher(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
}

std::string parse_error(const std::string& gbnf) {
    try {
        Grammar::parse(gbnf);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Utf8ByteSequences, EveryCodePointMatchedByExactlyOneSequence) {
    const auto seqs = utf8_byte_sequences(0, 0x10FFFF);
    auto matches = [](const std::vector<ByteRange>& seq, const std::string& bytes) {
        if (seq.size() != bytes.size()) return false;
        for (size_t i = 0; i < seq.size(); ++i) {
            const auto b = static_cast<uint8_t>(bytes[i]);
            if (b < seq[i].lo || b > seq[i].hi) return false;
        }
        return true;
    };
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x20000 ? 1 : 97)) {
        std::string bytes;
        append_utf8(bytes, cp);
        int n = 0;
        for (const auto& s : seqs) n += matches(s, bytes);
        const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
        ASSERT_EQ(n, surrogate ? 0 : 1) << "U+" << std::hex << cp;
    }
    // A sub-range matches its own code points and none outside it.
    const auto sub = utf8_byte_sequences(0x3A0, 0x1F600);
    for (uint32_t cp : {0x39Fu, 0x3A0u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x1F600u, 0x1F601u}) {
        std::string bytes;
        append_utf8(bytes, cp);
        int n = 0;
        for (const auto& s : sub) n += matches(s, bytes);
        EXPECT_EQ(n, cp >= 0x3A0 && cp <= 0x1F600 ? 1 : 0) << std::hex << cp;
    }
}

TEST(Grammar, MatchesLiteralsClassesGroupsAndRepetitions) {
    auto m = matcher(R"(
        # a comment
        root ::= greeting " " name ("!" | "?")?
        greeting ::= "hello" | "hi"   # trailing comment
        name ::= [A-Z] [a-z]{1,3}
    )");
    EXPECT_TRUE(m.matches("hello Bob"));
    EXPECT_TRUE(m.matches("hi Anna!"));
    EXPECT_TRUE(m.matches("hi Al?"));
    EXPECT_FALSE(m.matches("hi A"));       // too short a name
    EXPECT_FALSE(m.matches("hi Albert"));  // too long
    EXPECT_FALSE(m.matches("hey Bob"));
    EXPECT_FALSE(m.matches("hello bob"));
    EXPECT_FALSE(m.matches("hello Bob!!"));
    // A prefix is alive but not accepted.
    EXPECT_FALSE(m.accepting(m.advance(m.start(), "hello B")));
    EXPECT_TRUE(m.can_continue(m.advance(m.start(), "hello B")));
    EXPECT_EQ(m.advance(m.start(), "x"), GrammarMatcher::kDead);
}

TEST(Grammar, StarPlusOptionalAndCounts) {
    auto m = matcher(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{0,2})");
    EXPECT_TRUE(m.matches("bdde"));
    EXPECT_TRUE(m.matches("aaabbbcddeeeff"));
    EXPECT_FALSE(m.matches("dde"));      // b+ needs one
    EXPECT_FALSE(m.matches("bdeee"));    // d{2}
    EXPECT_FALSE(m.matches("bddefff"));  // f{0,2}
    EXPECT_FALSE(m.matches("bdd"));      // e{1,}
    // A quantifier after a multi-character literal repeats the whole literal.
    auto w = matcher(R"(root ::= "ab"+)");
    EXPECT_TRUE(w.matches("ababab"));
    EXPECT_FALSE(w.matches("aba"));
}

TEST(Grammar, UnicodeClassesMatchBytesAcrossSplits) {
    auto m = matcher(R"(root ::= [^"\\\x00-\x1F]+)");
    EXPECT_TRUE(m.matches("plain ascii"));
    EXPECT_TRUE(m.matches("日本語 😀 «ok»"));
    EXPECT_FALSE(m.matches("quote\""));
    EXPECT_FALSE(m.matches("tab\x01"));
    auto greek = matcher(R"(root ::= "é" "\u00E8" [α-ω] .)");
    EXPECT_TRUE(greek.matches("éèβ😀"));
    EXPECT_TRUE(greek.matches("éèωx"));
    EXPECT_FALSE(greek.matches("éèAx"));
    EXPECT_FALSE(greek.matches("éèβ"));
    // Invalid UTF-8 is refused: a lone continuation byte, an overlong form, a surrogate.
    EXPECT_FALSE(m.matches("\x80"));
    EXPECT_FALSE(m.matches("\xC0\xAF"));
    EXPECT_FALSE(m.matches("\xED\xA0\x80"));
    // Byte by byte, the middle of a character is a live state.
    const std::string emoji = "😀";
    GrammarMatcher::State s = m.start();
    for (size_t i = 0; i + 1 < emoji.size(); ++i) {
        s = m.advance(s, static_cast<uint8_t>(emoji[i]));
        ASSERT_NE(s, GrammarMatcher::kDead);
        EXPECT_FALSE(m.accepting(s));
    }
    EXPECT_TRUE(m.accepting(m.advance(s, static_cast<uint8_t>(emoji.back()))));
}

TEST(Grammar, RecursionAndEmptyAlternatives) {
    auto m = matcher(R"(
root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list | [0-9]+
)");
    EXPECT_TRUE(m.matches("[]"));
    EXPECT_TRUE(m.matches("[1,[2,[]],[[3]]]"));
    EXPECT_FALSE(m.matches("[1,]"));
    EXPECT_FALSE(m.matches("[[1]"));
    auto e = matcher("root ::= \"\"\nother ::= \"x\"");
    EXPECT_TRUE(e.matches(""));
    EXPECT_FALSE(e.matches("x"));
    // Alternatives may continue on the next line after '|' or start the line with '|'.
    auto c = matcher("root ::= \"a\" |\n  \"b\"\n  | \"c\"\n");
    EXPECT_TRUE(c.matches("b"));
    EXPECT_TRUE(c.matches("c"));
}

TEST(Grammar, ErrorsSayWhatAndWhere) {
    {
        const std::string e = parse_error("root ::= \"abc");
        EXPECT_NE(e.find("line 1"), std::string::npos) << e;
        EXPECT_NE(e.find("unterminated literal"), std::string::npos) << e;
    }
    EXPECT_NE(parse_error("root ::= [a-").find("unterminated character class"), std::string::npos);
    EXPECT_NE(parse_error("root ::= x\n").find("rule 'x' is used (line 1) but not defined"),
              std::string::npos);
    EXPECT_NE(parse_error("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
    EXPECT_NE(parse_error("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
    EXPECT_NE(parse_error("root ::= a\na ::= b? root\nb ::= \"b\"").find("left-recursive"),
              std::string::npos);
    EXPECT_NE(parse_error("root ::= \"a\"\n\nroot ::= \"b\"").find("line 3"), std::string::npos);
    EXPECT_NE(parse_error("root ::= * \"a\"").find("nothing to repeat"), std::string::npos);
    EXPECT_NE(parse_error("root ::= \"a\"{3,2}").find("n below m"), std::string::npos);
    EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
    EXPECT_NE(parse_error("root ::= (\"a\"").find("expected ')'"), std::string::npos);
    EXPECT_NE(parse_error("root \"a\"").find("expected '::='"), std::string::npos);
    EXPECT_NE(parse_error("root ::= [^\\x00-\\U0010FFFF]").find("matches nothing"),
              std::string::npos);
    EXPECT_NE(parse_error("root ::= \"a\"{999999}").find("above"), std::string::npos);
    // Limits that keep a hostile grammar from exhausting the stack.
    EXPECT_NE(parse_error("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')'))
                  .find("parentheses nest deeper"),
              std::string::npos);
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 3000; ++i)
        chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    chain += "r3000 ::= \"x\"\n";
    EXPECT_NE(parse_error(chain).find("rules reach rules"), std::string::npos);
}

// The trie walk must allow exactly the tokens whose bytes keep the grammar alive.
TEST(TokenTrie, AllowedTokensEqualBruteForce) {
    std::mt19937 rng(7);
    std::vector<std::string> pieces = {
        "",   "{", "}", "\"",   "\"a",  "a",   "ab",   "abc", "b",    "1",   "12",  "123", ",",
        ", ", " ", "é", "\xC3", "\xA9", "\"}", "null", "nul", "true", "{\"", "\":", ":",   "x"};
    const std::string alphabet = "{}\":,ab1 é";
    for (int i = 0; i < 300; ++i) {
        std::string p;
        const int n = 1 + static_cast<int>(rng() % 5);
        for (int j = 0; j < n; ++j) p += alphabet[rng() % alphabet.size()];
        pieces.push_back(p);
    }
    pieces.push_back("abc");  // the same bytes twice
    TokenTrie trie(pieces);
    auto m = matcher(R"(
root ::= "{" (pair ("," " "? pair)*)? "}"
pair ::= "\"" [a-zé]+ "\"" ":" " "? value
value ::= [0-9]+ | "null" | "true" | root
)");
    // Walk a valid document, checking every prefix's allowed set.
    const std::string doc = "{\"ab\": 12,\"é\":{\"a\":null}, \"b\":true}";
    GrammarMatcher::State state = m.start();
    std::vector<uint64_t> bits;
    for (size_t i = 0; i <= doc.size(); ++i) {
        trie.allowed(m, state, bits);
        for (size_t id = 0; id < pieces.size(); ++id) {
            const bool expected =
                !pieces[id].empty() && m.advance(state, pieces[id]) != GrammarMatcher::kDead;
            ASSERT_EQ(((bits[id >> 6] >> (id & 63)) & 1) != 0, expected)
                << "prefix " << doc.substr(0, i) << " token '" << pieces[id] << "'";
        }
        if (i < doc.size()) state = m.advance(state, static_cast<uint8_t>(doc[i]));
        ASSERT_NE(state, GrammarMatcher::kDead);
    }
    EXPECT_TRUE(m.accepting(state));
}

}  // namespace
}  // namespace tandem
