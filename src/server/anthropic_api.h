// The Anthropic Messages API, as llama.cpp's server offers it: POST /v1/messages (system
// prompt, text and tool_use/tool_result content blocks, stop_sequences, tools and tool_choice,
// whole or streamed as message_start ... message_stop events) and /v1/messages/count_tokens.
// Requests become the same chat requests as OpenAI's; only the shapes on the wire differ.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <httplib.h>

#include "server/completion_request.h"
#include "server/metrics.h"
#include "server/served_model.h"

namespace tandem::server {

// The body of /v1/messages as a chat request (OpenAI-shaped messages and tools); throws
// ApiError 400 naming the field at fault. `count_only`: for count_tokens (max_tokens may be
// missing).
CompletionRequest parse_messages_request(const std::string& body, bool count_only = false);

// Answers POST /v1/messages; throws ApiError like serve_completion.
void serve_messages(const ServedModel& model, const std::string& body, httplib::Response& res,
                    const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight,
                    Metrics* metrics);
// Answers POST /v1/messages/count_tokens: {"input_tokens": N}.
void serve_count_tokens(const ServedModel& model, const std::string& body, httplib::Response& res);

// Anthropic's error body, {"type": "error", "error": {"type", "message"}}.
std::string anthropic_error_body(int status, const std::string& message);

}  // namespace tandem::server
