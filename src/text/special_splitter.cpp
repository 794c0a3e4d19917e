// Special-token matching: each matchable token in turn (longest first) cuts every text
// fragment at each of its occurrences, left to right.
#include "text/special_splitter.h"

#include <array>

namespace tandem {

std::vector<TextFragment> split_special_tokens(std::string_view text, const Vocab& vocab,
                                               bool parse_special) {
    std::vector<TextFragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({0, text.size(), kNoToken});

    // Most special tokens start with '<' or '['; skip those whose first byte never occurs.
    std::array<bool, 256> present{};
    for (char c : text) present[static_cast<uint8_t>(c)] = true;

    std::vector<TextFragment> next;
    for (TokenId id : vocab.matchable_tokens()) {
        if (!parse_special && vocab.has_attr(id, kTokenAttrControl | kTokenAttrUnknown)) continue;
        const std::string& token = vocab.text(id);
        if (!present[static_cast<uint8_t>(token[0])] || token.size() > text.size()) continue;

        bool found = false;
        next.clear();
        for (const TextFragment& f : fragments) {
            if (f.token != kNoToken) {
                next.push_back(f);
                continue;
            }
            // Search only inside the fragment: a match must not run past its end.
            const std::string_view upto = text.substr(0, f.end);
            size_t begin = f.begin;
            for (size_t at = upto.find(token, begin); at != std::string_view::npos;
                 at = upto.find(token, begin)) {
                found = true;
                if (at > begin) next.push_back({begin, at, kNoToken});
                next.push_back({at, at + token.size(), id});
                begin = at + token.size();
            }
            if (begin < f.end) next.push_back({begin, f.end, kNoToken});
        }
        if (found) fragments.swap(next);
    }
    return fragments;
}

}  // namespace tandem
