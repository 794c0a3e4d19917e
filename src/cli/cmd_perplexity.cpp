// `tandem perplexity -m MODEL -f TEXT [--ctx N] [--stride N]`: perplexity over a text file, as
// llama.cpp's llama-perplexity reports it (engine/perplexity.h says how windows are scored):
// a progress line per window with the running figure, then the final estimate and its error.
// With --kl-divergence-base FILE the scored rows' log-probabilities go to FILE; adding
// --kl-divergence reads them back instead and compares this model's with them (KL divergence,
// top-token agreement), as llama-perplexity judges a quantization against its base model.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/kl_base_file.h"
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
    std::string kl_base;  // the base run's log-probabilities: written, or read with kl_divergence
    bool kl_divergence = false;
};

// The comparison with the base run, window by window.
class KlComparison {
  public:
    KlComparison(const std::string& path, const KlBaseHeader& expected) : base_(path) {
        const KlBaseHeader& h = base_.header();
        if (h.n_vocab != expected.n_vocab)
            fail("{}: a base model of {} tokens, this one has {}", path, h.n_vocab,
                 expected.n_vocab);
        if (h.n_ctx != expected.n_ctx || h.stride != expected.stride ||
            h.first_target != expected.first_target) {
            fail("{}: windows of {} (stride {}) in the base run, {} (stride {}) here: use the "
                 "base run's --ctx and --stride",
                 path, h.n_ctx, h.stride, expected.n_ctx, expected.stride);
        }
        if (h.n_windows < expected.n_windows)
            fail("{}: {} windows in the base run, {} here", path, h.n_windows, expected.n_windows);
    }

    void add_window(int k, std::span<const int32_t> tokens, std::span<const float> log_probs) {
        base_.next_window(base_tokens_, base_log_probs_);
        if (!std::equal(tokens.begin(), tokens.end(), base_tokens_.begin()))
            fail("window {}: its tokens differ from the base run's (another text or tokenizer)",
                 k + 1);
        const size_t V = base_.header().n_vocab;
        const size_t first = base_.header().first_target;
        for (size_t r = 0; r < log_probs.size() / V; ++r) {
            const std::span<const float> b(base_log_probs_.data() + r * V, V);
            const std::span<const float> m(log_probs.data() + r * V, V);
            kl_.push_back(kl_divergence(b, m));
            same_top_ += top_token(b) == top_token(m);
            base_nll_.push_back(-static_cast<double>(b[tokens[first + r]]));
        }
    }

    const std::vector<double>& kl() const { return kl_; }
    int64_t same_top() const { return same_top_; }
    const std::vector<double>& base_nll() const { return base_nll_; }

  private:
    KlBaseReader base_;
    std::vector<int32_t> base_tokens_;
    std::vector<float> base_log_probs_;
    std::vector<double> kl_, base_nll_;
    int64_t same_top_ = 0;
};

void run(PerplexityOptions o) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) fail("{}: cannot open", o.file);
    std::stringstream text;
    text << in.rdbuf();
    if (o.model.ctx == 0) o.model.ctx = 512;  // llama-perplexity's default window
    if (o.max_windows < 0) fail("--chunks {} must be >= 0", o.max_windows);
    if (o.kl_divergence && o.kl_base.empty())
        fail("--kl-divergence needs --kl-divergence-base FILE (written by a run of the base model)");
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
    const KlBaseHeader kl_header{static_cast<uint32_t>(n_vocab), static_cast<uint32_t>(n_ctx),
                                 static_cast<uint32_t>(w.stride),
                                 static_cast<uint32_t>(w.first_target),
                                 static_cast<uint32_t>(n_windows)};
    std::unique_ptr<KlBaseWriter> base_out;
    std::unique_ptr<KlComparison> compare;
    if (o.kl_divergence) {
        compare = std::make_unique<KlComparison>(o.kl_base, kl_header);
    } else if (!o.kl_base.empty()) {
        base_out = std::make_unique<KlBaseWriter>(o.kl_base, kl_header);
    }
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
        if (base_out || compare) {
            const std::vector<float> log_probs =
                window_log_probs(logits, n_vocab, n_ctx, w.first_target);
            if (base_out) base_out->add_window(window, log_probs);
            if (compare) compare->add_window(k, window, log_probs);
        }
        const PerplexityEstimate e = estimate_perplexity(nll);
        if (compare) {
            std::fprintf(stderr, "[%d/%d] %.4f, mean KLD %.6f (%.1f s)\n", k + 1, n_windows, e.ppl,
                         estimate_kl(compare->kl(), compare->same_top()).mean, watch.seconds());
        } else {
            std::fprintf(stderr, "[%d/%d] %.4f (%.1f s)\n", k + 1, n_windows, e.ppl,
                         watch.seconds());
        }
    }
    if (base_out) base_out->finish();
    const PerplexityEstimate e = estimate_perplexity(nll);
    std::printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored)\n", e.ppl, e.error,
                static_cast<long long>(e.n));
    if (base_out) std::printf("KL divergence base: %s\n", o.kl_base.c_str());
    if (!compare) return;
    const PerplexityEstimate base = estimate_perplexity(compare->base_nll());
    const KlEstimate kl = estimate_kl(compare->kl(), compare->same_top());
    std::printf("Base PPL = %.4f, ratio %.6f\n", base.ppl, e.ppl / base.ppl);
    std::printf("Mean KLD: %.6f +/- %.6f\n", kl.mean, kl.error);
    std::printf("Median KLD: %.6f, 99th percentile %.6f, max %.6f\n", kl.median, kl.p99, kl.max);
    std::printf("Same top token: %.3f%%\n", 100.0 * kl.same_top);
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
    cmd->add_option("--kl-divergence-base", o->kl_base,
                    "Write the scored rows' log-probabilities to FILE (a base model's run), or, "
                    "with --kl-divergence, read them and compare");
    cmd->add_flag("--kl-divergence", o->kl_divergence,
                  "Compare with the base run of --kl-divergence-base: KL divergence and top-token "
                  "agreement per scored token");
    cmd->callback([o] { run(*o); });
}

}  // namespace tandem::cli
