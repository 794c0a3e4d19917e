// SentencePiece BPE: a work queue of adjacent symbol pairs whose concatenation is a piece,
// best score first (leftmost on ties), merged until none is left.
#include "text/spm_tokenizer.h"

#include <queue>
#include <string>

#include "base/error.h"
#include "text/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 ▁

}  // namespace

SpmTokenizer::SpmTokenizer(const Vocab& vocab) : vocab_(vocab) {
    for (int b = 0; b < 256; ++b) {
        TokenId id = vocab.find(fmt::format("<0x{:02X}>", b));
        if (id == kNoToken) id = vocab.find(std::string(1, static_cast<char>(b)));
        if (id == kNoToken) id = vocab.special().unk;
        byte_tokens_[b] = id;
    }
}

void SpmTokenizer::encode(std::string_view input, std::vector<TokenId>& out) const {
    std::string text;
    text.reserve(input.size() + input.size() / 4);
    for (char c : input) {
        if (c == ' ') {
            text.append(kSpaceMarker);
        } else {
            text.push_back(c);
        }
    }

    // One symbol per character (its length judged from the lead byte, as SentencePiece does).
    struct Symbol {
        size_t begin;
        size_t length;  // 0 once merged into the symbol on its left
        int32_t prev;
        int32_t next;
        TokenId id;
    };
    std::vector<Symbol> symbols;
    for (size_t pos = 0; pos < text.size();) {
        const size_t length = std::min(utf8_length_from_lead(text[pos]), text.size() - pos);
        const int32_t index = static_cast<int32_t>(symbols.size());
        symbols.push_back(
            {pos, length, index - 1, -1, vocab_.find(std::string_view(text).substr(pos, length))});
        if (index > 0) symbols[index - 1].next = index;
        pos += length;
    }

    struct Candidate {
        float score;
        int32_t left;
        int32_t right;
        size_t length;
        TokenId id;
        bool operator<(const Candidate& o) const {
            return score < o.score || (score == o.score && left > o.left);
        }
    };
    std::priority_queue<Candidate> queue;
    auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const size_t length = symbols[left].length + symbols[right].length;
        const TokenId id = vocab_.find(std::string_view(text).substr(symbols[left].begin, length));
        if (id != kNoToken) queue.push({vocab_.score(id), left, right, length, id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& left = symbols[c.left];
        Symbol& right = symbols[c.right];
        // Stale if either side has merged since (a symbol only grows, so lengths tell).
        if (left.length == 0 || right.length == 0 || left.length + right.length != c.length)
            continue;
        left.length = c.length;
        left.id = c.id;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = c.left;
        consider(left.prev, c.left);
        consider(c.left, left.next);
    }

    for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
        const Symbol& s = symbols[i];
        if (s.id != kNoToken) {
            out.push_back(s.id);
            continue;
        }
        for (size_t k = 0; k < s.length; ++k) {
            const TokenId id = byte_tokens_[static_cast<uint8_t>(text[s.begin + k])];
            if (id != kNoToken) out.push_back(id);
        }
    }
}

}  // namespace tandem
