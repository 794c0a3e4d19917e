// SentencePiece BPE (tokenizer.ggml.model = llama): spaces become ▁, characters merge by piece
// score, and characters that no piece covers fall back to <0xXX> byte tokens (llama.cpp's
// llm_tokenizer_spm_session).
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace tandem {

class SpmTokenizer {
  public:
    // `vocab` must outlive this object.
    explicit SpmTokenizer(const Vocab& vocab);

    // Appends the tokens of `text`, a run of input without special tokens, with the space
    // prefix (if any) already in place.
    void encode(std::string_view text, std::vector<TokenId>& out) const;

  private:
    const Vocab& vocab_;
    // The token of each byte for the fallback: <0xXX>, else the byte as a one-byte piece, else
    // the unknown token, else none (kNoToken: the byte is dropped).
    std::array<TokenId, 256> byte_tokens_;
};

}  // namespace tandem
