// The code points whose regex class differs between llama.cpp's Unicode 15.1 tables
// (src/unicode-data.cpp of llama.cpp v0.4.0) and PCRE2 10.42, and their stand-ins.
#include "text/unicode_compat.h"

#include <algorithm>
#include <array>

#include "text/utf8.h"

namespace tandem {
namespace {

struct CompatRange {
    uint32_t first;
    uint32_t last;
    UnicodeClass cls;
};

// Every code point where PCRE2's \p{L}, \p{N}, \p{M}, \p{P}, \p{S} or \s disagrees with
// llama.cpp, found by testing all code points against both; the class is llama.cpp's. Ranges
// never mix UTF-8 lengths. Almost all are letters, marks and emoji new in Unicode 15.
constexpr std::array kCompatRanges = {
    CompatRange{0x00CF3, 0x00CF3, UnicodeClass::kMark},
    CompatRange{0x00ECE, 0x00ECE, UnicodeClass::kMark},
    CompatRange{0x0180E, 0x0180E, UnicodeClass::kOther},
    CompatRange{0x02FFC, 0x02FFF, UnicodeClass::kSymbol},
    CompatRange{0x031EF, 0x031EF, UnicodeClass::kSymbol},
    CompatRange{0x10EFD, 0x10EFF, UnicodeClass::kMark},
    CompatRange{0x1123F, 0x11240, UnicodeClass::kLetter},
    CompatRange{0x11241, 0x11241, UnicodeClass::kMark},
    CompatRange{0x11B00, 0x11B09, UnicodeClass::kPunctuation},
    CompatRange{0x11F00, 0x11F01, UnicodeClass::kMark},
    CompatRange{0x11F02, 0x11F02, UnicodeClass::kLetter},
    CompatRange{0x11F03, 0x11F03, UnicodeClass::kMark},
    CompatRange{0x11F04, 0x11F10, UnicodeClass::kLetter},
    CompatRange{0x11F12, 0x11F33, UnicodeClass::kLetter},
    CompatRange{0x11F34, 0x11F3A, UnicodeClass::kMark},
    CompatRange{0x11F3E, 0x11F42, UnicodeClass::kMark},
    CompatRange{0x11F43, 0x11F4F, UnicodeClass::kPunctuation},
    CompatRange{0x11F50, 0x11F59, UnicodeClass::kNumber},
    CompatRange{0x1342F, 0x1342F, UnicodeClass::kLetter},
    CompatRange{0x13440, 0x13440, UnicodeClass::kMark},
    CompatRange{0x13441, 0x13446, UnicodeClass::kLetter},
    CompatRange{0x13447, 0x13455, UnicodeClass::kMark},
    CompatRange{0x1B132, 0x1B132, UnicodeClass::kLetter},
    CompatRange{0x1B155, 0x1B155, UnicodeClass::kLetter},
    CompatRange{0x1D2C0, 0x1D2D3, UnicodeClass::kNumber},
    CompatRange{0x1DF25, 0x1DF2A, UnicodeClass::kLetter},
    CompatRange{0x1E030, 0x1E06D, UnicodeClass::kLetter},
    CompatRange{0x1E08F, 0x1E08F, UnicodeClass::kMark},
    CompatRange{0x1E4D0, 0x1E4EB, UnicodeClass::kLetter},
    CompatRange{0x1E4EC, 0x1E4EF, UnicodeClass::kMark},
    CompatRange{0x1E4F0, 0x1E4F9, UnicodeClass::kNumber},
    CompatRange{0x1F6DC, 0x1F6DC, UnicodeClass::kSymbol},
    CompatRange{0x1F774, 0x1F776, UnicodeClass::kSymbol},
    CompatRange{0x1F77B, 0x1F77F, UnicodeClass::kSymbol},
    CompatRange{0x1F7D9, 0x1F7D9, UnicodeClass::kSymbol},
    CompatRange{0x1FA75, 0x1FA77, UnicodeClass::kSymbol},
    CompatRange{0x1FA87, 0x1FA88, UnicodeClass::kSymbol},
    CompatRange{0x1FAAD, 0x1FAAF, UnicodeClass::kSymbol},
    CompatRange{0x1FABB, 0x1FABD, UnicodeClass::kSymbol},
    CompatRange{0x1FABF, 0x1FABF, UnicodeClass::kSymbol},
    CompatRange{0x1FACE, 0x1FACF, UnicodeClass::kSymbol},
    CompatRange{0x1FADA, 0x1FADB, UnicodeClass::kSymbol},
    CompatRange{0x1FAE8, 0x1FAE8, UnicodeClass::kSymbol},
    CompatRange{0x1FAF7, 0x1FAF8, UnicodeClass::kSymbol},
    CompatRange{0x2B739, 0x2B739, UnicodeClass::kLetter},
    CompatRange{0x2EBF0, 0x2EE5D, UnicodeClass::kLetter},
    CompatRange{0x31350, 0x323AF, UnicodeClass::kLetter},
};

}  // namespace

bool unicode_compat_class(uint32_t cp, UnicodeClass* cls) {
    if (cp < kCompatRanges.front().first) return false;
    auto it = std::upper_bound(kCompatRanges.begin(), kCompatRanges.end(), cp,
                               [](uint32_t c, const CompatRange& r) { return c < r.first; });
    if (it == kCompatRanges.begin()) return false;
    --it;
    if (cp > it->last) return false;
    *cls = it->cls;
    return true;
}

uint32_t unicode_stand_in(UnicodeClass cls, size_t utf8_length) {
    // Chosen so that 3-byte stand-ins fall in U+0800..U+4E00 like the 3-byte code points of
    // the table (deepseek's [ࠀ-一] range) and 4-byte ones outside every literal range.
    switch (cls) {
        case UnicodeClass::kLetter:
            return utf8_length == 2 ? 0x00C0 : utf8_length == 3 ? 0x0904 : 0x20000;
        case UnicodeClass::kNumber:
            return utf8_length == 2 ? 0x00B2 : utf8_length == 3 ? 0x2460 : 0x1D7CE;
        case UnicodeClass::kMark:
            return utf8_length == 2 ? 0x0300 : utf8_length == 3 ? 0x20D0 : 0x101FD;
        case UnicodeClass::kPunctuation:
            return utf8_length == 2 ? 0x00A1 : utf8_length == 3 ? 0x2010 : 0x10100;
        case UnicodeClass::kSymbol:
            return utf8_length == 2 ? 0x00A6 : utf8_length == 3 ? 0x2190 : 0x1F600;
        case UnicodeClass::kSpace:
            return utf8_length == 2 ? 0x00A0 : 0x2000;  // no 4-byte spaces exist
        case UnicodeClass::kOther:
            return utf8_length == 2 ? 0x00AD : utf8_length == 3 ? 0x200B : 0xE0001;
    }
    return 0x200B;
}

void prepare_split_text(std::string_view input, std::string& text, std::string& subject) {
    text.clear();
    subject.clear();
    text.reserve(input.size());
    subject.reserve(input.size());
    size_t pos = 0;
    while (pos < input.size()) {
        const uint8_t b = static_cast<uint8_t>(input[pos]);
        if (b < 0x80) {  // the common case
            text.push_back(static_cast<char>(b));
            subject.push_back(static_cast<char>(b));
            ++pos;
            continue;
        }
        uint32_t cp = decode_utf8_lenient(input, pos);
        if (cp > 0x10FFFF) cp = kReplacementChar;  // llama.cpp cannot encode these and throws
        const size_t before = text.size();
        append_utf8(text, cp);
        const size_t length = text.size() - before;
        UnicodeClass cls;
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            // A lone surrogate (llama.cpp's lenient decoder lets them through): category Cs,
            // which no split pattern names; PCRE2 refuses it in UTF mode. U+FEFF is "other" too
            // and, like the surrogates and unlike U+200B, outside deepseek's literal ranges.
            append_utf8(subject, 0xFEFF);
        } else if (unicode_compat_class(cp, &cls)) {
            append_utf8(subject, unicode_stand_in(cls, length));
        } else {
            subject.append(text, before, length);
        }
    }
}

}  // namespace tandem
