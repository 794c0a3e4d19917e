// The completion endpoints: a parsed request becomes a Job; its reply goes back whole or as
// server-sent events, tool calls included.
#include "server/completion_endpoints.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iterator>
#include <memory>
#include <vector>

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

// Per-choice sums into one result: the prompt once, the completions' tokens together (as
// OpenAI counts `n` choices); the timings are the first choice's.
GenerationResult combined(const std::vector<GenerationResult>& results) {
    GenerationResult r = results.front();
    for (size_t i = 1; i < results.size(); ++i) r.completion_tokens += results[i].completion_tokens;
    return r;
}

// A streamed response, alive as long as httplib keeps the connection's content provider: the
// chunks of each choice (one job each), tagged with its index.
class EventStream {
  public:
    // `logprobs`: the tokenizer that shows the tokens of the log probabilities asked for, or
    // null; `echo`: text each choice opens with (a text completion's echoed prompt), or empty.
    EventStream(CompletionKind kind, ResponseHead head, bool include_usage,
                const Tokenizer* logprobs, std::string echo,
                const std::vector<std::shared_ptr<Job>>& jobs, const std::atomic<bool>& stopping,
                std::shared_ptr<void> in_flight)
        : kind_(kind),
          head_(std::move(head)),
          include_usage_(include_usage),
          logprobs_(logprobs),
          echo_(std::move(echo)),
          stopping_(stopping),
          in_flight_(std::move(in_flight)) {
        for (const auto& job : jobs) choices_.push_back({job});
    }

    // Called by httplib until it returns false or the sink is done; returning false (a failed
    // write: the client is gone) cancels the request.
    bool pump(httplib::DataSink& sink) {
        // One choice waits as long as a poll; several share it.
        const auto timeout = std::max(std::chrono::milliseconds(5),
                                      kPollInterval / static_cast<int>(choices_.size()));
        bool all_done = true;
        for (size_t i = 0; i < choices_.size(); ++i) {
            if (choices_[i].done) continue;
            if (!pump_choice(sink, i, timeout)) return false;
            if (failed_) return true;
            all_done = all_done && choices_[i].done;
        }
        if (!all_done) return true;
        if (include_usage_ && !cancelled_) {
            std::vector<GenerationResult> results;
            for (const Choice& c : choices_) results.push_back(c.result);
            const char* object =
                kind_ == CompletionKind::kChat ? "chat.completion.chunk" : "text_completion";
            if (!write(sink, sse_event(usage_chunk(head_, object, combined(results))))) return false;
        }
        if (!write(sink, std::string("data: [DONE]\n\n"))) return false;
        sink.done();
        return true;
    }

    void cancel() {
        for (Choice& c : choices_) c.job->cancel();
    }

  private:
    struct Choice {
        std::shared_ptr<Job> job;
        bool started = false;
        int n_calls = 0;
        std::vector<TokenLogprobs> pending;  // sampled, not yet sent
        size_t offset = 0;                   // bytes of the completion's pieces sent
        bool done = false;
        GenerationResult result;
    };

    bool pump_choice(httplib::DataSink& sink, size_t index, std::chrono::milliseconds timeout) {
        Choice& c = choices_[index];
        if (!c.started) {
            c.started = true;
            // OpenAI opens a chat stream with the role, before any content.
            if (kind_ == CompletionKind::kChat &&
                !write(sink, chunk(index, json{{"role", "assistant"}, {"content", ""}}))) {
                return false;
            }
            if (!echo_.empty() && !write(sink, text_chunk_for(index, echo_, nullptr))) return false;
        }
        Job::Update u = c.job->wait(timeout);
        if (stopping_.load()) cancel();
        // A chunk of text carries the log probabilities of the tokens sampled until then.
        c.pending.insert(c.pending.end(), std::make_move_iterator(u.logprobs.begin()),
                         std::make_move_iterator(u.logprobs.end()));
        for (const ToolCallParser::Event& e : u.events) {
            if (e.call) {
                // As OpenAI streams a call: its id and name first, then the arguments.
                const json first = {{"index", c.n_calls},
                                    {"id", make_id("call_")},
                                    {"type", "function"},
                                    {"function", {{"name", e.call->name}, {"arguments", ""}}}};
                const json args = {{"index", c.n_calls},
                                   {"function", {{"arguments", e.call->arguments}}}};
                ++c.n_calls;
                if (!write(sink, chunk(index, json{{"tool_calls", json::array({first})}})))
                    return false;
                if (!write(sink, chunk(index, json{{"tool_calls", json::array({args})}})))
                    return false;
            } else if (e.reasoning) {
                // Apart from the content, as llama.cpp streams reasoning.
                if (!e.text.empty() &&
                    !write(sink, chunk(index, json{{"reasoning_content", e.text}})))
                    return false;
            } else if (!e.text.empty() && !write(sink, text_chunk_for(index, e.text, nullptr))) {
                return false;
            }
        }
        if (!u.end) return true;
        const JobEnd& end = *u.end;
        c.done = true;
        c.result = end.result;
        if (end.result.reason == FinishReason::kError) {
            // The stream ends with the error, whatever the other choices do.
            cancel();
            failed_ = true;
            if (!write(sink, "data: " + error_body(500, "generation failed: " + end.result.error) +
                                 "\n\n"))
                return false;
            if (!write(sink, std::string("data: [DONE]\n\n"))) return false;
            sink.done();
            return true;
        }
        if (end.result.reason == FinishReason::kCancelled) {
            cancelled_ = true;
            return true;
        }
        const char* reason = finish_reason(end);
        // (The last chunk carries the log probabilities of tokens whose text never came: a stop
        // string's.)
        const json last = kind_ == CompletionKind::kChat && (c.pending.empty() || !logprobs_)
                              ? chunk(index, json::object(), reason)
                              : text_chunk_for(index, "", reason);
        return write(sink, last);
    }

