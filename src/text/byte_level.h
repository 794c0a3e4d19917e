// The byte-level alphabet of GPT-2 BPE vocabularies: each of the 256 bytes is written as one
// printable code point (printable Latin-1 bytes as themselves, the rest as U+0100 onwards), so
// token texts and merges are strings over that alphabet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// The UTF-8 text of the code point that stands for byte `b` (one or two bytes).
std::string_view byte_to_unicode(uint8_t b);

// Appends the bytes that a byte-level token text stands for. A code point outside the
// alphabet (possible only in hand-made vocabularies) is copied through as UTF-8.
void append_unicode_as_bytes(std::string_view text, std::string& out);

}  // namespace tandem
