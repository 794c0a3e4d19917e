// Finds special tokens written out in input text, so that "<|im_start|>" becomes one token
// rather than BPE pieces (llama.cpp's tokenizer_st_partition).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace tandem {

// A run of input text to tokenize (token == kNoToken), or one special token matched whole.
struct TextFragment {
    size_t begin;
    size_t end;
    TokenId token;
};

// Cuts `text` at every occurrence of the vocabulary's matchable tokens, longest text first.
// User-defined tokens always match; control and unknown tokens only with `parse_special`.
std::vector<TextFragment> split_special_tokens(std::string_view text, const Vocab& vocab,
                                               bool parse_special);

}  // namespace tandem
