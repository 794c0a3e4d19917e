// UTF-8 helpers: lenient decoding (llama.cpp's reading) and strict validation for output.
#include "text/utf8.h"

namespace tandem {

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

uint32_t decode_utf8_lenient(std::string_view text, size_t& pos) {
    auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    auto is_cont = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
    const uint8_t b0 = byte(pos);
    if (b0 < 0x80) {
        pos += 1;
        return b0;
    }
    size_t n = 0;
    uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        cp = b0 & 0x07;
    } else {
        pos += 1;  // a stray continuation byte or 0xF8..0xFF
        return kReplacementChar;
    }
    for (size_t i = 1; i < n; ++i) {
        if (!is_cont(pos + i)) {
            pos += 1;
            return kReplacementChar;
        }
        cp = (cp << 6) | (byte(pos + i) & 0x3F);
    }
    pos += n;
    return cp;
}

int utf8_valid_sequence_length(std::string_view text, size_t pos) {
    auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t b0 = byte(pos);
    if (b0 < 0x80) return 1;
    int n;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        n = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (int i = 1; i < n; ++i) {
        if (pos + i >= text.size()) return -1;
        const uint8_t b = byte(pos + i);
        const uint8_t l = i == 1 ? lo : 0x80;
        const uint8_t h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) return 0;
    }
    return n;
}

bool is_valid_utf8(std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
        const int n = utf8_valid_sequence_length(text, pos);
        if (n <= 0) return false;
        pos += static_cast<size_t>(n);
    }
    return true;
}

size_t append_valid_utf8(std::string_view in, std::string& out, bool final) {
    size_t pos = 0;
    while (pos < in.size()) {
        const int n = utf8_valid_sequence_length(in, pos);
        if (n > 0) {
            out.append(in.substr(pos, n));
            pos += n;
        } else if (n < 0 && !final) {
            break;  // wait for the rest of this character
        } else {
            // One U+FFFD per maximal subpart: the lead byte plus the bytes that still formed a
            // valid prefix; a truncated tail (only when `final`) is one subpart.
            size_t end = pos + 1;
            while (end < in.size() && utf8_valid_sequence_length(in.substr(0, end + 1), pos) < 0) {
                ++end;
            }
            append_utf8(out, kReplacementChar);
            pos = end;
        }
    }
    return pos;
}

}  // namespace tandem
