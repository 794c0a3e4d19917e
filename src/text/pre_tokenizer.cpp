// Runs a pre-tokenizer's patterns one after the other, each over the pieces the previous
// ones cut (llama.cpp's unicode_regex_split).
#include "text/pre_tokenizer.h"

#include <string>

namespace tandem {
namespace {

// llama.cpp's splitter knows only the major categories: \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and
// \p{Lo} all mean "letter" there (unicode.cpp, k_ucat_enum), so they do here too.
std::string adapt_pattern(std::string_view pattern) {
    std::string out(pattern);
    for (std::string_view sub : {"\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}"}) {
        for (size_t at = out.find(sub); at != std::string::npos; at = out.find(sub, at)) {
            out.replace(at, sub.size(), "\\p{L}");
        }
    }
    return out;
}

}  // namespace

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec) {
    regexes_.reserve(spec.patterns.size());
    for (std::string_view pattern : spec.patterns) regexes_.emplace_back(adapt_pattern(pattern));
}

std::vector<TextSpan> PreTokenizer::split(std::string_view subject) const {
    std::vector<TextSpan> pieces;
    if (subject.empty()) return pieces;
    pieces.push_back({0, subject.size()});
    std::vector<TextSpan> next;
    for (const SplitRegex& regex : regexes_) {
        next.clear();
        next.reserve(pieces.size() * 2);
        for (const TextSpan& piece : pieces) regex.split(subject, piece, next);
        pieces.swap(next);
    }
    return pieces;
}

}  // namespace tandem
