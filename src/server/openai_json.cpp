// OpenAI response objects.
#include "server/openai_json.h"

#include <algorithm>

namespace tandem::server {

using nlohmann::json;

const char* openai_finish_reason(FinishReason reason) {
    return reason == FinishReason::kLength ? "length" : "stop";
}

json usage_json(const GenerationResult& r) {
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"total_tokens", r.prompt_tokens + r.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json timings_json(const GenerationResult& r) {
    const double prompt_s =
        (r.first_token_seconds > 0.0 ? r.first_token_seconds : r.total_seconds) - r.queue_seconds;
    const double predicted_s =
        r.first_token_seconds > 0.0 ? r.total_seconds - r.first_token_seconds : 0.0;
    const int prompt_n = r.prompt_tokens - r.cached_tokens;
    const int predicted_n = std::max(r.completion_tokens - 1, 0);
    auto per_token_ms = [](double s, int n) { return n > 0 ? s * 1e3 / n : 0.0; };
    auto per_second = [](double s, int n) { return s > 0.0 ? n / s : 0.0; };
    return {{"cache_n", r.cached_tokens},
            {"prompt_n", prompt_n},
            {"prompt_ms", prompt_s * 1e3},
            {"prompt_per_token_ms", per_token_ms(prompt_s, prompt_n)},
            {"prompt_per_second", per_second(prompt_s, prompt_n)},
            {"predicted_n", predicted_n},
            {"predicted_ms", predicted_s * 1e3},
            {"predicted_per_token_ms", per_token_ms(predicted_s, predicted_n)},
            {"predicted_per_second", per_second(predicted_s, predicted_n)},
            {"queue_ms", r.queue_seconds * 1e3},
            {"time_to_first_token_ms", r.first_token_seconds * 1e3}};
}

namespace {

json head_fields(const ResponseHead& head, const char* object) {
    json j = json::object();
    j["id"] = head.id;
    j["object"] = object;
    j["created"] = head.created;
    j["model"] = head.model;
    j["system_fingerprint"] = "tandem";
    return j;
}

json reason_or_null(const char* finish_reason) {
    return finish_reason ? json(finish_reason) : json(nullptr);
}

}  // namespace

json tool_call_json(const std::string& id, const ToolCall& call) {
    return {{"id", id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json chat_completion(const ResponseHead& head, const std::string& content,
                     const std::string& reasoning, const std::vector<json>& calls,
                     const GenerationResult& result) {
    json j = head_fields(head, "chat.completion");
    json message = {{"role", "assistant"}};
    message["content"] = calls.empty() || !content.empty() ? json(content) : json(nullptr);
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!calls.empty()) message["tool_calls"] = calls;
    const char* reason = openai_finish_reason(result.reason);
    if (!calls.empty() && result.reason != FinishReason::kLength) reason = "tool_calls";
    j["choices"] = json::array(
        {{{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", reason}}});
    j["usage"] = usage_json(result);
    j["timings"] = timings_json(result);
    return j;
}

json chat_chunk(const ResponseHead& head, const json& delta, const char* finish_reason) {
    json j = head_fields(head, "chat.completion.chunk");
    j["choices"] = json::array({{{"index", 0},
                                 {"delta", delta},
                                 {"logprobs", nullptr},
                                 {"finish_reason", reason_or_null(finish_reason)}}});
    return j;
}

json usage_chunk(const ResponseHead& head, const char* object, const GenerationResult& result) {
    json j = head_fields(head, object);
    j["choices"] = json::array();
    j["usage"] = usage_json(result);
    j["timings"] = timings_json(result);
    return j;
}

json text_completion(const ResponseHead& head, const std::string& text,
                     const GenerationResult& result) {
    json j = head_fields(head, "text_completion");
    j["choices"] = json::array({{{"index", 0},
                                 {"text", text},
                                 {"logprobs", nullptr},
                                 {"finish_reason", openai_finish_reason(result.reason)}}});
    j["usage"] = usage_json(result);
    j["timings"] = timings_json(result);
    return j;
}

json text_chunk(const ResponseHead& head, const std::string& text, const char* finish_reason) {
    json j = head_fields(head, "text_completion");
    j["choices"] = json::array({{{"index", 0},
                                 {"text", text},
                                 {"logprobs", nullptr},
                                 {"finish_reason", reason_or_null(finish_reason)}}});
    return j;
}

json model_list(const std::string& model_id, int64_t created) {
    return {{"object", "list"},
            {"data", json::array({{{"id", model_id},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "tandem"}}})}};
}

namespace {

json piece_bytes(const std::string& piece) {
    json bytes = json::array();
    for (char c : piece) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
    return bytes;
}

json chat_logprob(const Tokenizer& tokenizer, int32_t token, float logprob) {
    const std::string piece = tokenizer.token_to_piece(token);
    return {{"token", piece}, {"logprob", logprob}, {"bytes", piece_bytes(piece)}};
}

}  // namespace

json chat_logprobs(const Tokenizer& tokenizer, const std::vector<TokenLogprobs>& tokens) {
    json content = json::array();
    for (const TokenLogprobs& t : tokens) {
        json entry = chat_logprob(tokenizer, t.token, t.logprob);
        json top = json::array();
        for (const auto& [id, logprob] : t.top) top.push_back(chat_logprob(tokenizer, id, logprob));
        entry["top_logprobs"] = std::move(top);
        content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}};
}

json text_logprobs(const Tokenizer& tokenizer, const std::vector<TokenLogprobs>& tokens,
                   size_t& offset) {
    json pieces = json::array(), logprobs = json::array(), tops = json::array(),
         offsets = json::array();
    for (const TokenLogprobs& t : tokens) {
        const std::string piece = tokenizer.token_to_piece(t.token);
        pieces.push_back(piece);
        logprobs.push_back(t.logprob);
        json top = json::object();
        for (const auto& [id, logprob] : t.top) top[tokenizer.token_to_piece(id)] = logprob;
        tops.push_back(std::move(top));
        offsets.push_back(offset);
        offset += piece.size();
    }
    return {{"tokens", std::move(pieces)},
            {"token_logprobs", std::move(logprobs)},
            {"top_logprobs", std::move(tops)},
            {"text_offset", std::move(offsets)}};
}

std::string dump(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& value) {
    return "data: " + dump(value) + "\n\n";
}

}  // namespace tandem::server
