// The pre-tokenizers of byte-level BPE vocabularies, by their `tokenizer.ggml.pre` names: the
// split patterns and the flags that come with them (llama.cpp v0.4.0, src/llama-vocab.cpp).
#pragma once

#include <string_view>
#include <vector>

namespace tandem {

struct PreTokenizerSpec {
    std::vector<std::string_view> names;  // tokenizer.ggml.pre values that select it
    // Applied in order, each one cutting the pieces the previous ones left.
    std::vector<std::string_view> patterns;
    bool ignore_merges = false;  // a piece that is a token as a whole is taken as it is
    bool add_bos = false;        // the add_bos default when tokenizer.ggml.add_bos_token is absent
    bool force_add_bos = false;  // BOS whatever tokenizer.ggml.add_bos_token says (Gemma 4)
    // SentencePiece-style BPE (gemma4, sarvam-moe): spaces become U+2581 before splitting, BPE
    // merges UTF-8 characters instead of byte-level code points, a character without a token
    // becomes its bytes' <0xXX> tokens, and a piece of newlines that is a token is taken whole.
    bool spm_style = false;
};

// The spec selected by `name`, or nullptr when none is.
const PreTokenizerSpec* find_pre_tokenizer_spec(std::string_view name);
// The spec used when tokenizer.ggml.pre is absent.
const PreTokenizerSpec& default_pre_tokenizer_spec();
// Names llama.cpp knows whose pre-tokenizers Tandem does not implement (custom splitters or
// vocabularies that are not byte-level).
bool is_unsupported_pre_tokenizer(std::string_view name);

}  // namespace tandem
