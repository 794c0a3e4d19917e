// Chat messages to prompt tokens: the model's chat template (or an override) rendered over the
// conversation, then tokenized with its special tokens. Checked at load with a probe
// conversation, so a template that cannot render fails the start, not the first request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace tandem::server {

class ChatPrompt {
  public:
    // `origin` names where the template came from, for errors ("the model", a file name).
    // Throws Error "chat template (ORIGIN): ..." when it does not parse or cannot render a
    // one-message conversation.
    ChatPrompt(const std::string& source, const std::string& origin, const Tokenizer& tokenizer);

    // The prompt text; throws Error with the template's message (e.g. its raise_exception).
    std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                       const nlohmann::ordered_json& extra_context,
                       bool add_generation_prompt = true) const;
    // The tokens of rendered text: special tokens written in it are parsed, and BOS is added
    // when the vocabulary wants one and the template did not write it.
    std::vector<int32_t> tokenize(const std::string& text) const;

  private:
    ChatTemplate template_;
    std::string origin_;
    const Tokenizer& tokenizer_;
};

}  // namespace tandem::server
