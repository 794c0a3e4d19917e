// `tandem perplexity -m MODEL -f TEXT [--ctx N] [--stride N]`: perplexity over a text file, as
// llama.cpp's llama-perplexity reports it (engine/perplexity.h says how windows are scored):
// a progress line per window with the running figure, then the final estimate and its error.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/perplexity.h"
#include "engine/session.h"
#include "text/tokenizer.h"

namespace tandem::cli {
namespace {

struct PerplexityOptions {
    ModelOptions model;
    std::string file;
    int stride = 0;  // 0: --ctx
    int max_windows = 0;  // 0: all
};

void run(PerplexityOptions o) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) fail("{}: cannot open", o.file);
    std::stringstream text;
    text << in.rdbuf();
    if (o.model.ctx == 0) o.model.ctx = 512;  // llama-perplexity's default window
    if (o.max_windows < 0) fail("--chunks {} must be >= 0", o.max_windows);
    LoadedModel m = load_model(o.model);
    if (!m.tokenizer) fail("{}: the model has no tokenizer", o.model.model_path);
    const std::vector<int32_t> tokens = m.tokenizer->encode(text.str());
    const int n_ctx = m.session.n_ctx;
    const PerplexityWindows w = plan_windows(static_cast<int64_t>(tokens.size()), n_ctx,
                                             o.stride > 0 ? o.stride : n_ctx);
    const int n_windows = o.max_windows > 0 ? std::min(o.max_windows, w.count) : w.count;
    std::fprintf(stderr,
                 "perplexity: %zu tokens, %d windows of %d (stride %d), scoring positions %d..%d "
                 "of each\n",
                 tokens.size(), n_windows, n_ctx, w.stride, w.first_target, n_ctx - 1);
    Session session(*m.model, *m.pool, m.session);
    const int n_vocab = m.model->config().n_vocab;
    std::vector<double> nll;
    const Stopwatch watch;
    for (int k = 0; k < n_windows; ++k) {
        std::vector<int32_t> window(tokens.begin() + static_cast<int64_t>(k) * w.stride,
                                    tokens.begin() + static_cast<int64_t>(k) * w.stride + n_ctx);
        // As llama-perplexity: a model that starts its text with BOS sees one at each window.
        if (m.tokenizer->add_bos()) window[0] = m.tokenizer->bos();
        session.reset();
        const std::span<const float> logits = session.feed_all(window);
        const std::vector<double> scored = window_nll(logits, n_vocab, window, w.first_target);
        nll.insert(nll.end(), scored.begin(), scored.end());
        const PerplexityEstimate e = estimate_perplexity(nll);
        std::fprintf(stderr, "[%d/%d] %.4f (%.1f s)\n", k + 1, n_windows, e.ppl, watch.seconds());
    }
    const PerplexityEstimate e = estimate_perplexity(nll);
    std::printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored)\n", e.ppl, e.error,
                static_cast<long long>(e.n));
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
    auto o = std::make_shared<PerplexityOptions>();
    CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a model over a text file");
    add_model_options(cmd, o->model);
    cmd->add_option("-f,--file", o->file, "Text file")->required();
    cmd->add_option("--stride", o->stride,
                    "Tokens between window starts (default: --ctx, windows side by side)");
    cmd->add_option("--chunks", o->max_windows, "Score only the first N windows (default: all)");
    cmd->callback([o] { run(*o); });
}

}  // namespace tandem::cli
