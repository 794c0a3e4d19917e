// libFuzzer target: any GBNF text either fails with tandem::Error or gives a grammar whose
// matcher follows the same text as bytes and walks a small vocabulary's trie; within the
// matcher's limits, never a crash, hang, leak or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::vector<std::string> kPieces = {"a", "ab", "{", "}", "\"", " ", "\n", "0",
                                                     "12", "true", "é", "\xC3", "\xA9", "<",
                                                     "<tool_call>", "\xF0\x9F\x98\x80", ""};
    static const tandem::TokenTrie kTrie(kPieces);
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        auto grammar = std::make_shared<const tandem::Grammar>(tandem::Grammar::parse(text));
        tandem::GrammarMatcher m(grammar);
        std::vector<uint64_t> allowed;
        tandem::GrammarMatcher::State s = m.start();
        for (size_t i = 0; i < text.size() && i < 256 && s != tandem::GrammarMatcher::kDead; ++i) {
            kTrie.allowed(m, s, allowed);
            s = m.advance(s, static_cast<uint8_t>(text[i]));
        }
    } catch (const tandem::Error&) {
    }
    return 0;
}
