// Chat messages to prompt tokens: the model's chat template (or an override) rendered over the
// conversation, then tokenized with its special tokens. Checked at load with a probe
// conversation, so a template that cannot render fails the start, not the first request. The
// template also decides the tool-call format, and whether it renders tools itself: when it does
// not, the tools are described in a system prompt and past calls written out in the format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "text/tool_call_format.h"

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
    // The prompt of a chat with OpenAI's messages and tools (null: none): the assistant turns'
    // tool call arguments given to the template as objects, and, for a template that does not
    // render tools, the tools and past calls written in the format's words.
    std::string render_chat(const nlohmann::ordered_json& messages,
                            const nlohmann::ordered_json& tools,
                            const nlohmann::ordered_json& extra_context) const;
    // The tokens of rendered text: special tokens written in it are parsed, and BOS is added
    // when the vocabulary wants one and the template did not write it.
    std::vector<int32_t> tokenize(const std::string& text) const;

    // How the model writes tool calls (from the template's source).
    const ToolCallFormat& tool_format() const { return *tool_format_; }
    // The template as given (for /props).
    const std::string& source() const { return source_; }
    // The template renders the tools it is given.
    bool renders_tools() const { return renders_tools_; }

  private:
    ChatTemplate template_;
    const ToolCallFormat* tool_format_;
    bool renders_tools_ = false;
    std::string source_;
    std::string origin_;
    const Tokenizer& tokenizer_;
};

}  // namespace tandem::server
