// How a model family writes tool calls, as a table: each format names the template marks that
// identify it, where a call starts and ends in the output, how a call block parses, how to write
// calls back for a template that cannot, and the grammar that forces a call (tool_choice
// "required" or a named function). Adding a family is one more entry in tool_call_format.cpp.
//
// Formats: "hermes" (Qwen 2.5/3, Hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call>),
// "qwen3_coder" (Qwen3-Coder, Qwen3.5: <tool_call><function=NAME><parameter=P>VALUE</parameter>
// ...</function></tool_call>, values raw text), "llama3_json" (Llama 3.1-3.3: the whole reply a
// {"name": ..., "parameters": ...} object) and "harmony" (gpt-oss: channels of messages,
// text/harmony.h), whose replies have a structure of their own and so bring their own parser.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem {

struct ToolCall {
    std::string name;
    std::string arguments;  // a JSON object, compact
};

// A function the client offers: its name and the JSON schema of its arguments.
struct ToolSpec {
    std::string name;
    nlohmann::ordered_json parameters;  // null: no parameters
};

// The JSON schema of a tool's arguments: its parameters, or an empty object when it has none.
nlohmann::ordered_json arguments_schema(const ToolSpec& tool);

// A piece of a reply: content or reasoning text, or a tool call.
struct ReplyEvent {
    std::string text;  // when `call` is empty: content, or reasoning when `reasoning`
    std::optional<ToolCall> call;
    bool reasoning = false;
};

// A reply's parser, fed as the reply streams: the block formats' (calls in free text, read with
// the format's fields), or a format's own, for formats that are more than call blocks in text.
class ReplyParser {
  public:
    virtual ~ReplyParser() = default;
    virtual std::vector<ReplyEvent> feed(std::string_view text) = 0;
    virtual std::vector<ReplyEvent> finish() = 0;
    virtual int n_calls() const = 0;
};

struct ToolCallFormat {
    const char* name;
    // True when a chat template's source speaks this format.
    bool (*detect)(std::string_view template_source);
    // Where a call block starts; text before the first is content. With `opens_at_start`, only
    // at the start of the reply (after whitespace).
    std::vector<std::string> openers;
    bool opens_at_start;
    // Where a block ends; empty: it runs to the end of the reply.
    std::string closer;
    // The calls of one block (its opener, and the text up to the closer or the end); nullopt
    // when it is not a well-formed call.
    std::optional<std::vector<ToolCall>> (*parse_block)(std::string_view opener,
                                                        std::string_view body);
    // GBNF of a reply made of one call to one of `tools` (or, with `parallel`, one or more).
    std::string (*grammar)(const std::vector<ToolSpec>& tools, bool parallel);
    // For templates that do not render tools: a system prompt describing them, and an
    // assistant turn's calls written as the model would write them.
    std::string (*system_prompt)(const nlohmann::ordered_json& tools);
    std::string (*render_calls)(const std::vector<ToolCall>& calls);
    // Null for formats of call blocks in free text, read with the fields above. Otherwise the
    // reply's own parser, which must see every reply of a chat, tools offered or not (it also
    // takes the reasoning apart); `parse_calls` false hands calls on as content.
    std::unique_ptr<ReplyParser> (*reply_parser)(bool parse_calls) = nullptr;
    // The message field the template reads an assistant turn's reasoning from, when it is not
    // OpenAI's `reasoning_content` (gpt-oss's reads `thinking`); null: none.
    const char* reasoning_field = nullptr;
    // The template refuses a call's turn that holds both content and reasoning (gpt-oss's): such
    // a turn goes to it with its reasoning only, as llama.cpp sends it.
    bool call_turns_drop_content_beside_reasoning = false;
    // A grammar for the reply's content (a response_format's or json_schema's) as the whole
    // reply's grammar, for formats whose replies carry more than content (harmony: reasoning first, then
    // the content in the final channel); null: the content is the whole reply.
    std::string (*content_grammar)(std::string_view gbnf) = nullptr;
};

// The formats, in detection order.
const std::vector<ToolCallFormat>& tool_call_formats();
// The format a template speaks; "hermes" when none is recognised.
const ToolCallFormat& tool_call_format_for_template(std::string_view template_source);
// By name; null when unknown.
const ToolCallFormat* find_tool_call_format(std::string_view name);

// Splits a reply, as it streams, into content and tool calls (and reasoning, for formats with
// a reply parser of their own, to which it hands the reply). A block that does not parse is
// handed on as content, exactly as written. Whitespace between calls, and around them, is
// dropped.
class ToolCallParser {
  public:
    // Block formats always read their calls (`parse_calls` is for formats with a reply parser,
    // which must see every reply: with it false they hand calls on as content).
    explicit ToolCallParser(const ToolCallFormat& format, bool parse_calls = true);

    using Event = ReplyEvent;
    // Text as it comes; returns what is settled (content that cannot start a call, calls whose
    // block is complete).
    std::vector<Event> feed(std::string_view text) { return parser_->feed(text); }
    // The end of the reply: everything still held.
    std::vector<Event> finish() { return parser_->finish(); }
    // Calls found so far.
    int n_calls() const { return parser_->n_calls(); }

  private:
    std::unique_ptr<ReplyParser> parser_;  // the format's own, or the block formats'
};

// A whole reply at once.
struct ParsedReply {
    std::string content;
    std::string reasoning;
    std::vector<ToolCall> calls;
};
ParsedReply parse_tool_calls(const ToolCallFormat& format, std::string_view reply);
// Adds a parser's events to `r`: calls to its calls, text to its reasoning or content.
void append_events(ParsedReply& r, std::vector<ReplyEvent> events);

}  // namespace tandem
