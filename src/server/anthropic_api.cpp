// The Anthropic Messages API over the chat machinery.
#include "server/anthropic_api.h"

#include "server/api_error.h"
#include "server/generation_job.h"
#include "server/json_fields.h"
#include "server/openai_json.h"

namespace tandem::server {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

constexpr int64_t kMaxTokensLimit = 1 << 24;
constexpr size_t kMaxStops = 16;

const char* anthropic_error_type(int status) {
    switch (status) {
        case 400:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 413:
            return "request_too_large";
        case 429:
            return "rate_limit_error";
        case 503:
            return "overloaded_error";
        default:
            return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

// The text of a content that is a string or a list of text blocks.
std::string text_of(const ojson& content, const std::string& where,
                    const char* param = "messages") {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return {};
    if (!content.is_array()) bad_request(where + " must be a string or an array of blocks", param);
    std::string text;
    for (const auto& block : content) {
        if (!block.is_object() || get_string(block, "type").value_or("") != "text" ||
            !get_string(block, "text")) {
            bad_request(where + ": only text blocks are supported here", param);
        }
        text += *get_string(block, "text");
    }
    return text;
}

// Anthropic's turns to OpenAI's: tool_result blocks become tool messages (before the user's
// text), tool_use blocks an assistant's tool_calls.
void read_messages(const ojson& body, CompletionRequest& r) {
    r.messages = ojson::array();
    if (auto system = body.find("system"); system != body.end() && !system->is_null()) {
        const std::string text = text_of(*system, "'system'", "system");
        if (!text.empty()) r.messages.push_back({{"role", "system"}, {"content", text}});
    }
    auto messages = body.find("messages");
    if (messages == body.end() || messages->is_null())
        bad_request("'messages' is missing", "messages");
    if (!messages->is_array()) bad_request("'messages' must be an array", "messages");
    if (messages->empty()) bad_request("'messages' must not be empty", "messages");
    for (size_t i = 0; i < messages->size(); ++i) {
        const ojson& m = (*messages)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) bad_request(where + " must be an object", "messages");
        const std::string role = get_string(m, "role").value_or("");
        if (role != "user" && role != "assistant")
            bad_request(where + ": 'role' must be user or assistant", "messages");
        auto content = m.find("content");
        if (content == m.end() || content->is_null())
            bad_request(where + ": 'content' is missing", "messages");
        if (content->is_string()) {
            r.messages.push_back({{"role", role}, {"content", *content}});
            continue;
        }
        if (!content->is_array())
            bad_request(where + ": 'content' must be a string or an array of blocks", "messages");
        std::string text;
        ojson calls = ojson::array();
        for (size_t j = 0; j < content->size(); ++j) {
            const ojson& block = (*content)[j];
            const std::string at = where + ".content[" + std::to_string(j) + "]";
            if (!block.is_object()) bad_request(at + " must be an object", "messages");
            const std::string type = get_string(block, "type").value_or("");
            if (type == "text") {
                text += get_string(block, "text").value_or("");
            } else if (type == "tool_use" && role == "assistant") {
                const auto id = get_string(block, "id");
                const auto name = get_string(block, "name");
                auto input = block.find("input");
                if (!id || !name || input == block.end() || !input->is_object())
                    bad_request(at + ": a tool_use block needs 'id', 'name' and an object 'input'",
                                "messages");
                calls.push_back({{"id", *id},
                                 {"type", "function"},
                                 {"function", {{"name", *name}, {"arguments", input->dump()}}}});
            } else if (type == "tool_result" && role == "user") {
                const auto id = get_string(block, "tool_use_id");
                if (!id) bad_request(at + ": a tool_result block needs 'tool_use_id'", "messages");
                auto c = block.find("content");
                std::string result = c == block.end() ? "" : text_of(*c, at + ".content");
                if (get_bool(block, "is_error").value_or(false)) result = "Error: " + result;
                r.messages.push_back(
                    {{"role", "tool"}, {"tool_call_id", *id}, {"content", result}});
            } else if (type == "thinking" || type == "redacted_thinking") {
                // Earlier reasoning is not sent back to the model.
            } else {
                bad_request(at + ": content blocks of type '" + type + "' are not supported",
                            "messages");
            }
        }
        if (role == "assistant") {
            ojson message = {{"role", "assistant"}, {"content", text}};
            if (!calls.empty()) {
                if (text.empty()) message["content"] = nullptr;
                message["tool_calls"] = calls;
            }
            r.messages.push_back(std::move(message));
        } else if (!text.empty() || r.messages.empty() || r.messages.back()["role"] != "tool") {
            r.messages.push_back({{"role", "user"}, {"content", text}});
        }
    }
}

void read_anthropic_tools(const ojson& body, CompletionRequest& r) {
    auto tools = body.find("tools");
    if (tools != body.end() && !tools->is_null()) {
        if (!tools->is_array()) bad_request("'tools' must be an array", "tools");
        ojson openai = ojson::array();
        for (size_t i = 0; i < tools->size(); ++i) {
            const ojson& t = (*tools)[i];
            const std::string where = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) bad_request(where + " must be an object", "tools");
            const std::string type = get_string(t, "type").value_or("custom");
            if (type != "custom")
                bad_request(where + ": server tools ('" + type + "') are not supported", "tools");
            ojson fn = {{"name", get_string(t, "name").value_or("")}};
            if (auto d = get_string(t, "description")) fn["description"] = *d;
            auto schema = t.find("input_schema");
            if (schema == t.end() || !schema->is_object())
                bad_request(where + ": 'input_schema' must be a JSON schema object", "tools");
            fn["parameters"] = *schema;
            openai.push_back({{"type", "function"}, {"function", fn}});
        }
        read_tools(openai, r, "tools");
    }
    auto choice = body.find("tool_choice");
    if (choice == body.end() || choice->is_null()) return;
    if (!choice->is_object()) bad_request("'tool_choice' must be an object", "tool_choice");
    const std::string type = get_string(*choice, "type").value_or("");
    if (type == "auto") {
        r.tool_choice = ToolChoice::kAuto;
    } else if (type == "any") {
        r.tool_choice = ToolChoice::kRequired;
    } else if (type == "none") {
        r.tool_choice = ToolChoice::kNone;
    } else if (type == "tool") {
        r.tool_choice = ToolChoice::kFunction;
        const auto name = get_string(*choice, "name");
        if (!name) bad_request("'tool_choice' of type tool needs a 'name'", "tool_choice");
        r.tool_name = *name;
    } else {
        bad_request("'tool_choice' type must be auto, any, tool or none", "tool_choice");
    }
    r.parallel_tool_calls = !get_bool(*choice, "disable_parallel_tool_use").value_or(false);
    check_tool_choice(r, "tool_choice");
}

void read_sampling(const ojson& body, CompletionRequest& r) {
    SamplingParams& p = r.sampling;
    p = default_sampling();
    if (auto v = get_number(body, "temperature")) {
        if (!(*v >= 0.0 && *v <= 100.0))
            bad_request("'temperature' must be in [0, 100]", "temperature");
        p.temperature = static_cast<float>(*v);
    }
    if (auto v = get_number(body, "top_p")) {
        if (!(*v > 0.0 && *v <= 1.0)) bad_request("'top_p' must be in (0, 1]", "top_p");
        p.top_p = static_cast<float>(*v);
    }
    if (auto v = get_integer(body, "top_k", 0, 1 << 30)) p.top_k = static_cast<int>(*v);
    if (auto it = body.find("stop_sequences"); it != body.end() && !it->is_null()) {
        if (!it->is_array())
            bad_request("'stop_sequences' must be an array of strings", "stop_sequences");
        for (const auto& s : *it) {
            if (!s.is_string() || s.get<std::string>().empty())
                bad_request("'stop_sequences' must hold non-empty strings", "stop_sequences");
            r.stop.push_back(s.get<std::string>());
        }
        if (r.stop.size() > kMaxStops)
            bad_request("'stop_sequences' has more than 16 strings", "stop_sequences");
    }
}

const char* stop_reason(const JobEnd& end) {
    if (end.result.reason == FinishReason::kLength) return "max_tokens";
    if (end.n_calls > 0) return "tool_use";
    if (!end.stop.empty()) return "stop_sequence";
    return "end_turn";
}

json stop_sequence(const JobEnd& end) {
    return end.stop.empty() || end.result.reason == FinishReason::kLength ? json(nullptr)
                                                                          : json(end.stop);
}

json tool_use_block(const ToolCall& call) {
    return {{"type", "tool_use"},
            {"id", make_id("toolu_")},
            {"name", call.name},
            {"input", json::parse(call.arguments)}};
}

std::string event(const char* name, const json& data) {
    return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
}

// A streamed reply: message_start, then content blocks (text, tool_use) with their deltas,
// then message_delta (stop reason, output tokens) and message_stop.
class MessageStream {
  public:
    MessageStream(std::string id, std::string model, int n_prompt, std::shared_ptr<Job> job,
                  const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight)
        : id_(std::move(id)),
          model_(std::move(model)),
          n_prompt_(n_prompt),
          job_(std::move(job)),
          stopping_(stopping),
          in_flight_(std::move(in_flight)) {}

