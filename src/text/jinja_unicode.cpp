// UTF-8 helpers for the Jinja interpreter.
#include "text/jinja_unicode.h"

namespace tandem::jinja {
namespace {

// Decodes the code point at `pos` (`len` gets its byte length); invalid bytes decode as
// themselves with length 1 so that nothing is ever skipped or read past the end.
uint32_t decode_at(std::string_view s, size_t pos, size_t* len) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    size_t n = utf8_seq_len(c);
    if (n == 1 || pos + n > s.size()) {
        *len = 1;
        return c;
    }
    uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t i = 1; i < n; ++i) {
        unsigned char cc = static_cast<unsigned char>(s[pos + i]);
        if ((cc & 0xC0) != 0x80) {
            *len = 1;
            return c;
        }
        cp = (cp << 6) | (cc & 0x3F);
    }
    *len = n;
    return cp;
}

bool is_js_space(uint32_t cp) {
    switch (cp) {
        case 0x09:
        case 0x0A:
        case 0x0B:
        case 0x0C:
        case 0x0D:
        case 0x20:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
        case 0xFEFF:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

}  // namespace

size_t utf8_seq_len(unsigned char lead) {
    if (lead < 0xC2) return 1;  // ASCII, continuation byte, or overlong lead
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    if (lead < 0xF5) return 4;
    return 1;
}

size_t js_space_at(std::string_view s, size_t pos) {
    if (pos >= s.size()) return 0;
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) return (c == ' ' || (c >= 0x09 && c <= 0x0D)) ? 1 : 0;
    size_t len = 0;
    uint32_t cp = decode_at(s, pos, &len);
    return len > 1 && is_js_space(cp) ? len : 0;
}

size_t js_space_before(std::string_view s, size_t end) {
    if (end == 0) return 0;
    unsigned char c = static_cast<unsigned char>(s[end - 1]);
    if (c < 0x80) return (c == ' ' || (c >= 0x09 && c <= 0x0D)) ? 1 : 0;
    // Every non-ASCII JS space is 2 or 3 bytes long.
    for (size_t n = 2; n <= 3 && n <= end; ++n) {
        if (js_space_at(s, end - n) == n) return n;
    }
    return 0;
}

std::string_view js_trim(std::string_view s, bool left, bool right) {
    size_t begin = 0, end = s.size();
    if (left) {
        while (size_t n = js_space_at(s, begin)) begin += n;
    }
    if (right) {
        while (end > begin) {
            size_t n = js_space_before(s, end);
            if (n == 0) break;
            end -= n;
        }
    }
    return s.substr(begin, end - begin);
}

std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
    std::vector<std::string_view> set = utf8_chars(chars);
    std::vector<std::string_view> pieces = utf8_chars(s);
    auto in_set = [&](std::string_view ch) {
        for (auto c : set) {
            if (c == ch) return true;
        }
        return false;
    };
    size_t first = 0, last = pieces.size();
    if (left) {
        while (first < last && in_set(pieces[first])) ++first;
    }
    if (right) {
        while (last > first && in_set(pieces[last - 1])) --last;
    }
    if (first == last) return s.substr(0, 0);
    size_t begin = static_cast<size_t>(pieces[first].data() - s.data());
    size_t end = static_cast<size_t>(pieces[last - 1].data() - s.data()) + pieces[last - 1].size();
    return s.substr(begin, end - begin);
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
    std::vector<std::string_view> out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) {
        size_t n = 0;
        decode_at(s, pos, &n);
        out.push_back(s.substr(pos, n));
        pos += n;
    }
    return out;
}

size_t utf8_length(std::string_view s) {
    size_t count = 0;
    for (size_t pos = 0; pos < s.size(); ++count) {
        size_t n = 0;
        decode_at(s, pos, &n);
        pos += n;
    }
    return count;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string ascii_upper(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    return out;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

}  // namespace tandem::jinja
