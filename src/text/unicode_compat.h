// Prepares text for the pre-tokenizer regexes so that PCRE2 classifies every code point as
// llama.cpp does: llama.cpp reads malformed UTF-8 as U+FFFD and has newer Unicode tables
// (15.1) than the system PCRE2, so code points whose class differs are swapped for stand-ins.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// The classes the split regexes can tell apart (\p{L}, \p{N}, \p{M}, \p{P}, \p{S}, \s).
enum class UnicodeClass : uint8_t {
    kLetter,
    kNumber,
    kMark,
    kPunctuation,
    kSymbol,
    kSpace,
    kOther
};

// llama.cpp's class of `cp` where it differs from what PCRE2 10.42 (Unicode 14) says; false
// when PCRE2 agrees with llama.cpp.
bool unicode_compat_class(uint32_t cp, UnicodeClass* cls);

// A code point PCRE2 puts in `cls`, with a UTF-8 encoding of `utf8_length` bytes (2..4), that
// lies outside every literal range of the supported split patterns where the code points it
// stands for do (so literal classes like [一-龥ࠀ-一] still match the same).
uint32_t unicode_stand_in(UnicodeClass cls, size_t utf8_length);

// Fills `text` with llama.cpp's reading of `input` (each malformed byte becomes U+FFFD) and
// `subject` with the same text, byte for byte the same length, as PCRE2 should see it.
void prepare_split_text(std::string_view input, std::string& text, std::string& subject);

}  // namespace tandem
