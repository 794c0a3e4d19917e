// `tandem run`: generates text from a prompt on the CPU, streaming it as it is produced, and
// ends with a line of timing.
#include <cstdio>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "text/stream_decoder.h"

namespace tandem::cli {
namespace {

struct RunOptions {
    ModelOptions model;
    std::string prompt;
    std::string tokens;
    int n_predict = 128;
    bool print_ids = false;
    SamplingParams sampling;
};

void run(const RunOptions& o) {
    if (o.n_predict < 0) fail("-n {} must be >= 0", o.n_predict);
    if (o.prompt.empty() == o.tokens.empty()) fail("give the prompt as -p TEXT or as --tokens IDS (one of them)");
    validate(o.sampling);
    parse_kv_type(o.model.kv_type);
    std::vector<int32_t> prompt;
    if (!o.tokens.empty()) prompt = parse_token_list(o.tokens, "--tokens");
    LoadedModel m = load_model(o.model);
    if (prompt.empty()) {
        if (!m.tokenizer) fail("{}: the model has no vocabulary; give the prompt with --tokens", o.model.model_path);
        prompt = m.tokenizer->encode(o.prompt, /*add_special=*/true, /*parse_special=*/true);
        if (prompt.empty()) fail("the prompt tokenizes to nothing");
    }
    const int n_vocab = m.model->config().n_vocab;
    for (int32_t id : prompt) {
        if (id >= n_vocab) fail("--tokens: id {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    }
    if (static_cast<int>(prompt.size()) >= m.session.n_ctx) {
        fail("the prompt has {} tokens, more than the context of {} allows (raise --ctx)", prompt.size(),
             m.session.n_ctx);
    }
    if (!m.tokenizer && !o.print_ids) fail("the model has no vocabulary; use --ids to print token ids");

    Session session(*m.model, *m.pool, m.session);
    Sampler sampler(o.sampling);
    std::unique_ptr<StreamDecoder> decoder;
    if (m.tokenizer) decoder = std::make_unique<StreamDecoder>(*m.tokenizer, /*render_special=*/false);
    std::vector<int32_t> history = prompt;

    Stopwatch prompt_watch;
    std::span<const float> logits = session.feed(prompt);
    const double prompt_seconds = prompt_watch.seconds();

    Stopwatch gen_watch;
    int generated = 0;
    const int budget = std::min(o.n_predict, m.session.n_ctx - static_cast<int>(prompt.size()));
    bool first = true;
    for (; generated < budget; ++generated) {
        const int32_t id = sampler.sample(logits, history);
        if (m.tokenizer && m.tokenizer->is_eog(id)) break;
        history.push_back(id);
        if (o.print_ids) {
            std::printf("%s%d", first ? "" : " ", id);
        } else {
            std::string text = decoder->feed(id);
            std::fwrite(text.data(), 1, text.size(), stdout);
        }
        first = false;
        std::fflush(stdout);
        if (generated + 1 < budget) logits = session.feed(std::span<const int32_t>(&id, 1));
    }
    if (decoder && !o.print_ids) {
        std::string rest = decoder->flush();
        std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    std::printf("\n");
    std::fflush(stdout);
    const double gen_seconds = gen_watch.seconds();
    std::fprintf(stderr, "timing: prompt %zu tokens in %.3f s (%.2f tok/s), generated %d tokens in %.3f s (%.2f tok/s)\n",
                 prompt.size(), prompt_seconds, prompt.size() / std::max(prompt_seconds, 1e-9), generated,
                 gen_seconds, generated / std::max(gen_seconds, 1e-9));
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt");
    add_model_options(cmd, o->model);
    cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
    cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids");
    cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->capture_default_str();
    cmd->add_flag("--ids", o->print_ids, "Print generated token ids instead of text");
    cmd->add_option("--temp", o->sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
    cmd->add_option("--top-k", o->sampling.top_k, "Top-k (0: off)")->capture_default_str();
    cmd->add_option("--top-p", o->sampling.top_p, "Top-p (1: off)")->capture_default_str();
    cmd->add_option("--min-p", o->sampling.min_p, "Min-p (0: off)")->capture_default_str();
    cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
    cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "Subtracted per recent occurrence (0: off)")->capture_default_str();
    cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "Subtracted once for a recent token (0: off)")->capture_default_str();
    cmd->add_option("--repeat-last-n", o->sampling.repeat_last_n, "Tokens the penalties look back at")->capture_default_str();
    cmd->add_option("-s,--seed", o->sampling.seed, "Random seed")->capture_default_str();
    cmd->callback([o] { run(*o); });
}

}  // namespace tandem::cli
