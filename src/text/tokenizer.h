// The tokenizer of a GGUF model: text -> token ids and back, for byte-level BPE (gpt2) and
// SentencePiece (llama) vocabularies, matching llama.cpp v0.4.0 token for token.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace tandem {

class GgufFile;
class BpeTokenizer;
class SpmTokenizer;

class Tokenizer {
  public:
    // Reads the vocabulary from the model's metadata; throws Error naming the key on any
    // inconsistency. Independent of `gguf` afterwards.
    static Tokenizer from_gguf(const GgufFile& gguf);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Token ids of `text` (any bytes; malformed UTF-8 is read as U+FFFD, as llama.cpp does).
    // add_special: BOS/EOS where the vocabulary asks for them (llama_tokenize's add_special).
    // parse_special: control tokens written in the text ("<|im_start|>") become those tokens;
    // user-defined tokens are matched either way. Thread-safe.
    std::vector<TokenId> encode(std::string_view text, bool add_special = true,
                                bool parse_special = false) const;

    // The bytes token `id` stands for (not always valid UTF-8 on its own). Control and unknown
    // tokens give their text with `render_special`, nothing without. Throws Error for an id
    // outside the vocabulary.
    std::string token_to_piece(TokenId id, bool render_special = true) const;
    // The pieces of `ids` joined, less the leading space of the first one when the vocabulary
    // adds a space prefix (llama_detokenize with remove_special off; no space clean-up).
    std::string decode(std::span<const TokenId> ids, bool render_special = true) const;

    const Vocab& vocab() const { return *vocab_; }
    VocabKind kind() const { return vocab_->kind(); }
    int32_t n_tokens() const { return vocab_->size(); }
    const SpecialTokens& special() const { return vocab_->special(); }
    TokenId bos() const { return vocab_->special().bos; }
    TokenId eos() const { return vocab_->special().eos; }
    TokenId eot() const { return vocab_->special().eot; }
    TokenId eom() const { return vocab_->special().eom; }
    TokenId pad() const { return vocab_->special().pad; }
    TokenId unk() const { return vocab_->special().unk; }
    bool add_bos() const { return vocab_->add_bos(); }
    bool add_eos() const { return vocab_->add_eos(); }
    // True for the tokens that end generation (EOS, EOT, EOM, <|im_end|>, <|eot_id|>, ...).
    bool is_eog(TokenId id) const { return vocab_->is_eog(id); }
    // Control and unknown tokens: rendered only on request.
    bool is_control(TokenId id) const {
        return vocab_->contains(id) && vocab_->has_attr(id, kTokenAttrControl | kTokenAttrUnknown);
    }

  private:
    explicit Tokenizer(std::unique_ptr<Vocab> vocab);
    void check_id(TokenId id) const;

    std::unique_ptr<Vocab> vocab_;  // on the heap: the tokenizers below refer to it
    std::unique_ptr<BpeTokenizer> bpe_;
    std::unique_ptr<SpmTokenizer> spm_;
    std::vector<std::string> pieces_;  // token_to_piece(id, true) of every token
};

}  // namespace tandem
