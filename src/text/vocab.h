// A tokenizer vocabulary read from GGUF metadata (tokenizer.ggml.*) and checked: token texts,
// scores and attributes, BPE merges, the special tokens and the end-of-generation set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pre_tokenizer_table.h"

namespace tandem {

class GgufFile;

using TokenId = int32_t;
constexpr TokenId kNoToken = -1;

enum class VocabKind {
    kBpe,  // tokenizer.ggml.model = gpt2: byte-level BPE with merges and a pre-tokenizer; gemma4:
           // SentencePiece-style BPE (PreTokenizerSpec::spm_style)
    kSpm,  // tokenizer.ggml.model = llama: SentencePiece BPE with scores and byte fallback
};

// Attribute bits of a token (llama.cpp's llama_token_attr). The GGUF token type gives one;
// llama.cpp's name rules may add kControl (an EOG-looking token) or replace it.
enum TokenAttr : uint32_t {
    kTokenAttrUndefined = 0,
    kTokenAttrUnknown = 1u << 0,
    kTokenAttrUnused = 1u << 1,
    kTokenAttrNormal = 1u << 2,
    kTokenAttrControl = 1u << 3,
    kTokenAttrUserDefined = 1u << 4,
    kTokenAttrByte = 1u << 5,
};

// Ids of the tokens with a role; kNoToken when the vocabulary has none.
struct SpecialTokens {
    TokenId bos = kNoToken;
    TokenId eos = kNoToken;
    TokenId eot = kNoToken;
    TokenId eom = kNoToken;
    TokenId unk = kNoToken;
    TokenId sep = kNoToken;
    TokenId pad = kNoToken;
    TokenId mask = kNoToken;
    TokenId fim_pre = kNoToken;
    TokenId fim_suf = kNoToken;
    TokenId fim_mid = kNoToken;
    TokenId fim_pad = kNoToken;
    TokenId fim_rep = kNoToken;
    TokenId fim_sep = kNoToken;
};

// One BPE merge: `left` followed by `right` becomes `result`; its rank is its index.
struct BpeMerge {
    TokenId left;
    TokenId right;
    TokenId result;
};

class Vocab {
  public:
    // Reads and checks the tokenizer metadata. Every inconsistency (lengths that disagree,
    // merges naming unknown tokens, special ids out of range, unknown model or pre-tokenizer
    // names) is an Error naming the file and the key.
    static Vocab from_gguf(const GgufFile& gguf);

    // Token texts are views into this object: it moves but does not copy.
    Vocab(Vocab&&) = default;
    Vocab& operator=(Vocab&&) = default;
    Vocab(const Vocab&) = delete;
    Vocab& operator=(const Vocab&) = delete;

    VocabKind kind() const { return kind_; }
    const std::string& model_name() const { return model_name_; }
    // tokenizer.ggml.pre ("default" when absent); empty for SentencePiece.
    const std::string& pre_name() const { return pre_name_; }
    // The pre-tokenizer of a BPE vocabulary; nullptr for SentencePiece.
    const PreTokenizerSpec* pre_spec() const { return pre_spec_; }

    int32_t size() const { return static_cast<int32_t>(texts_.size()); }
    bool contains(TokenId id) const { return id >= 0 && id < size(); }
    const std::string& text(TokenId id) const { return texts_[id]; }
    float score(TokenId id) const { return scores_[id]; }
    uint32_t attrs(TokenId id) const { return attrs_[id]; }
    bool has_attr(TokenId id, uint32_t attr) const { return (attrs_[id] & attr) != 0; }
    // The id of the token with exactly this text (the last one if several share it).
    TokenId find(std::string_view text) const;

    const SpecialTokens& special() const { return special_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    // SentencePiece-style BPE: spaces are U+2581 in token texts, bytes are <0xXX> tokens.
    bool spm_style_bpe() const { return pre_spec_ != nullptr && pre_spec_->spm_style; }
    bool is_eog(TokenId id) const;
    // End-of-generation tokens, ascending.
    const std::vector<TokenId>& eog_tokens() const { return eog_; }
    // Tokens matched whole in input text before BPE (control, user-defined and unknown
    // tokens), longest text first, as llama.cpp's tokenizer_st_partition walks them.
    const std::vector<TokenId>& matchable_tokens() const { return matchable_; }
    // BPE merges in rank order (empty for SentencePiece).
    const std::vector<BpeMerge>& merges() const { return merges_; }

  private:
    Vocab() = default;
    void read_tokens(const GgufFile& gguf);
    void read_merges(const GgufFile& gguf);
    void read_special_ids(const GgufFile& gguf);
    // llama.cpp's name rules (vocab_special.cpp): EOT/EOM/FIM tokens found by text, the EOG
    // set, attribute fix-ups, and the list of matchable tokens.
    void resolve_special_tokens();

    VocabKind kind_ = VocabKind::kBpe;
    std::string model_name_;
    std::string pre_name_;
    const PreTokenizerSpec* pre_spec_ = nullptr;
    std::vector<std::string> texts_;
    std::vector<float> scores_;
    std::vector<uint32_t> attrs_;
    std::unordered_map<std::string_view, TokenId> ids_;
    std::vector<BpeMerge> merges_;
    SpecialTokens special_;
    bool add_bos_ = false;
    bool add_eos_ = false;
    bool add_space_prefix_ = false;
    std::vector<TokenId> eog_;
    std::vector<TokenId> matchable_;
};

}  // namespace tandem
