// One generation request on its way through the scheduler, whichever API it came by: a parsed
// request becomes prompt tokens, sampling, limits, stop strings and an output constraint; then
// the reply comes back as content and tool calls, as they are settled. The OpenAI and the
// Anthropic endpoints differ only in how they write what this hands them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/completion_request.h"
#include "server/metrics.h"
#include "server/served_model.h"
#include "server/text_generation.h"
#include "text/tool_call_format.h"

namespace tandem::server {

struct JobSpec {
    GenerationParams params;
    std::vector<std::string> stop;
    const ToolCallFormat* tool_format = nullptr;  // null: the reply is all content
    bool parse_calls = true;  // false: only the format's structure is read (harmony's channels)
    const char* prompt_param = "messages";  // the field a prompt error names
    std::string echo;  // text completions with `echo`: the prompt's text, before the reply's
};

// The prompt of a chat (rendered with tools as tool_choice says) or of a text completion, and
// the constraint of the output (a grammar, or the format's call grammar for a required call).
// Throws ApiError 400 for what cannot be served.
JobSpec chat_job(const ServedModel& model, const CompletionRequest& request);
// The text of a chat's prompt, as chat_job renders it (/apply-template answers with it).
std::string chat_prompt_text(const ServedModel& model, const CompletionRequest& request);
JobSpec text_job(const ServedModel& model, const CompletionRequest& request);

// Why a reply ended, as the APIs report it.
struct JobEnd {
    GenerationResult result;
    std::string stop;  // the stop string that ended it, if one did
    int n_calls = 0;   // tool calls in the reply
};

class Job {
  public:
    // Validates and submits; throws ApiError (400 for a request that can never run, 503 when
    // the queue is full or the server is stopping).
    Job(const ServedModel& model, JobSpec spec, Metrics* metrics);
    // A reply nobody will read any more (the handler threw, the stream ended) frees its slot.
    ~Job() { cancel(); }
    Job(const Job&) = delete;
    Job& operator=(const Job&) = delete;

    struct Update {
        std::vector<ToolCallParser::Event> events;  // content and calls, in order
        std::vector<TokenLogprobs> logprobs;        // asked for: the tokens sampled since
        std::optional<JobEnd> end;                  // set once, after the last events
    };
    // Waits up to `timeout` for something new.
    Update wait(std::chrono::milliseconds timeout);
    void cancel() {
        if (request_) request_->cancel();
    }

  private:
    std::shared_ptr<TextGeneration> text_;
    std::shared_ptr<Request> request_;
    std::optional<ToolCallParser> parser_;
};

// How often a waiting handler looks at the shutdown flag when nothing comes.
constexpr std::chrono::milliseconds kPollInterval{100};

// A random id with a prefix ("chatcmpl-", "call_", "msg_", ...).
std::string make_id(const char* prefix);

}  // namespace tandem::server