    json chunk(size_t index, const json& delta, const char* finish_reason = nullptr) const {
        json c = chat_chunk(head_, delta, finish_reason);
        c["choices"][0]["index"] = index;
        if (include_usage_) c["usage"] = nullptr;  // OpenAI: null on all but the usage chunk
        return c;
    }
    json text_chunk_for(size_t index, const std::string& text, const char* finish_reason) {
        Choice& choice = choices_[index];
        json c;
        if (kind_ == CompletionKind::kChat) {
            c = chunk(index, json{{"content", text}}, finish_reason);
        } else {
            c = text_chunk(head_, text, finish_reason);
            c["choices"][0]["index"] = index;
            if (include_usage_) c["usage"] = nullptr;
        }
        if (logprobs_ && !choice.pending.empty()) {
            c["choices"][0]["logprobs"] =
                kind_ == CompletionKind::kChat ? chat_logprobs(*logprobs_, choice.pending)
                                               : text_logprobs(*logprobs_, choice.pending,
                                                               choice.offset);
            choice.pending.clear();
        }
        return c;
    }
    bool write(httplib::DataSink& sink, const json& event) { return write(sink, sse_event(event)); }
    bool write(httplib::DataSink& sink, const std::string& data) {
        if (sink.write(data.data(), data.size())) return true;
        cancel();
        return false;
    }

    CompletionKind kind_;
    ResponseHead head_;
    bool include_usage_;
    const Tokenizer* logprobs_;
    std::string echo_;
    std::vector<Choice> choices_;
    const std::atomic<bool>& stopping_;
    std::shared_ptr<void> in_flight_;  // released with the stream
    bool failed_ = false;     // a choice failed: the stream has ended
    bool cancelled_ = false;  // a choice was cancelled (the server is stopping)
};

// A non-streamed choice, gathered.
struct GatheredChoice {
    std::string content, reasoning;
    std::vector<json> calls;
    std::vector<TokenLogprobs> logprobs;
    GenerationResult result;
};

GatheredChoice gather(Job& job, const std::atomic<bool>& stopping) {
    GatheredChoice g;
    for (;;) {
        Job::Update u = job.wait(kPollInterval);
        g.logprobs.insert(g.logprobs.end(), std::make_move_iterator(u.logprobs.begin()),
                          std::make_move_iterator(u.logprobs.end()));
        for (ToolCallParser::Event& e : u.events) {
            if (e.call) {
                g.calls.push_back(tool_call_json(make_id("call_"), *e.call));
            } else if (e.reasoning) {
                g.reasoning += e.text;
            } else {
                g.content += e.text;
            }
        }
        if (u.end) {
            g.result = u.end->result;
            if (g.result.reason == FinishReason::kError)
                throw ApiError(500, "generation failed: " + g.result.error);
            if (g.result.reason == FinishReason::kCancelled) {
                throw ApiError(503, "the server is shutting down", "shutting_down");
            }
            return g;
        }
        if (stopping.load()) job.cancel();
    }
}

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
    // `n` choices are `n` jobs, the seed of choice i the request's plus i (a request without
    // a seed drew a random one).
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < r.n; ++i) {
        JobSpec choice = spec;
        choice.params.sampling.seed += static_cast<uint64_t>(i);
        jobs.push_back(std::make_shared<Job>(m, std::move(choice), metrics));
    }
    ResponseHead head{make_id(kind == CompletionKind::kChat ? "chatcmpl-" : "cmpl-"),
                      static_cast<int64_t>(std::time(nullptr)), m.id};

    if (r.stream) {
        auto stream = std::make_shared<EventStream>(
            kind, std::move(head), r.include_usage, r.logprobs >= 0 ? m.tokenizer : nullptr,
            spec.echo, jobs, stopping, std::move(in_flight));
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
            // Whatever way the response ends (done, client gone, server stopping), the request
            // must not keep its slot.
            [stream](bool) { stream->cancel(); });
        return;
    }
    std::vector<GatheredChoice> choices;
    for (const auto& job : jobs) choices.push_back(gather(*job, stopping));
    json out;
    std::vector<GenerationResult> results;
    for (size_t i = 0; i < choices.size(); ++i) {
        const GatheredChoice& g = choices[i];
        json one = kind == CompletionKind::kChat
                       ? chat_completion(head, g.content, g.reasoning, g.calls, g.result)
                       : text_completion(head, spec.echo + g.content, g.result);
        if (r.logprobs >= 0) {
            size_t offset = 0;
            one["choices"][0]["logprobs"] = kind == CompletionKind::kChat
                                                ? chat_logprobs(*m.tokenizer, g.logprobs)
                                                : text_logprobs(*m.tokenizer, g.logprobs, offset);
        }
        one["choices"][0]["index"] = i;
        results.push_back(g.result);
        if (i == 0) {
            out = std::move(one);
        } else {
            out["choices"].push_back(std::move(one["choices"][0]));
        }
    }
    if (choices.size() > 1) out["usage"] = usage_json(combined(results));
    res.set_content(dump(out), "application/json");
}

}  // namespace tandem::server