    bool pump(httplib::DataSink& sink) {
        if (!started_) {
            started_ = true;
            const json message = {{"id", id_},
                                  {"type", "message"},
                                  {"role", "assistant"},
                                  {"model", model_},
                                  {"content", json::array()},
                                  {"stop_reason", nullptr},
                                  {"stop_sequence", nullptr},
                                  {"usage", {{"input_tokens", n_prompt_}, {"output_tokens", 0}}}};
            if (!write(sink,
                       event("message_start", {{"type", "message_start"}, {"message", message}})))
                return false;
            if (!write(sink, event("ping", {{"type", "ping"}}))) return false;
        }
        Job::Update u = job_->wait(kPollInterval);
        if (stopping_.load()) job_->cancel();
        for (const ToolCallParser::Event& e : u.events) {
            if (e.call) {
                if (!close_block(sink)) return false;
                json start = tool_use_block(*e.call);
                start["input"] = json::object();
                if (!write(sink, event("content_block_start", {{"type", "content_block_start"},
                                                               {"index", index_},
                                                               {"content_block", start}})) ||
                    !write(sink, event("content_block_delta",
                                       {{"type", "content_block_delta"},
                                        {"index", index_},
                                        {"delta",
                                         {{"type", "input_json_delta"},
                                          {"partial_json", e.call->arguments}}}}))) {
                    return false;
                }
                open_ = true;
                if (!close_block(sink)) return false;
            } else if (!e.text.empty() && !e.reasoning) {  // no thinking blocks here
                if (!open_) {
                    if (!write(sink, event("content_block_start",
                                           {{"type", "content_block_start"},
                                            {"index", index_},
                                            {"content_block", {{"type", "text"}, {"text", ""}}}})))
                        return false;
                    open_ = true;
                }
                if (!write(sink, event("content_block_delta",
                                       {{"type", "content_block_delta"},
                                        {"index", index_},
                                        {"delta", {{"type", "text_delta"}, {"text", e.text}}}})))
                    return false;
            }
        }
        if (!u.end) return true;
        const JobEnd& end = *u.end;
        if (!close_block(sink)) return false;
        if (end.result.reason == FinishReason::kError ||
            end.result.reason == FinishReason::kCancelled) {
            const bool error = end.result.reason == FinishReason::kError;
            const int status = error ? 500 : 503;
            const std::string message =
                error ? "generation failed: " + end.result.error : "the server is shutting down";
            if (!write(sink,
                       "event: error\ndata: " + anthropic_error_body(status, message) + "\n\n"))
                return false;
        } else {
            if (!write(sink, event("message_delta",
                                   {{"type", "message_delta"},
                                    {"delta",
                                     {{"stop_reason", stop_reason(end)},
                                      {"stop_sequence", stop_sequence(end)}}},
                                    {"usage",
                                     {{"output_tokens", end.result.completion_tokens},
                                      {"cache_read_input_tokens", end.result.cached_tokens}}}})) ||
                !write(sink, event("message_stop", {{"type", "message_stop"}}))) {
                return false;
            }
        }
        sink.done();
        return true;
    }

