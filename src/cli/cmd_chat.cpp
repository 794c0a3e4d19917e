// `tandem chat`: an interactive conversation in the terminal through the model's chat template.
// Each line read from stdin is a user message; the reply streams to stdout. Works the same with
// stdin from a pipe (one message a line), which is how it is tested.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/timer.h"
#include "cli/chat_template_source.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "server/chat_prompt.h"
#include "text/stream_decoder.h"

namespace tandem::cli {
namespace {

struct ChatOptions {
    ModelOptions model;
    std::string chat_template;
    std::string system;
    int n_predict = 1024;
    bool timing = false;
    SamplingParams sampling;
};

class Chat {
  public:
    Chat(const ChatOptions& o, LoadedModel& m, const server::ChatPrompt& prompt)
        : o_(o), m_(m), prompt_(prompt), session_(*m.model, *m.pool, m.session) {
        reset();
    }

    void reset() {
        messages_ = nlohmann::ordered_json::array();
        if (!o_.system.empty()) messages_.push_back({{"role", "system"}, {"content", o_.system}});
        cached_.clear();
        session_.reset();
    }

    // Answers one user message, streaming the reply to stdout.
    void turn(const std::string& user) {
        messages_.push_back({{"role", "user"}, {"content", user}});
        std::vector<int32_t> tokens;
        try {
            tokens = prompt_.tokenize(prompt_.render(messages_, nullptr, nullptr));
        } catch (const Error& e) {
            messages_.erase(messages_.size() - 1);
            std::fprintf(stderr, "error: %s\n", e.what());
            return;
        }
        if (static_cast<int>(tokens.size()) >= session_.n_ctx()) {
            messages_.erase(messages_.size() - 1);
            std::fprintf(stderr,
                         "error: the conversation (%zu tokens) no longer fits the context of %d; "
                         "/reset starts over\n",
                         tokens.size(), session_.n_ctx());
            return;
        }
        // Only what differs from the previous turn's cache is evaluated: the conversation so far
        // renders to the same prefix. At least one token is fed to get fresh logits.
        size_t same = 0;
        while (same < cached_.size() && same < tokens.size() && cached_[same] == tokens[same])
            ++same;
        if (same == tokens.size()) --same;
        session_.rewind(static_cast<int>(same));  // may go back further (sliding windows)
        Stopwatch prompt_watch;
        std::span<const float> logits =
            session_.feed(std::span<const int32_t>(tokens).subspan(session_.position()));
        const double prompt_seconds = prompt_watch.seconds();
        cached_ = tokens;

        Sampler sampler(o_.sampling);
        StreamDecoder decoder(*m_.tokenizer, /*render_special=*/false);
        std::vector<int32_t> history = tokens;
        std::string reply;
        Stopwatch gen_watch;
        int generated = 0;
        const int budget =
            std::min(o_.n_predict, session_.n_ctx() - static_cast<int>(tokens.size()));
        for (; generated < budget; ++generated) {
            const int32_t id = sampler.sample(logits, history);
            if (m_.tokenizer->is_eog(id)) break;
            history.push_back(id);
            const std::string piece = decoder.feed(id);
            reply += piece;
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            if (generated + 1 < budget) {
                logits = session_.feed(std::span<const int32_t>(&id, 1));
                cached_.push_back(id);
            }
        }
        const std::string rest = decoder.flush();
        reply += rest;
        std::fwrite(rest.data(), 1, rest.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
        messages_.push_back({{"role", "assistant"}, {"content", reply}});
        if (o_.timing) {
            const double s = gen_watch.seconds();
            std::fprintf(
                stderr,
                "[%zu prompt tokens (%zu new) in %.2f s, %d tokens in %.2f s, %.1f tok/s]\n",
                tokens.size(), tokens.size() - same, prompt_seconds, generated, s,
                generated / std::max(s, 1e-9));
        }
    }

  private:
    const ChatOptions& o_;
    LoadedModel& m_;
    const server::ChatPrompt& prompt_;
    Session session_;
    nlohmann::ordered_json messages_;
    std::vector<int32_t> cached_;  // the tokens whose keys and values the session holds
};

void chat(const ChatOptions& o) {
    if (o.n_predict <= 0) fail("-n {} must be positive", o.n_predict);
    validate(o.sampling);
    LoadedModel m = load_model(o.model);
    if (!m.tokenizer) fail("{}: the model has no vocabulary", o.model.model_path);
    auto source = chat_template_source(*m.model, o.chat_template);
    if (!source)
        fail("{}: the model has no chat template; give one with --chat-template FILE",
             o.model.model_path);
    server::ChatPrompt prompt(source->text, source->origin, *m.tokenizer);
    Chat conversation(o, m, prompt);

    const bool interactive = isatty(STDIN_FILENO);
    if (interactive)
        std::fprintf(stderr, "chat: type a message; /reset starts over, /exit or Ctrl-D quits\n");
    std::string line;
    for (;;) {
        if (interactive) {
            std::fputs("> ", stdout);
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line)) break;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            conversation.reset();
            continue;
        }
        conversation.turn(line);
    }
    if (interactive) std::fputc('\n', stdout);
}

}  // namespace

void add_chat_command(CLI::App& app) {
    auto o = std::make_shared<ChatOptions>();
    CLI::App* cmd =
        app.add_subcommand("chat", "Talk to the model in the terminal (one message per line)");
    add_model_options(cmd, o->model);
    cmd->add_option("--chat-template", o->chat_template,
                    "Jinja chat template file (default: the model's)");
    cmd->add_option("--system", o->system, "System prompt");
    cmd->add_option("-n,--n-predict", o->n_predict, "Most tokens per reply")->capture_default_str();
    cmd->add_flag("--timing", o->timing, "Print prompt and generation speed after each reply");
    cmd->add_option("--temp", o->sampling.temperature, "Temperature (0: greedy)")
        ->capture_default_str();
    cmd->add_option("--top-k", o->sampling.top_k, "Top-k (0: off)")->capture_default_str();
    cmd->add_option("--top-p", o->sampling.top_p, "Top-p (1: off)")->capture_default_str();
    cmd->add_option("--min-p", o->sampling.min_p, "Min-p (0: off)")->capture_default_str();
    cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty, "Repetition penalty (1: off)")
        ->capture_default_str();
    cmd->add_option("-s,--seed", o->sampling.seed, "Random seed")->capture_default_str();
    cmd->callback([o] { chat(*o); });
}

}  // namespace tandem::cli
