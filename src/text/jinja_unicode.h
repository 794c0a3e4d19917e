// UTF-8 helpers for the Jinja interpreter: JavaScript whitespace (the reference trims and
// splits with JS `\s`), code point splitting and encoding, ASCII case mapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja {

// Byte length of the JavaScript whitespace character starting at `pos` (`\s`: ASCII
// whitespace, NBSP, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000, U+FEFF), or 0.
size_t js_space_at(std::string_view s, size_t pos);
// Byte length of the JavaScript whitespace character that ends just before `end`, or 0.
size_t js_space_before(std::string_view s, size_t end);
// String.prototype.trim / trimStart / trimEnd.
std::string_view js_trim(std::string_view s, bool left = true, bool right = true);

// Python str.strip(chars): removes code points found in `chars` from the chosen ends.
std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right);

// Byte length of the UTF-8 sequence starting with `lead` (1 for invalid bytes).
size_t utf8_seq_len(unsigned char lead);
// Splits into code points (an invalid byte is its own piece).
std::vector<std::string_view> utf8_chars(std::string_view s);
// Number of code points.
size_t utf8_length(std::string_view s);
// Appends code point `cp` as UTF-8 (surrogates are written as three bytes, WTF-8 style).
void append_utf8(std::string& out, uint32_t cp);

std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
// JavaScript `\w` (ASCII letters, digits, underscore).
inline bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace tandem::jinja
