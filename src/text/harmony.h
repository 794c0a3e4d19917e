// gpt-oss's "harmony" replies: a run of messages, each a header (channel, recipient, content
// type) then <|message|> and a body ended by <|end|>, <|call|> or <|return|>. The analysis
// channel is reasoning, final (and commentary addressed to no one) is content, a message to
// `functions.NAME` is a tool call with JSON arguments. The tool_call_format table's "harmony"
// entry is built from these.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tool_call_format.h"

namespace tandem {

// The template speaks harmony (it writes <|channel|>, as llama.cpp detects it).
bool harmony_detect(std::string_view template_source);

// Splits a harmony reply, as it streams, into reasoning, content and calls. With
// `parse_calls` false (no tools offered), a message to a function is handed on as content.
std::unique_ptr<ReplyParser> make_harmony_parser(bool parse_calls);

// GBNF of a reply that calls one of `tools` after any number of analysis or commentary
// messages (one call: <|call|> ends the generation, whatever `parallel`).
std::string harmony_grammar(const std::vector<ToolSpec>& tools, bool parallel);

// A grammar of the reply's content (a response format's schema) made the reply's: any analysis
// messages, then the final channel's message held to `gbnf` (whose rules are renamed apart from
// the added ones), as llama.cpp holds gpt-oss's replies to a response format. The model reasons
// before it answers, as it was trained to, where holding the whole reply to `gbnf` would make it
// answer without its headers.
std::string harmony_content_grammar(std::string_view gbnf);

// For a harmony template that does not render tools: their description, and calls written as
// the model writes them (after the generation prompt's <|start|>assistant).
std::string harmony_system_prompt(const nlohmann::ordered_json& tools);
std::string harmony_render_calls(const std::vector<ToolCall>& calls);

}  // namespace tandem
