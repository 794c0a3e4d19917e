// UTF-8 helpers for the tokenizers: llama.cpp's lenient reading of arbitrary bytes, and strict
// validation for text handed to users (streaming output must be valid UTF-8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (any value up to 0x1FFFFF; surrogates are encoded as
// three bytes like any other code point, which is what llama.cpp does).
void append_utf8(std::string& out, uint32_t cp);

// Length of the sequence that starts with `lead`, judged from its high nibble alone, as
// SentencePiece and llama.cpp split text into characters (continuation bytes count as 1).
inline size_t utf8_length_from_lead(uint8_t lead) {
    static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLengths[lead >> 4];
}

// Decodes one code point at `pos` the way llama.cpp's unicode_cpt_from_utf8 does: overlong
// forms and surrogates are accepted, a malformed or truncated sequence yields U+FFFD and
// consumes exactly one byte. Advances `pos`.
uint32_t decode_utf8_lenient(std::string_view text, size_t& pos);

// Length of the strictly valid UTF-8 sequence at `pos` (1..4), 0 when the bytes there are
// not a complete valid sequence, or -1 when they are a valid but truncated prefix.
int utf8_valid_sequence_length(std::string_view text, size_t pos);

// Whether `text` is strictly valid UTF-8 throughout (no truncated last character).
bool is_valid_utf8(std::string_view text);

// Appends to `out` the longest prefix of `in` made of complete characters; invalid bytes
// become U+FFFD (one per maximal invalid subpart, as the Unicode standard recommends). Returns
// how many bytes of `in` were consumed: the rest is a valid but incomplete last character.
// With `final` set everything is consumed, a truncated tail becoming U+FFFD.
size_t append_valid_utf8(std::string_view in, std::string& out, bool final);

}  // namespace tandem
