// The response objects of the OpenAI API: chat completions and their stream chunks, text
// completions and theirs, usage, the model list. Field names and order follow OpenAI's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "text/tokenizer.h"
#include "text/tool_call_format.h"

namespace tandem::server {

// What every object of one response shares.
struct ResponseHead {
    std::string id;       // "chatcmpl-…" or "cmpl-…"
    int64_t created = 0;  // Unix seconds
    std::string model;
};

// "stop" or "length" (a cancelled or failed request has no OpenAI finish reason).
const char* openai_finish_reason(FinishReason reason);

nlohmann::json usage_json(const GenerationResult& result);
// llama.cpp's `timings` beside the usage (its field names): the prompt phase from a free slot to
// the first token (prompt_n: the tokens computed, cache_n: those reused), the predicted phase
// from the first token to the end (predicted_n: the tokens sampled after the first), plus
// queue_ms and time_to_first_token_ms (arrival → first token; 0 when none came).
nlohmann::json timings_json(const GenerationResult& result);

// `calls`: the tool calls of the reply (content is null when there are calls and no text);
// the finish reason is then "tool_calls". `reasoning`, when not empty, is the message's
// reasoning_content (as llama.cpp's default reasoning format returns it).
nlohmann::json chat_completion(const ResponseHead& head, const std::string& content,
                               const std::string& reasoning,
                               const std::vector<nlohmann::json>& calls,
                               const GenerationResult& result);
// One entry of a message's tool_calls: {"id", "type": "function", "function": {name, arguments}}.
nlohmann::json tool_call_json(const std::string& id, const ToolCall& call);
// A chunk with one choice: `delta` ({"role": …}, {"content": …}, {"reasoning_content": …} or
// {}), finish_reason or null.
nlohmann::json chat_chunk(const ResponseHead& head, const nlohmann::json& delta,
                          const char* finish_reason);
// The last chunk of a stream with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseHead& head, const char* object,
                           const GenerationResult& result);

nlohmann::json text_completion(const ResponseHead& head, const std::string& text,
                               const GenerationResult& result);
nlohmann::json text_chunk(const ResponseHead& head, const std::string& text,
                          const char* finish_reason);

nlohmann::json model_list(const std::string& model_id, int64_t created);

// The log probabilities of a reply's tokens, each token shown as the tokenizer's piece (bytes
// that are not whole UTF-8 characters are replaced there; `bytes` holds them exactly).
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
// "bytes"}]}]}.
nlohmann::json chat_logprobs(const Tokenizer& tokenizer, const std::vector<TokenLogprobs>& tokens);
// Completions: {"tokens", "token_logprobs", "top_logprobs" (piece → logprob), "text_offset"},
// offsets in bytes of the completion's text counted from `offset`, which the pieces before
// these took; returns the offset after them in `offset`.
nlohmann::json text_logprobs(const Tokenizer& tokenizer, const std::vector<TokenLogprobs>& tokens,
                             size_t& offset);

// Serializes for the wire; text that is not valid UTF-8 is replaced rather than thrown on.
std::string dump(const nlohmann::json& value);
// One server-sent event: "data: JSON\n\n".
std::string sse_event(const nlohmann::json& value);

}  // namespace tandem::server
