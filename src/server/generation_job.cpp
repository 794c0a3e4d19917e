// Requests to scheduler jobs, and their replies back as content and tool calls.
#include "server/generation_job.h"

#include <random>

#include "base/error.h"
#include "server/api_error.h"
#include "server/grammar_constraint.h"

namespace tandem::server {
namespace {

std::shared_ptr<TokenConstraint> constraint_for(const ServedModel& m, const std::string& gbnf,
                                                const std::string& param) {
    try {
        return grammar_constraint(gbnf, m.grammar_vocab);
    } catch (const Error& e) {
        bad_request(std::string("'") + param + "': " + e.what(), param);
    }
}

// Submission-independent parts shared by both kinds.
void common(const ServedModel& m, const CompletionRequest& r, JobSpec& spec) {
    for (const auto& [id, bias] : r.sampling.logit_bias) {
        if (id >= m.tokenizer->n_tokens()) {
            bad_request(fmt::format("'logit_bias': token id {} is outside the vocabulary (0..{})",
                                    id, m.tokenizer->n_tokens() - 1),
                        "logit_bias");
        }
    }
    spec.params.sampling = r.sampling;
    spec.params.logprobs = r.logprobs;
    spec.params.max_tokens = r.max_tokens;
    spec.params.ignore_eos = r.ignore_eos;
    spec.stop = r.stop;
}

// Tools are offered unless tool_choice is none.
bool offers_tools(const CompletionRequest& r) {
    return !r.tool_specs.empty() && r.tool_choice != ToolChoice::kNone;
}

}  // namespace

std::string make_id(const char* prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

std::string chat_prompt_text(const ServedModel& m, const CompletionRequest& r) {
    if (!m.chat) {
        bad_request(
            "the model has no chat template; start the server with --chat-template FILE, or use "
            "/v1/completions");
    }
    try {
        return m.chat->render_chat(r.messages, offers_tools(r) ? r.tools : nlohmann::ordered_json(),
                                   r.template_kwargs);
    } catch (const Error& e) {
        bad_request(std::string("the chat template rejected the conversation: ") + e.what(),
                    "messages");
    }
}

JobSpec chat_job(const ServedModel& m, const CompletionRequest& r) {
    const std::string text = chat_prompt_text(m, r);
    JobSpec spec;
    common(m, r, spec);
    const bool offer_tools = offers_tools(r);
    spec.params.prompt = m.chat->tokenize(text);
    const ToolCallFormat& format = m.chat->tool_format();
    if (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction) {
        std::vector<ToolSpec> tools;
        for (const ToolSpec& t : r.tool_specs) {
            if (r.tool_choice == ToolChoice::kRequired || t.name == r.tool_name) tools.push_back(t);
        }
        std::string gbnf;
        try {
            gbnf = format.grammar(tools, r.parallel_tool_calls);
        } catch (const Error& e) {
            bad_request(std::string("'tools': ") + e.what(), "tools");
        }
        spec.params.constraint = constraint_for(m, gbnf, "tools");
    } else if (!r.grammar.empty()) {
        // A schema (response_format, json_schema) holds the content, which in a reply that
        // carries more (harmony's reasoning) the format places; a raw GBNF `grammar` holds the
        // whole reply, as in llama.cpp.
        const bool content = format.content_grammar && !r.grammar_is_raw;
        spec.params.constraint = constraint_for(
            m, content ? format.content_grammar(r.grammar) : r.grammar, r.grammar_param);
    }
    // Calls are looked for when tools are offered, unless the output is held to another
    // grammar (a JSON reply could read as a call in formats without markers; harmony's calls
    // are marked). A format with a reply structure of its own is read in every reply, for its
    // reasoning and content.
    if (format.reply_parser || (offer_tools && r.grammar.empty())) {
        spec.tool_format = &format;
        spec.parse_calls = offer_tools;
    }
    return spec;
}

JobSpec text_job(const ServedModel& m, const CompletionRequest& r) {
    JobSpec spec;
    common(m, r, spec);
    spec.prompt_param = "prompt";
    // Raw completions: BOS where the vocabulary wants it, special tokens in the text parsed.
    spec.params.prompt =
        r.prompt_is_tokens
            ? r.prompt_tokens
            : m.tokenizer->encode(r.prompt_text, /*add_special=*/true, /*parse_special=*/true);
    if (!r.grammar.empty()) spec.params.constraint = constraint_for(m, r.grammar, r.grammar_param);
    // The prompt as given: its text, or its tokens' (special ones spelled out).
    if (r.echo) spec.echo = r.prompt_is_tokens ? m.tokenizer->decode(r.prompt_tokens) : r.prompt_text;
    return spec;
}

Job::Job(const ServedModel& m, JobSpec spec, Metrics* metrics) {
    try {
        m.scheduler->validate(spec.params);
    } catch (const Error& e) {
        bad_request(e.what(), spec.params.max_tokens > 0 ? "max_tokens" : spec.prompt_param);
    }
    if (spec.tool_format) parser_.emplace(*spec.tool_format, spec.parse_calls);
    text_ = std::make_shared<TextGeneration>(*m.tokenizer, std::move(spec.stop), metrics);
    request_ = std::make_shared<Request>(std::move(spec.params), text_);
    switch (m.scheduler->submit(request_)) {
        case SubmitStatus::kAccepted:
            break;
        case SubmitStatus::kQueueFull:
            throw ApiError(
                503, "the server is busy (every slot is in use and the queue is full); retry later",
                "queue_full");
        case SubmitStatus::kShutDown:
            throw ApiError(503, "the server is shutting down", "shutting_down");
    }
}

Job::Update Job::wait(std::chrono::milliseconds timeout) {
    TextGeneration::Update u = text_->wait(timeout);
    Update out;
    out.logprobs = std::move(u.logprobs);
    if (parser_) {
        if (!u.text.empty()) out.events = parser_->feed(u.text);
        if (u.finished) {
            auto rest = parser_->finish();
            out.events.insert(out.events.end(), rest.begin(), rest.end());
        }
    } else if (!u.text.empty()) {
        out.events.push_back({std::move(u.text), std::nullopt});
    }
    if (u.finished) out.end = JobEnd{*u.finished, u.stop, parser_ ? parser_->n_calls() : 0};
    return out;
}

}  // namespace tandem::server
