// Which tokens are special beyond what the GGUF types say: llama.cpp v0.4.0 finds EOT, EOM
// and FIM tokens by their text, ends generation on a list of texts, and marks those tokens as
// control tokens (llama_vocab::impl::load, "auto-detect special tokens by text").
#include <algorithm>
#include <array>

#include "text/vocab.h"

namespace tandem {
namespace {

struct TextRule {
    TokenId SpecialTokens::*field;
    std::vector<std::string_view> texts;
};

// A role left unset by the metadata goes to a token with one of these texts.
const std::array<TextRule, 8>& text_rules() {
    static const std::array<TextRule, 8> kRules = {{
        {&SpecialTokens::eot,
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
          "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
          "<end_of_utterance>"}},
        {&SpecialTokens::eom, {"<|eom_id|>"}},
        {&SpecialTokens::fim_pre,
         {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
          "<|code_prefix|>", "<|prefix|>"}},
        {&SpecialTokens::fim_suf,
         {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
          "<|code_suffix|>", "<|suffix|>"}},
        {&SpecialTokens::fim_mid,
         {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
          "<|code_middle|>", "<|middle|>"}},
        {&SpecialTokens::fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {&SpecialTokens::fim_rep,
         {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {&SpecialTokens::fim_sep, {"<|file_sep|>"}},
    }};
    return kRules;
}

// Every token with one of these texts ends generation (and is made a control token).
constexpr std::array<std::string_view, 22> kEogTexts = {"<|eot_id|>",
                                                        "<|im_end|>",
                                                        "<|end|>",
                                                        "<|return|>",
                                                        "<|call|>",
                                                        "<|flush|>",
                                                        "<|calls|>",
                                                        "<end_of_turn>",
                                                        "<|endoftext|>",
                                                        "</s>",
                                                        "<|eom_id|>",
                                                        "<EOT>",
                                                        "_<EOT>",
                                                        "[EOT]",
                                                        "[EOS]",
                                                        "<|end_of_text|>",
                                                        "<end_of_utterance>",
                                                        "<eos>",
                                                        "<turn|>",
                                                        "<|tool_response>",
                                                        "<｜end▁of▁sentence｜>",
                                                        "[e~["};

// gpt-oss's channel markers are always rendered (llama.cpp makes them user-defined).
constexpr std::array<std::string_view, 4> kAlwaysRendered = {"<|channel|>", "<|message|>",
                                                             "<|start|>", "<|constrain|>"};

}  // namespace

void Vocab::resolve_special_tokens() {
    // Roles by text. llama.cpp takes the first match in hash-map order; the lowest id is taken
    // here, which differs only for vocabularies with two candidates for one role.
    for (const TextRule& rule : text_rules()) {
        TokenId& id = special_.*rule.field;
        if (id != kNoToken) continue;
        for (std::string_view text : rule.texts) {
            const TokenId found = find(text);
            if (found != kNoToken && (id == kNoToken || found < id)) id = found;
        }
        if (id != kNoToken) attrs_[id] |= kTokenAttrControl;
    }

    std::vector<TokenId> eog;
    for (TokenId id : {special_.fim_pad, special_.fim_rep, special_.fim_sep}) {
        if (id != kNoToken) eog.push_back(id);
    }
    // By text through the text -> id map, as llama.cpp walks it: of several tokens with one
    // text only the last counts.
    for (std::string_view text : kEogTexts) {
        if (const TokenId id = find(text); id != kNoToken) {
            eog.push_back(id);
            attrs_[id] |= kTokenAttrControl;
        }
    }
    for (std::string_view text : kAlwaysRendered) {
        if (const TokenId id = find(text); id != kNoToken) attrs_[id] = kTokenAttrUserDefined;
    }
    for (TokenId id : {special_.eos, special_.eot, special_.eom}) {
        if (id != kNoToken) eog.push_back(id);
    }
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

    auto eog_with_text = [&](std::string_view text) {
        for (TokenId id : eog) {
            if (texts_[id] == text) return id;
        }
        return kNoToken;
    };
    auto drop_eog = [&](TokenId id, uint32_t attrs) {
        eog.erase(std::find(eog.begin(), eog.end(), id));
        attrs_[id] = attrs;
    };
    // gpt-oss (<|return|>, <|call|>) and solar-open (<|calls|>, <|flush|>) end turns with
    // <|end|> without ending generation.
    const TokenId end = eog_with_text("<|end|>");
    const bool has_call =
        eog_with_text("<|call|>") != kNoToken || eog_with_text("<|calls|>") != kNoToken;
    if (end != kNoToken && has_call &&
        (eog_with_text("<|return|>") != kNoToken || eog_with_text("<|flush|>") != kNoToken)) {
        drop_eog(end, kTokenAttrUserDefined);
    }
    // gemma4 and paddleocr use </s> as text.
    const TokenId s = eog_with_text("</s>");
    if (s != kNoToken && eog_with_text("<|tool_response>") != kNoToken) {
        drop_eog(s, kTokenAttrNormal);
    }
    eog_ = std::move(eog);

    matchable_.clear();
    for (TokenId id = 0; id < size(); ++id) {
        if (attrs_[id] & (kTokenAttrControl | kTokenAttrUserDefined | kTokenAttrUnknown)) {
            matchable_.push_back(id);
        }
    }
    std::stable_sort(matchable_.begin(), matchable_.end(),
                     [&](TokenId a, TokenId b) { return texts_[a].size() > texts_[b].size(); });
}

}  // namespace tandem
