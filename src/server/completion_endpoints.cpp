// The completion endpoints: prompt, submission, and the response whole or streamed.
#include "server/completion_endpoints.h"

#include <chrono>
#include <ctime>
#include <memory>
#include <random>

#include "base/error.h"
#include "base/log.h"
#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/openai_json.h"
#include "server/text_generation.h"

namespace tandem::server {
namespace {

using nlohmann::json;

// How often a waiting handler looks at the shutdown flag when no text comes.
constexpr std::chrono::milliseconds kPollInterval{100};

std::string make_id(const char* prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return fmt::format("{}{:016x}", prefix, rng());
}

std::vector<int32_t> prompt_tokens(CompletionKind kind, const ServedModel& m,
                                   const CompletionRequest& r) {
    if (kind == CompletionKind::kChat) {
        if (!m.chat) {
            bad_request(
                "the model has no chat template; start the server with --chat-template FILE, or "
                "use "
                "/v1/completions");
        }
        std::string text;
        try {
            text = m.chat->render(r.messages, r.tools, r.template_kwargs);
        } catch (const Error& e) {
            bad_request(std::string("the chat template rejected the conversation: ") + e.what(),
                        "messages");
        }
        return m.chat->tokenize(text);
    }
    if (r.prompt_is_tokens) return r.prompt_tokens;
    // Raw completions: BOS where the vocabulary wants it, special tokens in the text parsed.
    return m.tokenizer->encode(r.prompt_text, /*add_special=*/true, /*parse_special=*/true);
}

// A streamed response, alive as long as httplib keeps the connection's content provider.
class EventStream {
  public:
    EventStream(CompletionKind kind, ResponseHead head, bool include_usage,
                std::shared_ptr<TextGeneration> text, std::shared_ptr<Request> request,
                const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight)
        : kind_(kind),
          head_(std::move(head)),
          include_usage_(include_usage),
          text_(std::move(text)),
          request_(std::move(request)),
          stopping_(stopping),
          in_flight_(std::move(in_flight)) {}

    // Called by httplib until it returns false or the sink is done; returning false (a failed
    // write: the client is gone) cancels the request.
    bool pump(httplib::DataSink& sink) {
        if (!started_) {
            started_ = true;
            // OpenAI opens a chat stream with the role, before any content.
            if (kind_ == CompletionKind::kChat &&
                !write(sink, chunk(json{{"role", "assistant"}, {"content", ""}}))) {
                return false;
            }
        }
        TextGeneration::Update u = text_->wait(kPollInterval);
        if (stopping_.load()) request_->cancel();
        if (!u.text.empty() && !write(sink, text_chunk_for(u.text, nullptr))) return false;
        if (!u.finished) return true;
        const GenerationResult& r = *u.finished;
        if (r.reason == FinishReason::kError) {
            if (!write(sink, "data: " + error_body(500, "generation failed: " + r.error) + "\n\n"))
                return false;
        } else if (r.reason != FinishReason::kCancelled) {
            const char* reason = openai_finish_reason(r.reason);
            json last = kind_ == CompletionKind::kChat ? chunk(json::object(), reason)
                                                       : text_chunk_for("", reason);
            if (!write(sink, last)) return false;
            if (include_usage_) {
                const char* object =
                    kind_ == CompletionKind::kChat ? "chat.completion.chunk" : "text_completion";
                if (!write(sink, sse_event(usage_chunk(head_, object, r)))) return false;
            }
        }
        if (!write(sink, std::string("data: [DONE]\n\n"))) return false;
        sink.done();
        return true;
    }

    void cancel() { request_->cancel(); }

  private:
    json chunk(const json& delta, const char* finish_reason = nullptr) const {
        json c = chat_chunk(head_, delta, finish_reason);
        if (include_usage_) c["usage"] = nullptr;  // OpenAI: null on all but the usage chunk
        return c;
    }
    json text_chunk_for(const std::string& text, const char* finish_reason) const {
        if (kind_ == CompletionKind::kChat) return chunk(json{{"content", text}}, finish_reason);
        json c = text_chunk(head_, text, finish_reason);
        if (include_usage_) c["usage"] = nullptr;
        return c;
    }
    bool write(httplib::DataSink& sink, const json& event) { return write(sink, sse_event(event)); }
    bool write(httplib::DataSink& sink, const std::string& data) {
        if (sink.write(data.data(), data.size())) return true;
        request_->cancel();
        return false;
    }

    CompletionKind kind_;
    ResponseHead head_;
    bool include_usage_;
    std::shared_ptr<TextGeneration> text_;
    std::shared_ptr<Request> request_;
    const std::atomic<bool>& stopping_;
    std::shared_ptr<void> in_flight_;  // released with the stream
    bool started_ = false;
};

}  // namespace

void serve_completion(CompletionKind kind, const ServedModel& m, const std::string& body,
                      httplib::Response& res, const std::atomic<bool>& stopping,
                      std::shared_ptr<void> in_flight) {
    CompletionRequest r =
        kind == CompletionKind::kChat ? parse_chat_request(body) : parse_completion_request(body);
    if (!m.answers_to(r.model)) {
        throw ApiError(
            404, "the model '" + r.model + "' does not exist; this server serves '" + m.id + "'",
            "model_not_found", "model");
    }
    GenerationParams params;
    params.prompt = prompt_tokens(kind, m, r);
    params.sampling = r.sampling;
    params.max_tokens = r.max_tokens;
    params.ignore_eos = r.ignore_eos;
    try {
        m.scheduler->validate(params);
    } catch (const Error& e) {
        bad_request(e.what(), r.max_tokens > 0
                                  ? "max_tokens"
                                  : (kind == CompletionKind::kChat ? "messages" : "prompt"));
    }
    auto text = std::make_shared<TextGeneration>(*m.tokenizer, r.stop);
    auto request = std::make_shared<Request>(std::move(params), text);
    switch (m.scheduler->submit(request)) {
        case SubmitStatus::kAccepted:
            break;
        case SubmitStatus::kQueueFull:
            throw ApiError(
                503, "the server is busy (every slot is in use and the queue is full); retry later",
                "queue_full");
        case SubmitStatus::kShutDown:
            throw ApiError(503, "the server is shutting down", "shutting_down");
    }
    ResponseHead head{make_id(kind == CompletionKind::kChat ? "chatcmpl-" : "cmpl-"),
                      static_cast<int64_t>(std::time(nullptr)), m.id};

    if (r.stream) {
        auto stream = std::make_shared<EventStream>(kind, std::move(head), r.include_usage, text,
                                                    request, stopping, std::move(in_flight));
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
            // Whatever way the response ends (done, client gone, server stopping), the request
            // must not keep its slot.
            [stream](bool) { stream->cancel(); });
        return;
    }
    std::string content;
    for (;;) {
        TextGeneration::Update u = text->wait(kPollInterval);
        content += u.text;
        if (u.finished) {
            const GenerationResult& result = *u.finished;
            if (result.reason == FinishReason::kError)
                throw ApiError(500, "generation failed: " + result.error);
            if (result.reason == FinishReason::kCancelled) {
                throw ApiError(503, "the server is shutting down", "shutting_down");
            }
            const json out = kind == CompletionKind::kChat ? chat_completion(head, content, result)
                                                           : text_completion(head, content, result);
            res.set_content(dump(out), "application/json");
            return;
        }
        if (stopping.load()) request->cancel();
    }
}

}  // namespace tandem::server
