// The completion endpoints: a parsed request becomes a Job; its reply goes back whole or as
// server-sent events, tool calls included.
#include "server/completion_endpoints.h"

#include <ctime>
#include <iterator>
#include <memory>

#include "base/log.h"
#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/generation_job.h"
#include "server/openai_json.h"

namespace tandem::server {
namespace {

using nlohmann::json;

// "stop", "length", or "tool_calls" for a reply that called tools.
const char* finish_reason(const JobEnd& end) {
    if (end.n_calls > 0 && end.result.reason != FinishReason::kLength) return "tool_calls";
    return openai_finish_reason(end.result.reason);
}

// A streamed response, alive as long as httplib keeps the connection's content provider.
class EventStream {
  public:
    // `logprobs`: the tokenizer that shows the tokens of the log probabilities asked for, or
    // null.
    EventStream(CompletionKind kind, ResponseHead head, bool include_usage,
                const Tokenizer* logprobs, std::shared_ptr<Job> job,
                const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight)
        : kind_(kind),
          head_(std::move(head)),
          include_usage_(include_usage),
          logprobs_(logprobs),
          job_(std::move(job)),
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
        Job::Update u = job_->wait(kPollInterval);
        if (stopping_.load()) job_->cancel();
        // A chunk of text carries the log probabilities of the tokens sampled until then.
        pending_.insert(pending_.end(), std::make_move_iterator(u.logprobs.begin()),
                        std::make_move_iterator(u.logprobs.end()));
        for (const ToolCallParser::Event& e : u.events) {
            if (e.call) {
                // As OpenAI streams a call: its id and name first, then the arguments.
                const json first = {{"index", n_calls_},
                                    {"id", make_id("call_")},
                                    {"type", "function"},
                                    {"function", {{"name", e.call->name}, {"arguments", ""}}}};
                const json args = {{"index", n_calls_},
                                   {"function", {{"arguments", e.call->arguments}}}};
                ++n_calls_;
                if (!write(sink, chunk(json{{"tool_calls", json::array({first})}}))) return false;
                if (!write(sink, chunk(json{{"tool_calls", json::array({args})}}))) return false;
            } else if (e.reasoning) {
                // Apart from the content, as llama.cpp streams reasoning.
                if (!e.text.empty() && !write(sink, chunk(json{{"reasoning_content", e.text}})))
                    return false;
            } else if (!e.text.empty() && !write(sink, text_chunk_for(e.text, nullptr))) {
                return false;
            }
        }
        if (!u.end) return true;
        const JobEnd& end = *u.end;
        const GenerationResult& r = end.result;
        if (r.reason == FinishReason::kError) {
            if (!write(sink, "data: " + error_body(500, "generation failed: " + r.error) + "\n\n"))
                return false;
        } else if (r.reason != FinishReason::kCancelled) {
            const char* reason = finish_reason(end);
            // (The last chunk carries the log probabilities of tokens whose text never came:
            // a stop string's.)
            json last = kind_ == CompletionKind::kChat && (pending_.empty() || !logprobs_)
                            ? chunk(json::object(), reason)
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

    void cancel() { job_->cancel(); }

  private:
    json chunk(const json& delta, const char* finish_reason = nullptr) const {
        json c = chat_chunk(head_, delta, finish_reason);
        if (include_usage_) c["usage"] = nullptr;  // OpenAI: null on all but the usage chunk
        return c;
    }
    json text_chunk_for(const std::string& text, const char* finish_reason) {
        json c;
        if (kind_ == CompletionKind::kChat) {
            c = chunk(json{{"content", text}}, finish_reason);
        } else {
            c = text_chunk(head_, text, finish_reason);
            if (include_usage_) c["usage"] = nullptr;
        }
        if (logprobs_ && !pending_.empty()) {
            c["choices"][0]["logprobs"] = kind_ == CompletionKind::kChat
                                              ? chat_logprobs(*logprobs_, pending_)
                                              : text_logprobs(*logprobs_, pending_, offset_);
            pending_.clear();
        }
        return c;
    }
    bool write(httplib::DataSink& sink, const json& event) { return write(sink, sse_event(event)); }
    bool write(httplib::DataSink& sink, const std::string& data) {
        if (sink.write(data.data(), data.size())) return true;
        job_->cancel();
        return false;
    }

    CompletionKind kind_;
    ResponseHead head_;
    bool include_usage_;
    const Tokenizer* logprobs_;
    std::vector<TokenLogprobs> pending_;  // sampled, not yet sent
    size_t offset_ = 0;                   // bytes of the completion's pieces sent
    std::shared_ptr<Job> job_;
    const std::atomic<bool>& stopping_;
    std::shared_ptr<void> in_flight_;  // released with the stream
    bool started_ = false;
    int n_calls_ = 0;
};

}  // namespace

void serve_completion(CompletionKind kind, const ServedModel& m, const std::string& body,
                      httplib::Response& res, const std::atomic<bool>& stopping,
                      std::shared_ptr<void> in_flight, Metrics* metrics) {
    CompletionRequest r =
        kind == CompletionKind::kChat ? parse_chat_request(body) : parse_completion_request(body);
    if (!m.answers_to(r.model)) {
        throw ApiError(
            404, "the model '" + r.model + "' does not exist; this server serves '" + m.id + "'",
            "model_not_found", "model");
    }
    JobSpec spec = kind == CompletionKind::kChat ? chat_job(m, r) : text_job(m, r);
    auto job = std::make_shared<Job>(m, std::move(spec), metrics);
    ResponseHead head{make_id(kind == CompletionKind::kChat ? "chatcmpl-" : "cmpl-"),
                      static_cast<int64_t>(std::time(nullptr)), m.id};

    if (r.stream) {
        auto stream = std::make_shared<EventStream>(
            kind, std::move(head), r.include_usage, r.logprobs >= 0 ? m.tokenizer : nullptr, job,
            stopping, std::move(in_flight));
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
            // Whatever way the response ends (done, client gone, server stopping), the request
            // must not keep its slot.
            [stream](bool) { stream->cancel(); });
        return;
    }
    std::string content, reasoning;
    std::vector<json> calls;
    std::vector<TokenLogprobs> logprobs;
    for (;;) {
        Job::Update u = job->wait(kPollInterval);
        logprobs.insert(logprobs.end(), std::make_move_iterator(u.logprobs.begin()),
                        std::make_move_iterator(u.logprobs.end()));
        for (ToolCallParser::Event& e : u.events) {
            if (e.call) {
                calls.push_back(tool_call_json(make_id("call_"), *e.call));
            } else if (e.reasoning) {
                reasoning += e.text;
            } else {
                content += e.text;
            }
        }
        if (u.end) {
            const GenerationResult& result = u.end->result;
            if (result.reason == FinishReason::kError)
                throw ApiError(500, "generation failed: " + result.error);
            if (result.reason == FinishReason::kCancelled) {
                throw ApiError(503, "the server is shutting down", "shutting_down");
            }
            json out = kind == CompletionKind::kChat
                           ? chat_completion(head, content, reasoning, calls, result)
                           : text_completion(head, content, result);
            if (r.logprobs >= 0) {
                size_t offset = 0;
                out["choices"][0]["logprobs"] =
                    kind == CompletionKind::kChat ? chat_logprobs(*m.tokenizer, logprobs)
                                                  : text_logprobs(*m.tokenizer, logprobs, offset);
            }
            res.set_content(dump(out), "application/json");
            return;
        }
        if (stopping.load()) job->cancel();
    }
}

}  // namespace tandem::server
