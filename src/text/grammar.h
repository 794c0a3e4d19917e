// Grammars over bytes: GBNF, the grammar notation of llama.cpp, read and compiled to rules whose
// terminals are sets of bytes. Literals and character classes name Unicode code points; they are
// compiled to their UTF-8 byte sequences, so a matcher works on the bytes of tokens, which may
// end in the middle of a character.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

using ByteSet = std::bitset<256>;

class Grammar {
  public:
    // Reads GBNF: rules `name ::= alternatives` (a rule ends at the end of its line, except
    // inside parentheses or after `|`); "literals", [classes], [^negated classes], `.` (any
    // character), (groups), rule names, and the quantifiers *, +, ?, {m}, {m,}, {m,n}; `#`
    // comments. Escapes as in llama.cpp: \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH.
    // Throws Error "grammar: line L, column C: ..." for a syntax error, and "grammar: ..." for
    // an undefined rule, a missing root, or left recursion (which no matcher could follow).
    static Grammar parse(std::string_view text, std::string_view root = "root");

    // The compiled form: each alternative is a run of symbols ended by a kEnd symbol.
    struct Symbol {
        enum Kind : uint8_t { kBytes, kRule, kEnd };
        Kind kind = kEnd;
        uint32_t index = 0;  // kBytes: a byte set; kRule: a rule
    };
    const std::vector<Symbol>& symbols() const { return symbols_; }
    // Where each alternative of `rule` starts in symbols().
    const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
    const ByteSet& byte_set(uint32_t index) const { return byte_sets_[index]; }
    uint32_t root() const { return root_; }
    size_t n_rules() const { return rules_.size(); }
    // A rule's name (helper rules get their parent's name and a suffix), for messages.
    const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

  private:
    friend class GrammarBuilder;
    std::vector<Symbol> symbols_;
    std::vector<std::vector<uint32_t>> rules_;
    std::vector<ByteSet> byte_sets_;
    std::vector<std::string> names_;
    uint32_t root_ = 0;
};

// The UTF-8 encodings of the code points lo..hi (surrogates left out) as sequences of byte
// ranges: each sequence matches exactly the encodings of one sub-range, and together they
// match all of them and nothing else.
struct ByteRange {
    uint8_t lo, hi;
};
std::vector<std::vector<ByteRange>> utf8_byte_sequences(uint32_t lo, uint32_t hi);

}  // namespace tandem
