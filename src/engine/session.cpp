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
    b.gpu_mem_gib = o.gpu_mem_gib;
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

std::span<const float> Session::feed(std::span<const int32_t> tokens) {
    if (tokens.empty()) fail("nothing to evaluate");
    if (n_past_ + static_cast<int>(tokens.size()) > options_.n_ctx) {
        fail("{} tokens at position {} exceed the context of {} tokens", tokens.size(), n_past_, options_.n_ctx);
    }
    const int V = n_vocab();
    logits_.resize(V);
    for (size_t begin = 0; begin < tokens.size(); begin += options_.max_batch) {
        const size_t n = std::min<size_t>(options_.max_batch, tokens.size() - begin);
        places_.resize(n);
        want_.assign(n, 0);
        for (size_t i = 0; i < n; ++i) places_[i] = {0, n_past_ + static_cast<int>(i)};
        const bool last_chunk = begin + n == tokens.size();
        if (last_chunk) want_[n - 1] = 1;
        decoder_.eval(tokens.subspan(begin, n), places_, want_, logits_.data());
        n_past_ += static_cast<int>(n);
    }
    return logits_;
}

std::span<const float> Session::feed_all(std::span<const int32_t> tokens) {
    if (tokens.empty()) fail("nothing to evaluate");
    if (n_past_ + static_cast<int>(tokens.size()) > options_.n_ctx) {
        fail("{} tokens at position {} exceed the context of {} tokens", tokens.size(), n_past_, options_.n_ctx);
    }
    const int V = n_vocab();
    logits_.resize(tokens.size() * static_cast<size_t>(V));
    for (size_t begin = 0; begin < tokens.size(); begin += options_.max_batch) {
        const size_t n = std::min<size_t>(options_.max_batch, tokens.size() - begin);
        places_.resize(n);
        want_.assign(n, 1);
        for (size_t i = 0; i < n; ++i) places_[i] = {0, n_past_ + static_cast<int>(i)};
        decoder_.eval(tokens.subspan(begin, n), places_, want_, logits_.data() + begin * V);
        n_past_ += static_cast<int>(n);
    }
    return logits_;
}

}  // namespace tandem