    void cancel() { job_->cancel(); }

  private:
    bool close_block(httplib::DataSink& sink) {
        if (!open_) return true;
        open_ = false;
        return write(sink, event("content_block_stop",
                                 {{"type", "content_block_stop"}, {"index", index_++}}));
    }
    bool write(httplib::DataSink& sink, const std::string& data) {
        if (sink.write(data.data(), data.size())) return true;
        job_->cancel();
        return false;
    }

    std::string id_, model_;
    int n_prompt_;
    std::shared_ptr<Job> job_;
    const std::atomic<bool>& stopping_;
    std::shared_ptr<void> in_flight_;
    bool started_ = false;
    bool open_ = false;  // a content block is open
    int index_ = 0;      // the open block's index, or the next one's
};

}  // namespace

std::string anthropic_error_body(int status, const std::string& message) {
    return dump(json{{"type", "error"},
                     {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}});
}

CompletionRequest parse_messages_request(const std::string& text, bool count_only) {
    const ojson body = parse_ordered_object(text);
    CompletionRequest r;
    if (auto v = get_string(body, "model")) r.model = *v;
    if (auto v = get_integer(body, "max_tokens", 1, kMaxTokensLimit)) {
        r.max_tokens = static_cast<int>(*v);
    } else if (!count_only) {
        bad_request("'max_tokens' is missing", "max_tokens");
    }
    read_sampling(body, r);
    r.stream = get_bool(body, "stream").value_or(false);
    if (auto t = body.find("thinking"); t != body.end() && t->is_object() &&
                                        get_string(*t, "type").value_or("disabled") != "disabled") {
        bad_request("extended thinking is not supported", "thinking");
    }
    read_messages(body, r);
    read_anthropic_tools(body, r);
    return r;
}

