// The body of POST /v1/chat/completions and /v1/completions, read and checked: every field of
// the wrong type or out of range is a 400 naming it. Fields a client may send that change
// nothing here (user, store, ...) are accepted; ones that would silently change the answer if
// ignored (n > 1, logprobs, penalties we do not implement) are refused. Tools, tool_choice and
// response_format are read here; JSON schemas become grammars here too, so a schema the grammar
// cannot enforce is a 400 naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"
#include "text/tool_call_format.h"

namespace tandem::server {

// What the model may do with the tools it is offered.
enum class ToolChoice {
    kAuto,      // call them or answer in text
    kNone,      // answer in text; the tools are not shown
    kRequired,  // call one or more (the output is held to the format's call grammar)
    kFunction,  // call the named one
};

struct CompletionRequest {
    std::string model;  // empty: not given
    // Chat: the messages (roles checked, text content parts joined), tools and extra template
    // variables (chat_template_kwargs).
    nlohmann::ordered_json messages;
    nlohmann::ordered_json tools;
    nlohmann::ordered_json template_kwargs;
    std::vector<ToolSpec> tool_specs;  // the functions of `tools`
    ToolChoice tool_choice = ToolChoice::kAuto;
    std::string tool_name;  // kFunction: the function to call
    bool parallel_tool_calls = true;
    // GBNF the output must follow: from response_format (json_object, json_schema) or
    // llama.cpp's `json_schema` and `grammar` fields; empty: free text. `grammar_param` names
    // the field it came from, for errors. A schema's grammar is the reply's content's (which a
    // format whose replies carry more places: harmony's final message); a raw `grammar`
    // (grammar_is_raw) holds the whole reply, as in llama.cpp.
    std::string grammar;
    std::string grammar_param;
    bool grammar_is_raw = false;
    // Completions: the prompt as text, or as token ids when prompt_is_tokens.
    std::string prompt_text;
    std::vector<int32_t> prompt_tokens;
    bool prompt_is_tokens = false;
    bool echo = false;  // completions: the prompt's text comes back before the completion's

    SamplingParams sampling;
    // < 0: none; else each token's log probability with this many alternatives (chat:
    // `logprobs` true and `top_logprobs`; completions: `logprobs` N).
    int logprobs = -1;
    int n = 1;  // choices, each a generation of its own
    int max_tokens = 0;  // 0: not given (until the end of the context)
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool ignore_eos = false;     // vLLM's and llama.cpp's extension: generate to max_tokens
};

// Temperature 1, every filter off, a random seed: sampling from the model's distribution.
SamplingParams default_sampling();

// Parse the body; throws ApiError (400) for malformed JSON and bad fields.
CompletionRequest parse_chat_request(const std::string& body);
CompletionRequest parse_completion_request(const std::string& body);

// The body as a JSON object; throws ApiError (400) when it is not.
nlohmann::json parse_json_object(const std::string& body);
nlohmann::ordered_json parse_ordered_object(const std::string& body);

// `tools` (OpenAI's [{"type": "function", "function": {name, description, parameters}}]),
// checked, into r.tools and r.tool_specs; `param` names the field for errors.
void read_tools(const nlohmann::ordered_json& tools, CompletionRequest& r, const char* param);
// Checks the choice against the tools: a required call needs tools, a named one must exist.
void check_tool_choice(const CompletionRequest& r, const char* param);

}  // namespace tandem::server
