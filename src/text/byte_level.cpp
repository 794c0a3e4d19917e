// GPT-2's byte <-> code point table (openai/gpt-2 encoder.py bytes_to_unicode).
#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace tandem {
namespace {

// Bytes that print as themselves: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF. The other 68
// bytes get U+0100, U+0101, ... in byte order.
bool prints_as_itself(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

struct ByteTables {
    std::array<std::string, 256> to_unicode;
    std::array<int16_t, 0x200> to_byte;  // code point -> byte, -1 where none
    ByteTables() {
        to_byte.fill(-1);
        int next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cp = prints_as_itself(b) ? b : next++;
            append_utf8(to_unicode[b], cp);
            to_byte[cp] = static_cast<int16_t>(b);
        }
    }
};

const ByteTables& tables() {
    static const ByteTables t;
    return t;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t b) {
    return tables().to_unicode[b];
}

void append_unicode_as_bytes(std::string_view text, std::string& out) {
    const ByteTables& t = tables();
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t start = pos;
        const uint32_t cp = decode_utf8_lenient(text, pos);
        if (cp < t.to_byte.size() && t.to_byte[cp] >= 0) {
            out.push_back(static_cast<char>(t.to_byte[cp]));
        } else {
            out.append(text.substr(start, pos - start));
        }
    }
}

}  // namespace tandem