void serve_messages(const ServedModel& m, const std::string& body, httplib::Response& res,
                    const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight,
                    Metrics* metrics) {
    CompletionRequest r = parse_messages_request(body);
    if (!m.answers_to(r.model)) {
        throw ApiError(
            404, "the model '" + r.model + "' does not exist; this server serves '" + m.id + "'");
    }
    JobSpec spec = chat_job(m, r);
    const int n_prompt = static_cast<int>(spec.params.prompt.size());
    auto job = std::make_shared<Job>(m, std::move(spec), metrics);
    const std::string id = make_id("msg_");
    if (r.stream) {
        auto stream = std::make_shared<MessageStream>(id, m.id, n_prompt, job, stopping,
                                                      std::move(in_flight));
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
            [stream](bool) { stream->cancel(); });
        return;
    }
    std::string text;
    json content = json::array();
    for (;;) {
        Job::Update u = job->wait(kPollInterval);
        for (const ToolCallParser::Event& e : u.events) {
            if (e.call) {
                if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
                text.clear();
                content.push_back(tool_use_block(*e.call));
            } else if (!e.reasoning) {  // extended thinking is not supported: not shown
                text += e.text;
            }
        }
        if (u.end) {
            const JobEnd& end = *u.end;
            if (end.result.reason == FinishReason::kError)
                throw ApiError(500, "generation failed: " + end.result.error);
            if (end.result.reason == FinishReason::kCancelled)
                throw ApiError(503, "the server is shutting down");
            if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
            const json out = {{"id", id},
                              {"type", "message"},
                              {"role", "assistant"},
                              {"model", m.id},
                              {"content", content},
                              {"stop_reason", stop_reason(end)},
                              {"stop_sequence", stop_sequence(end)},
                              {"usage",
                               {{"input_tokens", end.result.prompt_tokens},
                                {"output_tokens", end.result.completion_tokens},
                                // Of input_tokens (which counts the whole prompt, unlike
                                // Anthropic's): those reused from the prefix cache.
                                {"cache_read_input_tokens", end.result.cached_tokens}}}};
            res.set_content(dump(out), "application/json");
            return;
        }
        if (stopping.load()) job->cancel();
    }
}

void serve_count_tokens(const ServedModel& m, const std::string& body, httplib::Response& res) {
    CompletionRequest r = parse_messages_request(body, /*count_only=*/true);
    if (!m.answers_to(r.model)) {
        throw ApiError(
            404, "the model '" + r.model + "' does not exist; this server serves '" + m.id + "'");
    }
    // The prompt is the same whatever the choice; a forced call's grammar is not needed.
    if (r.tool_choice != ToolChoice::kNone) r.tool_choice = ToolChoice::kAuto;
    const JobSpec spec = chat_job(m, r);
    res.set_content(dump(json{{"input_tokens", spec.params.prompt.size()}}), "application/json");
}

}  // namespace tandem::server
