// Reads and checks a vocabulary from GGUF metadata. Defaults and key meanings follow
// llama.cpp v0.4.0 (llama_vocab::impl::load); where llama.cpp warns and guesses on
// inconsistent metadata, this refuses the file with an Error naming the key.
#include "text/vocab.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/log.h"
#include "gguf/gguf_reader.h"

namespace tandem {
namespace {

constexpr std::string_view kKeyModel = "tokenizer.ggml.model";
constexpr std::string_view kKeyPre = "tokenizer.ggml.pre";
constexpr std::string_view kKeyTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kKeyTypes = "tokenizer.ggml.token_type";
constexpr std::string_view kKeyScores = "tokenizer.ggml.scores";
constexpr std::string_view kKeyMerges = "tokenizer.ggml.merges";
constexpr std::string_view kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kKeyAddEos = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kKeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix";

// Tokenizer models llama.cpp knows that Tandem does not implement.
constexpr std::array<std::string_view, 8> kUnsupportedModels = {
    "bert", "t5", "rwkv", "plamo2", "hybriddna", "whitespace", "no_vocab", "none"};

// GGUF token types (llama.h, enum llama_token_type) -> attributes.
constexpr std::array<uint32_t, 7> kAttrOfType = {
    kTokenAttrUndefined,    // 0 undefined
    kTokenAttrNormal,       // 1 normal
    kTokenAttrUnknown,      // 2 unknown
    kTokenAttrControl,      // 3 control
    kTokenAttrUserDefined,  // 4 user defined
    kTokenAttrUnused,       // 5 unused
    kTokenAttrByte,         // 6 byte
};

// The *_token_id keys, with the field each one sets. Later entries win; the deprecated
// prefix/suffix/middle keys come last, as in llama.cpp.
struct SpecialKey {
    std::string_view key;
    TokenId SpecialTokens::*field;
};
constexpr std::array<SpecialKey, 17> kSpecialKeys = {{
    {"tokenizer.ggml.bos_token_id", &SpecialTokens::bos},
    {"tokenizer.ggml.eos_token_id", &SpecialTokens::eos},
    {"tokenizer.ggml.eot_token_id", &SpecialTokens::eot},
    {"tokenizer.ggml.eom_token_id", &SpecialTokens::eom},
    {"tokenizer.ggml.unknown_token_id", &SpecialTokens::unk},
    {"tokenizer.ggml.seperator_token_id", &SpecialTokens::sep},  // sic, the GGUF key's spelling
    {"tokenizer.ggml.padding_token_id", &SpecialTokens::pad},
    {"tokenizer.ggml.mask_token_id", &SpecialTokens::mask},
    {"tokenizer.ggml.fim_pre_token_id", &SpecialTokens::fim_pre},
    {"tokenizer.ggml.fim_suf_token_id", &SpecialTokens::fim_suf},
    {"tokenizer.ggml.fim_mid_token_id", &SpecialTokens::fim_mid},
    {"tokenizer.ggml.fim_pad_token_id", &SpecialTokens::fim_pad},
    {"tokenizer.ggml.fim_rep_token_id", &SpecialTokens::fim_rep},
    {"tokenizer.ggml.fim_sep_token_id", &SpecialTokens::fim_sep},
    {"tokenizer.ggml.prefix_token_id", &SpecialTokens::fim_pre},
    {"tokenizer.ggml.suffix_token_id", &SpecialTokens::fim_suf},
    {"tokenizer.ggml.middle_token_id", &SpecialTokens::fim_mid},
}};

bool is_hex_digit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

}  // namespace

TokenId Vocab::find(std::string_view text) const {
    auto it = ids_.find(text);
    return it == ids_.end() ? kNoToken : it->second;
}

bool Vocab::is_eog(TokenId id) const {
    return std::binary_search(eog_.begin(), eog_.end(), id);
}

Vocab Vocab::from_gguf(const GgufFile& gguf) {
    Vocab v;
    const std::string& path = gguf.path();
    if (!gguf.has(kKeyModel)) fail("{}: missing metadata key '{}' (no tokenizer)", path, kKeyModel);
    v.model_name_ = gguf.get_string(kKeyModel);
    if (v.model_name_ == "gpt2" || v.model_name_ == "gemma4") {
        v.kind_ = VocabKind::kBpe;
    } else if (v.model_name_ == "llama") {
        v.kind_ = VocabKind::kSpm;
    } else if (std::find(kUnsupportedModels.begin(), kUnsupportedModels.end(), v.model_name_) !=
               kUnsupportedModels.end()) {
        fail(
            "{}: '{}' = '{}' is not supported (Tandem reads 'gpt2' byte-level BPE, 'gemma4' BPE and "
            "'llama' SentencePiece vocabularies)",
            path, kKeyModel, v.model_name_);
    } else {
        fail("{}: '{}' = '{}' is not a known tokenizer model", path, kKeyModel, v.model_name_);
    }

    if (v.model_name_ == "gemma4") {
        // llama.cpp uses the gemma4 pre-tokenizer whatever tokenizer.ggml.pre says.
        v.pre_name_ = "gemma4";
        v.pre_spec_ = find_pre_tokenizer_spec(v.pre_name_);
    } else if (v.kind_ == VocabKind::kBpe) {
        if (gguf.has(kKeyPre)) {
            v.pre_name_ = gguf.get_string(kKeyPre);
            v.pre_spec_ = find_pre_tokenizer_spec(v.pre_name_);
            if (v.pre_spec_ == nullptr) {
                if (is_unsupported_pre_tokenizer(v.pre_name_)) {
                    fail("{}: '{}' = '{}' is not supported", path, kKeyPre, v.pre_name_);
                }
                fail("{}: '{}' = '{}' is not a known pre-tokenizer", path, kKeyPre, v.pre_name_);
            }
        } else {
            // llama.cpp does the same, with a louder warning.
            log_warn("{}: no '{}': using the 'default' pre-tokenizer; tokenization may be poor",
                     path, kKeyPre);
            v.pre_name_ = "default";
            v.pre_spec_ = &default_pre_tokenizer_spec();
        }
    }

    v.read_tokens(gguf);
    if (v.kind_ == VocabKind::kBpe) v.read_merges(gguf);

    // Flags: defaults by model (and pre-tokenizer), then the keys.
    v.add_bos_ = v.kind_ == VocabKind::kSpm || (v.pre_spec_ != nullptr && v.pre_spec_->add_bos);
    v.add_space_prefix_ = v.kind_ == VocabKind::kSpm;
    v.add_bos_ = gguf.get_or<bool>(kKeyAddBos, v.add_bos_);
    if (v.pre_spec_ != nullptr && v.pre_spec_->force_add_bos) v.add_bos_ = true;
    v.add_eos_ = gguf.get_or<bool>(kKeyAddEos, false);
    v.add_space_prefix_ = gguf.get_or<bool>(kKeyAddSpacePrefix, v.add_space_prefix_);

    v.read_special_ids(gguf);
    if (v.add_bos_ && v.special_.bos == kNoToken) {
        fail("{}: '{}' is true but the vocabulary has no BOS token", path, kKeyAddBos);
    }
    if (v.add_eos_ && v.special_.eos == kNoToken) {
        fail("{}: '{}' is true but the vocabulary has no EOS token", path, kKeyAddEos);
    }
    v.resolve_special_tokens();
    return v;
}

void Vocab::read_tokens(const GgufFile& gguf) {
    const std::string& path = gguf.path();
    const std::vector<std::string_view>& tokens = gguf.get_string_array(kKeyTokens);
    if (tokens.empty()) fail("{}: '{}' is empty", path, kKeyTokens);
    if (tokens.size() >= static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
        fail("{}: '{}' has {} tokens, more than token ids can number", path, kKeyTokens,
             tokens.size());
    }
    const size_t n = tokens.size();
    auto check_length = [&](std::string_view key, size_t count) {
        if (count != n) {
            fail("{}: '{}' has {} entries but '{}' has {} tokens", path, key, count, kKeyTokens, n);
        }
    };

    texts_.resize(n);
    size_t n_empty = 0;
    for (size_t i = 0; i < n; ++i) {
        if (tokens[i].empty()) {
            // An empty text would match everywhere; llama.cpp renames it the same way.
            texts_[i] = fmt::format("[EMPTY_{}]", i);
            ++n_empty;
        } else {
            texts_[i] = std::string(tokens[i]);
        }
    }
    if (n_empty > 0) log_warn("{}: '{}' has {} empty tokens", path, kKeyTokens, n_empty);

    attrs_.assign(n, kTokenAttrNormal);
    if (gguf.has(kKeyTypes)) {
        const std::vector<int64_t> types = gguf.get_int_array(kKeyTypes);
        check_length(kKeyTypes, types.size());
        for (size_t i = 0; i < n; ++i) {
            if (types[i] < 0 || types[i] >= static_cast<int64_t>(kAttrOfType.size())) {
                fail("{}: '{}[{}]' = {} is not a token type (0..6)", path, kKeyTypes, i, types[i]);
            }
            attrs_[i] = kAttrOfType[types[i]];
        }
    }

    scores_.assign(n, 0.0f);
    if (const GgufValue* value = gguf.find(kKeyScores)) {
        // llama.cpp accepts f32 and i32 scores.
        std::vector<double> scores;
        if (value->type == GgufValueType::kArray &&
            (value->elem_type == GgufValueType::kF32 || value->elem_type == GgufValueType::kF64)) {
            scores = gguf.get_float_array(kKeyScores);
        } else {
            const std::vector<int64_t> ints = gguf.get_int_array(kKeyScores);
            scores.assign(ints.begin(), ints.end());
        }
        check_length(kKeyScores, scores.size());
        for (size_t i = 0; i < n; ++i) {
            if (!std::isfinite(scores[i])) fail("{}: '{}[{}]' is not finite", path, kKeyScores, i);
            scores_[i] = static_cast<float>(scores[i]);
        }
    }

    // SentencePiece byte tokens (and those of SentencePiece-style BPE) stand for the byte their
    // text names.
    if (kind_ == VocabKind::kSpm || (pre_spec_ != nullptr && pre_spec_->spm_style)) {
        for (size_t i = 0; i < n; ++i) {
            const std::string& t = texts_[i];
            if ((attrs_[i] & kTokenAttrByte) &&
                (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' ||
                 !is_hex_digit(t[3]) || !is_hex_digit(t[4]))) {
                fail("{}: token {} '{}' has the byte type but is not of the form <0xXX>", path, i,
                     t);
            }
        }
    }

    ids_.reserve(n);
    for (size_t i = 0; i < n; ++i) ids_[texts_[i]] = static_cast<TokenId>(i);
}

void Vocab::read_merges(const GgufFile& gguf) {
    const std::string& path = gguf.path();
    if (!gguf.has(kKeyMerges))
        fail("{}: missing metadata key '{}' (needed by BPE)", path, kKeyMerges);
    const std::vector<std::string_view>& merges = gguf.get_string_array(kKeyMerges);
    merges_.reserve(merges.size());
    std::string joined;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string_view m = merges[i];
        // As llama.cpp: the first space after the first character separates the two parts.
        const size_t space = m.find(' ', 1);
        if (space == std::string_view::npos) {
            fail("{}: '{}[{}]' = '{}' is not two tokens separated by a space", path, kKeyMerges, i,
                 m);
        }
        const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
        joined.assign(left).append(right);
        const BpeMerge merge{find(left), find(right), find(joined)};
        for (auto [id, text] : {std::pair{merge.left, left}, std::pair{merge.right, right},
                                std::pair{merge.result, std::string_view(joined)}}) {
            if (id == kNoToken) {
                fail("{}: '{}[{}]' = '{}' names '{}', which is not a token", path, kKeyMerges, i, m,
                     text);
            }
        }
        merges_.push_back(merge);
    }
}

void Vocab::read_special_ids(const GgufFile& gguf) {
    // SentencePiece's conventional ids, where the vocabulary has them. llama.cpp also gives
    // byte-level BPE a default BOS/EOS of 11, an accident of history not kept here.
    if (kind_ == VocabKind::kSpm) {
        special_.unk = 0;
        special_.bos = 1;
        special_.eos = 2;
    }
    for (TokenId* id : {&special_.unk, &special_.bos, &special_.eos}) {
        if (!contains(*id)) *id = kNoToken;
    }
    for (const SpecialKey& k : kSpecialKeys) {
        if (std::optional<int64_t> id = gguf.find_int(k.key, 0, size() - 1)) {
            special_.*k.field = static_cast<TokenId>(*id);
        }
    }
}

}  // namespace tandem
