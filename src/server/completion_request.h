// The body of POST /v1/chat/completions and /v1/completions, read and checked: every field of
// the wrong type or out of range is a 400 naming it. Fields a client may send that change
// nothing here (user, tool_choice "auto", ...) are accepted; ones that would silently change the
// answer if ignored (n > 1, logprobs, penalties we do not implement) are refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"

namespace tandem::server {

struct CompletionRequest {
    std::string model;  // empty: not given
    // Chat: the messages (roles checked, text content parts joined), tools and extra template
    // variables (chat_template_kwargs).
    nlohmann::ordered_json messages;
    nlohmann::ordered_json tools;
    nlohmann::ordered_json template_kwargs;
    // Completions: the prompt as text, or as token ids when prompt_is_tokens.
    std::string prompt_text;
    std::vector<int32_t> prompt_tokens;
    bool prompt_is_tokens = false;

    SamplingParams sampling;
    int max_tokens = 0;  // 0: not given (until the end of the context)
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool ignore_eos = false;     // vLLM's and llama.cpp's extension: generate to max_tokens
};

// Parse the body; throws ApiError (400) for malformed JSON and bad fields.
CompletionRequest parse_chat_request(const std::string& body);
CompletionRequest parse_completion_request(const std::string& body);

// The body as a JSON object; throws ApiError (400) when it is not.
nlohmann::json parse_json_object(const std::string& body);

}  // namespace tandem::server
