// One sequence on the CPU backend.
#include "engine/session.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {
namespace {

BackendOptions backend_options(const SessionOptions& o) {
    if (o.n_ctx <= 0) fail("context size {} must be positive", o.n_ctx);
    if (o.max_batch <= 0) fail("batch size {} must be positive", o.max_batch);
    BackendOptions b;
    b.device = o.device;
    b.max_batch = o.max_batch;
    b.n_seq = 1;
    b.n_ctx = o.n_ctx;
    b.kv_type = o.kv_type;
    b.gpu = o.gpu;
    return b;
}

}  // namespace

Session::Session(const Model& model, ThreadPool& pool, const SessionOptions& options)
    : model_(model),
      options_(options),
      backend_(make_backend(model, pool, backend_options(options))),
      decoder_(model, *backend_, options.max_batch) {}

void Session::rewind(int position) {
    position = std::clamp(position, 0, n_past_);
    if (n_past_ - position > max_rewind(model_.config(), options_.n_ctx, options_.max_batch)) position = 0;
    n_past_ = position;
}

void Session::check_room(size_t n) const {
    if (n == 0) fail("nothing to evaluate");
    if (n_past_ + static_cast<int>(n) > options_.n_ctx) {
        fail("{} tokens at position {} exceed the context of {} tokens", n, n_past_, options_.n_ctx);
    }
}

template <typename Eval>
void Session::for_each_batch(std::span<const int32_t> tokens, bool want_all, Eval eval) {
    check_room(tokens.size());
    for (size_t begin = 0; begin < tokens.size(); begin += options_.max_batch) {
        const size_t n = std::min<size_t>(options_.max_batch, tokens.size() - begin);
        places_.resize(n);
        want_.assign(n, want_all ? 1 : 0);
        for (size_t i = 0; i < n; ++i) places_[i] = {0, n_past_ + static_cast<int>(i)};
        if (begin + n == tokens.size()) want_[n - 1] = 1;
        eval(tokens.subspan(begin, n), begin);
        n_past_ += static_cast<int>(n);
    }
}

std::span<const float> Session::feed(std::span<const int32_t> tokens) {
    logits_.resize(n_vocab());
    for_each_batch(tokens, false, [&](std::span<const int32_t> batch, size_t) {
        decoder_.eval(batch, places_, want_, logits_.data());
    });
    return logits_;
}

int32_t Session::feed_greedy(std::span<const int32_t> tokens) {
    int32_t id = -1;
    for_each_batch(tokens, false, [&](std::span<const int32_t> batch, size_t) {
        decoder_.eval_argmax(batch, places_, want_, &id);
    });
    return id;
}

std::span<const float> Session::feed_all(std::span<const int32_t> tokens) {
    logits_.resize(tokens.size() * static_cast<size_t>(n_vocab()));
    for_each_batch(tokens, true, [&](std::span<const int32_t> batch, size_t begin) {
        decoder_.eval(batch, places_, want_, logits_.data() + begin * n_vocab());
    });
    return logits_;
}

}  // namespace tandem
