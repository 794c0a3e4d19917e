// Byte-level BPE. Merges are looked up by token id pairs (the loader checked that both parts
// and the result of every merge are tokens), which makes merging string-free.
#include "text/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <string>

#include "text/byte_level.h"
#include "text/unicode_compat.h"

namespace tandem {

BpeTokenizer::BpeTokenizer(const Vocab& vocab)
    : vocab_(vocab),
      pre_(*vocab.pre_spec()),
      ignore_merges_(vocab.pre_spec()->ignore_merges),
      spm_style_(vocab.pre_spec()->spm_style) {
    const std::vector<BpeMerge>& merges = vocab.merges();
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const BpeMerge& m = merges[rank];
        // try_emplace keeps the first (lowest-ranked) of duplicate merges, as llama.cpp does.
        merges_.try_emplace(pair_key(m.left, m.right),
                            MergeRule{static_cast<int32_t>(rank), m.result});
    }
    for (int b = 0; b < 256; ++b) {
        const std::string_view text = byte_to_unicode(static_cast<uint8_t>(b));
        byte_tokens_[b] = vocab.find(text);
        if (byte_tokens_[b] == kNoToken) {
            for (char c : text) {
                const TokenId id = vocab.find(std::string_view(&c, 1));
                if (id != kNoToken) byte_fallback_[b].push_back(id);
            }
        }
        static constexpr char kHex[] = "0123456789ABCDEF";
        const char hex[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
        hex_byte_tokens_[b] = vocab.find(std::string_view(hex, 6));
    }
}

void BpeTokenizer::encode(std::string_view input, std::vector<TokenId>& out) const {
    std::string text, subject, escaped;
    if (spm_style_) {
        // llama_escape_whitespace: every space becomes U+2581 before anything else.
        escaped.reserve(input.size() + input.size() / 4);
        for (char c : input) {
            if (c == ' ') {
                escaped.append("\xE2\x96\x81");
            } else {
                escaped.push_back(c);
            }
        }
        input = escaped;
    }
    prepare_split_text(input, text, subject);
    // Pieces repeat a lot in real text ("the", " of", "\n"); remember each one's tokens for
    // the rest of this call.
    std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;
    std::vector<TokenId> cache;
    for (const TextSpan& span : pre_.split(subject)) {
        const std::string_view piece(text.data() + span.begin, span.end - span.begin);
        auto [it, inserted] = seen.try_emplace(piece);
        if (inserted) {
            const size_t begin = cache.size();
            if (spm_style_) {
                encode_piece_spm_style(piece, cache);
            } else {
                encode_piece(piece, cache);
            }
            it->second = {begin, cache.size()};
        }
        out.insert(out.end(), cache.begin() + it->second.first, cache.begin() + it->second.second);
    }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
    if (ignore_merges_) {
        std::string encoded;
        for (char c : piece) encoded.append(byte_to_unicode(static_cast<uint8_t>(c)));
        const TokenId whole = vocab_.find(encoded);
        if (whole != kNoToken) {
            out.push_back(whole);
            return;
        }
    }

    // One symbol per byte, in a linked list; merging marks the right symbol dead.
    const int32_t n = static_cast<int32_t>(piece.size());
    std::vector<Symbol> symbols(n);
    for (int32_t i = 0; i < n; ++i) {
        symbols[i] = {byte_tokens_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1,
                      static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1), true};
    }
    merge(symbols);
    for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) {
        if (symbols[i].id != kNoToken) {
            out.push_back(symbols[i].id);
        } else {
            const std::vector<TokenId>& fallback = byte_fallback_[static_cast<uint8_t>(piece[i])];
            out.insert(out.end(), fallback.begin(), fallback.end());
        }
    }
}

void BpeTokenizer::encode_piece_spm_style(std::string_view piece, std::vector<TokenId>& out) const {
    // A run of newlines that is a token is that token (llama.cpp's fix for Gemma 4).
    if (piece.find_first_not_of('\n') == std::string_view::npos) {
        if (const TokenId whole = vocab_.find(piece); whole != kNoToken) {
            out.push_back(whole);
            return;
        }
    }
    // One symbol per UTF-8 character (its length read from the lead byte, as unicode_len_utf8).
    std::vector<Symbol> symbols;
    symbols.reserve(piece.size());
    for (size_t pos = 0; pos < piece.size();) {
        const uint8_t lead = static_cast<uint8_t>(piece[pos]);
        const size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
        const size_t n = std::min(len, piece.size() - pos);
        const int32_t i = static_cast<int32_t>(symbols.size());
        symbols.push_back({vocab_.find(piece.substr(pos, n)), i - 1, -1, static_cast<uint32_t>(pos),
                           static_cast<uint32_t>(pos + n), true});
        if (i > 0) symbols[i - 1].next = i;
        pos += n;
    }
    merge(symbols);
    for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(symbols.size()); i = symbols[i].next) {
        const Symbol& sym = symbols[i];
        if (sym.id != kNoToken) {
            out.push_back(sym.id);
            continue;
        }
        // A character without a token: its bytes as <0xXX> tokens (those the vocabulary has).
        for (uint32_t b = sym.begin; b < sym.end; ++b) {
            const TokenId id = hex_byte_tokens_[static_cast<uint8_t>(piece[b])];
            if (id != kNoToken) out.push_back(id);
        }
    }
}

void BpeTokenizer::merge(std::vector<Symbol>& symbols) const {
    // Candidate merges of adjacent symbols; the lowest rank goes first, then the leftmost.
    struct Candidate {
        int32_t rank;
        int32_t left;
        int32_t right;
        TokenId left_id;
        TokenId right_id;
        TokenId result;
        bool operator>(const Candidate& o) const {
            return rank > o.rank || (rank == o.rank && left > o.left);
        }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const TokenId a = symbols[left].id, b = symbols[right].id;
        if (a == kNoToken || b == kNoToken) return;
        auto it = merges_.find(pair_key(a, b));
        if (it != merges_.end())
            queue.push({it->second.rank, left, right, a, b, it->second.result});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& left = symbols[c.left];
        Symbol& right = symbols[c.right];
        // Stale if either side has merged since: a symbol only grows by taking its right
        // neighbour, so unchanged ids and both alive mean they are still neighbours.
        if (!left.alive || !right.alive || left.id != c.left_id || right.id != c.right_id) continue;
        left.id = c.result;
        left.end = right.end;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = c.left;
        consider(left.prev, c.left);
        consider(c.left, left.next);
    }
}

}  // namespace tandem
