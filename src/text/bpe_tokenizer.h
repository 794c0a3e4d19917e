// BPE (tokenizer.ggml.model = gpt2, gemma4): pre-tokenize, then merge the symbols of each piece
// by merge rank, as llama.cpp's llm_tokenizer_bpe_session does. Byte-level vocabularies start
// from one symbol per byte; SentencePiece-style ones (gemma4) from one per UTF-8 character,
// with spaces written as U+2581 and characters without a token spelled as <0xXX> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pre_tokenizer.h"
#include "text/vocab.h"

namespace tandem {

class BpeTokenizer {
  public:
    // `vocab` must be a BPE vocabulary and outlive this object.
    explicit BpeTokenizer(const Vocab& vocab);

    // Appends the tokens of `text`, a run of input without special tokens.
    void encode(std::string_view text, std::vector<TokenId>& out) const;

  private:
    struct MergeRule {
        int32_t rank;
        TokenId result;
    };
    static uint64_t pair_key(TokenId left, TokenId right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
               static_cast<uint32_t>(right);
    }
    // One symbol of a piece: bytes [begin, end), its token (kNoToken: none), its neighbours.
    struct Symbol {
        TokenId id;
        int32_t prev;
        int32_t next;
        uint32_t begin;
        uint32_t end;
        bool alive;
    };
    // The tokens of one pre-tokenized piece.
    void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
    void encode_piece_spm_style(std::string_view piece, std::vector<TokenId>& out) const;
    // Applies the merges to the linked symbols, lowest rank first, then the leftmost.
    void merge(std::vector<Symbol>& symbols) const;

    const Vocab& vocab_;
    PreTokenizer pre_;
    bool ignore_merges_;
    bool spm_style_;
    std::unordered_map<uint64_t, MergeRule> merges_;  // (left, right) -> lowest-ranked merge
    std::array<TokenId, 256> byte_tokens_;            // the token of each single byte
    // What a byte without a token of its own becomes (llama.cpp looks up each UTF-8 byte of
    // its code point as a one-byte text); empty in every real vocabulary's case.
    std::array<std::vector<TokenId>, 256> byte_fallback_;
    std::array<TokenId, 256> hex_byte_tokens_;        // <0xXX> (SentencePiece-style)
};

}  // namespace tandem
