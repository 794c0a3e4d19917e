// Byte-level BPE (tokenizer.ggml.model = gpt2): pre-tokenize, then merge the bytes of each
// piece by merge rank, as llama.cpp's llm_tokenizer_bpe_session does.
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
    // The tokens of one pre-tokenized piece.
    void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;

    const Vocab& vocab_;
    PreTokenizer pre_;
    bool ignore_merges_;
    std::unordered_map<uint64_t, MergeRule> merges_;  // (left, right) -> lowest-ranked merge
    std::array<TokenId, 256> byte_tokens_;            // the token of each single byte
    // What a byte without a token of its own becomes (llama.cpp looks up each UTF-8 byte of
    // its code point as a one-byte text); empty in every real vocabulary's case.
    std::array<std::vector<TokenId>, 256> byte_fallback_;
};

}  // namespace tandem
