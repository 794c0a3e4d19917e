// Continuous batching over the KV cache's sequence slots.
#include "engine/scheduler.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "base/system_memory.h"
#include "base/timer.h"

namespace tandem {
namespace {

BackendOptions backend_options(const SchedulerOptions& o) {
    BackendOptions b;
    b.device = o.device;
    b.max_batch = o.max_batch;
    b.n_seq = o.n_slots;
    b.n_ctx = o.n_ctx;
    b.kv_type = o.kv_type;
    b.gpu = o.gpu;
    return b;
}

const SchedulerOptions& checked(const SchedulerOptions& o) {
    if (o.n_slots <= 0) fail("scheduler: {} slots (at least 1)", o.n_slots);
    if (o.n_ctx <= 1) fail("scheduler: context of {} positions per slot (at least 2)", o.n_ctx);
    // Every busy slot may add a decode row; prefill needs at least one more row to progress.
    if (o.max_batch <= o.n_slots) {
        fail("scheduler: batch of {} tokens must exceed the {} slots", o.max_batch, o.n_slots);
    }
    if (o.queue_capacity < 0) fail("scheduler: queue capacity {} (at least 0)", o.queue_capacity);
    return o;
}

}  // namespace

Scheduler::Scheduler(const Model& model, ThreadPool& pool, const SchedulerOptions& options)
    : model_(model),
      options_(checked(options)),
      backend_(make_backend(model, pool, backend_options(options_))),
      decoder_(model, *backend_, options.max_batch),
      slots_(options.n_slots) {
    for (int i = 0; i < options_.n_slots; ++i) slots_[i].index = i;
    max_rewind_ = max_rewind(model.config(), options_.n_ctx, options_.max_batch);
    free_slots_ = options_.n_slots;
    if (options_.reuse_prefix && options_.cache_bytes > 0) {
        if (const size_t per_position = backend_->sequence_state_bytes(1); per_position > 0) {
            cache_ =
                std::make_unique<PrefixCache>(options_.cache_bytes, max_rewind_, options_.n_ctx);
            log_info(
                "prefix cache: {} of host memory beyond the slots (a sequence of {} tokens takes "
                "{})",
                format_bytes(options_.cache_bytes), options_.n_ctx,
                format_bytes(backend_->sequence_state_bytes(options_.n_ctx)));
        } else {
            log_info(
                "prefix cache: the {} backend cannot copy sequences to host memory; reuse stays "
                "within the {} slots",
                backend_->name(), options_.n_slots);
        }
    }
    if (cache_) {
        cache_stats_.cache_budget = static_cast<int64_t>(options_.cache_bytes);
    }
    tokens_.reserve(options_.max_batch);
    places_.reserve(options_.max_batch);
    want_.reserve(options_.max_batch);
    row_slot_.reserve(options_.n_slots);
    logits_.resize(static_cast<size_t>(options_.n_slots) * model.config().n_vocab);
    warm_up();
    thread_ = std::thread([this] { run(); });
}

void Scheduler::warm_up() {
    // The first forward pass of a process pays once for what later ones find ready (scratch and
    // KV memory touched for the first time, the thread pool waking up): tens of milliseconds
    // that would otherwise land on the first request's first token. One token at slot 0's
    // position 0 pays it now; the slot keeps no tokens, so the next request overwrites it.
    const Stopwatch watch;
    const int32_t token = 0;
    const TokenPlace place{0, 0};
    const uint8_t want = 1;
    decoder_.eval(std::span<const int32_t>(&token, 1), std::span<const TokenPlace>(&place, 1),
                  std::span<const uint8_t>(&want, 1), logits_.data());
    log_debug("scheduler: warm-up forward pass in {:.1f} ms", watch.seconds() * 1e3);
}

Scheduler::~Scheduler() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void Scheduler::validate(const GenerationParams& p) const {
    const int n_vocab = model_.config().n_vocab;
    const int n_prompt = static_cast<int>(p.prompt.size());
    if (n_prompt == 0) fail("the prompt is empty");
    for (int32_t id : p.prompt) {
        if (id < 0 || id >= n_vocab)
            fail("prompt token {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    }
    if (p.max_tokens < 0) fail("max_tokens {} must be >= 0", p.max_tokens);
    const int wanted = std::max(p.max_tokens, 1);
    if (static_cast<int64_t>(n_prompt) + wanted > options_.n_ctx) {
        if (p.max_tokens > 0) {
            fail("the prompt ({} tokens) plus max_tokens ({}) exceeds the context of {} tokens",
                 n_prompt, p.max_tokens, options_.n_ctx);
        }
        fail("the prompt ({} tokens) leaves no room to generate in the context of {} tokens",
             n_prompt, options_.n_ctx);
    }
    for (const auto& [id, bias] : p.sampling.logit_bias) {
        if (id < 0 || id >= n_vocab)
            fail("logit_bias token {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    }
    if (p.logprobs > kMaxTopLogprobs)
        fail("logprobs {} asks for more than {} alternatives", p.logprobs, kMaxTopLogprobs);
    tandem::validate(p.sampling);
}

SubmitStatus Scheduler::submit(const std::shared_ptr<Request>& request) {
    validate(request->params());
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return SubmitStatus::kShutDown;
        // Requests that will take a free slot at the next step do not count against the queue.
        if (static_cast<int>(queue_.size()) >= options_.queue_capacity + free_slots_) {
            return SubmitStatus::kQueueFull;
        }
        request->mark_submitted(now_seconds());
        queue_.push_back(request);
    }
    wake_.notify_one();
    return SubmitStatus::kAccepted;
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    SchedulerStats s;
    s.slots_total = options_.n_slots;
    s.slots_busy = options_.n_slots - free_slots_;
    s.queued = static_cast<int>(queue_.size());
    s.finished = finished_;
    s.cancelled = cancelled_;
    s.kv_used = kv_used_.load(std::memory_order_relaxed);
    s.kv_capacity = static_cast<int64_t>(options_.n_slots) * options_.n_ctx;
    s.prefix_hits = prefix_hits_;
    s.prefix_cached_tokens = prefix_cached_tokens_;
    s.kv_kept = kv_kept_;
    s.cache_loads = cache_stats_.cache_loads;
    s.cache_saves = cache_stats_.cache_saves;
    s.cache_evictions = cache_stats_.cache_evictions;
    s.cache_bytes = cache_stats_.cache_bytes;
    s.cache_budget = cache_stats_.cache_budget;
    s.cache_entries = cache_stats_.cache_entries;
    return s;
}

void Scheduler::run() {
    while (admit()) step();
    // Shutting down: nobody will serve what is left.
    for (Slot& slot : slots_) {
        if (slot.request) finish(slot, FinishReason::kCancelled);
    }
    std::deque<std::shared_ptr<Request>> left;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        left.swap(queue_);
    }
    for (const auto& request : left) {
        GenerationResult result;
        result.reason = FinishReason::kCancelled;
        result.prompt_tokens = static_cast<int>(request->params().prompt.size());
        notify_finish(*request, result);
    }
}

bool Scheduler::admit() {
    std::vector<std::shared_ptr<Request>> dropped;  // cancelled while queued
    std::vector<std::shared_ptr<Request>> taken;    // to free slots
    {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock,
                   [&] { return stopping_ || !queue_.empty() || free_slots_ < options_.n_slots; });
        if (stopping_) return false;
        std::erase_if(queue_, [&](const std::shared_ptr<Request>& r) {
            if (!r->cancelled()) return false;
            dropped.push_back(r);
            return true;
        });
        // Counted as busy at once, so submit() judges the queue's room as before; which slot
        // each takes is decided below, outside the lock, since it may copy a state.
        while (!queue_.empty() && free_slots_ > 0) {
            taken.push_back(std::move(queue_.front()));
            queue_.pop_front();
            --free_slots_;
        }
        finished_ += dropped.size();
        cancelled_ += dropped.size();
    }
    std::vector<Slot*> admitted;
    for (auto& request : taken) {
        Slot& slot = place(request->params().prompt);
        slot.request = std::move(request);
        admitted.push_back(&slot);
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const Slot* slot : admitted) {
            if (slot->n_reused == 0) continue;
            ++prefix_hits_;
            prefix_cached_tokens_ += static_cast<uint64_t>(slot->n_reused);
        }
        publish_kept();
    }
    const double now = now_seconds();
    for (Slot* slot : admitted) {
        const GenerationParams& p = slot->request->params();
        slot->sampler.emplace(p.sampling);
        slot->history = p.prompt;
        slot->n_prompt = static_cast<int>(p.prompt.size());
        slot->n_cached = slot->n_reused;  // prefill continues after the reused prefix
        slot->n_generated = 0;
        slot->pending = -1;
        slot->admitted = admissions_++;
        slot->admitted_at = now;
        slot->first_token_at = 0.0;
        log_debug("request {}: slot {}, {} prompt tokens ({} cached{})", slot->request->id(),
                  slot->index, slot->n_prompt, slot->n_reused,
                  slot->loaded ? ", from host memory" : "");
    }
    for (const auto& request : dropped) {
        GenerationResult result;
        result.reason = FinishReason::kCancelled;
        result.prompt_tokens = static_cast<int>(request->params().prompt.size());
        result.queue_seconds = result.total_seconds = now - request->submitted_at();
        notify_finish(*request, result);
    }
    return true;
}

int Scheduler::reusable(const Slot& slot, const std::vector<int32_t>& prompt) const {
    return options_.reuse_prefix ? reusable_prefix(slot.kept, prompt, max_rewind_) : 0;
}

Scheduler::Slot& Scheduler::place(const std::vector<int32_t>& prompt) {
    Slot* best = nullptr;  // serves the most of the prompt (ties: least recently freed)
    Slot* oldest = nullptr;
    int best_prefix = -1;
    for (Slot& slot : slots_) {
        if (slot.request) continue;
        const int prefix = reusable(slot, prompt);
        if (prefix > best_prefix || (prefix == best_prefix && slot.freed < best->freed)) {
            best = &slot;
            best_prefix = prefix;
        }
        if (!oldest || slot.freed < oldest->freed) oldest = &slot;
    }
    const auto [entry, entry_prefix] =
        cache_ ? cache_->find(prompt) : std::pair<const PrefixCache::Entry*, int>{nullptr, 0};
    // Copying a whole state in (and the slot's out) to spare a few positions' compute (prompts
    // that share a chat template's first tokens) costs more than it saves.
    constexpr int kMinLoadGain = 16;
    if (entry_prefix < best_prefix + kMinLoadGain) {
        save_kept(*best, best_prefix, nullptr);
        best->kept.clear();
        best->n_reused = best_prefix;
        best->loaded = false;
        return *best;
    }
    // Host memory serves more: its copy goes into the slot whose own tokens were freed longest
    // ago (kept in host memory in turn, when worth it).
    Slot& slot = *oldest;
    save_kept(slot, 0, entry);
    slot.kept.clear();
    slot.n_reused = 0;
    slot.loaded = false;
    try {
        backend_->load_sequence(slot.index, static_cast<int>(entry->tokens.size()),
                                entry->state.data());
        cache_->touch(entry);
        slot.n_reused = entry_prefix;
        slot.loaded = true;
        ++cache_loads_;
    } catch (const std::exception& e) {
        // The slot starts from position 0, which overwrites whatever the copy left.
        log_warn("prefix cache: copying {} positions into slot {} failed: {}", entry->tokens.size(),
                 slot.index, e.what());
    }
    return slot;
}

void Scheduler::save_kept(Slot& slot, int reused, const PrefixCache::Entry* keep) {
    // A request that continues the kept tokens loses at most their last few (a reply's end,
    // which the chat template renders back differently): not worth a copy.
    constexpr int kContinuationSlack = 16;
    const int n = static_cast<int>(slot.kept.size());
    if (!cache_ || n - reused <= kContinuationSlack || cache_->covers(slot.kept)) return;
    const PrefixCache::Entry* entry = nullptr;
    try {
        entry = cache_->add(slot.kept, backend_->sequence_state_bytes(n), keep);
        if (!entry) return;  // larger than the budget
        backend_->save_sequence(slot.index, n, entry->state.data());
        ++cache_saves_;
    } catch (const std::exception& e) {
        log_warn("prefix cache: copying slot {}'s {} positions to host memory failed: {}",
                 slot.index, n, e.what());
        if (entry) cache_->remove(entry);
    }
}

void Scheduler::publish_kept() {
    kv_kept_ = 0;
    for (const Slot& slot : slots_) {
        if (!slot.request) kv_kept_ += static_cast<int64_t>(slot.kept.size());
    }
    if (!cache_) return;
    cache_stats_.cache_loads = cache_loads_;
    cache_stats_.cache_saves = cache_saves_;
    cache_stats_.cache_evictions = cache_->evictions();
    cache_stats_.cache_bytes = static_cast<int64_t>(cache_->bytes());
    cache_stats_.cache_entries = static_cast<int64_t>(cache_->entries());
}

bool Scheduler::step() {
    for (Slot& slot : slots_) {
        if (slot.request && slot.request->cancelled()) finish(slot, FinishReason::kCancelled);
    }
    tokens_.clear();
    places_.clear();
    want_.clear();
    row_slot_.clear();
    std::vector<Slot*> in_batch;  // slots with rows in this batch, for errors
    // Decode rows first: one token for every request past its prompt.
    for (Slot& slot : slots_) {
        if (!slot.request || slot.pending < 0) continue;
        tokens_.push_back(slot.pending);
        places_.push_back({slot.index, slot.n_cached});
        want_.push_back(1);
        row_slot_.push_back(slot.index);
        in_batch.push_back(&slot);
    }
    // Prompt chunks fill the rest of the batch, oldest request first.
    std::vector<Slot*> prefill;
    for (Slot& slot : slots_) {
        if (slot.request && slot.n_cached < slot.n_prompt) prefill.push_back(&slot);
    }
    std::sort(prefill.begin(), prefill.end(),
              [](const Slot* a, const Slot* b) { return a->admitted < b->admitted; });
    std::vector<std::pair<Slot*, int>> chunks;
    for (Slot* slot : prefill) {
        const int budget = options_.max_batch - static_cast<int>(tokens_.size());
        if (budget <= 0) break;
        const int n = std::min(budget, slot->n_prompt - slot->n_cached);
        for (int i = 0; i < n; ++i) {
            tokens_.push_back(slot->history[slot->n_cached + i]);
            places_.push_back({slot->index, slot->n_cached + i});
            want_.push_back(0);
        }
        // The last prompt token's logits give the first generated token.
        if (slot->n_cached + n == slot->n_prompt) {
            want_.back() = 1;
            row_slot_.push_back(slot->index);
        }
        chunks.emplace_back(slot, n);
        in_batch.push_back(slot);
    }
    if (tokens_.empty()) return false;

    try {
        decoder_.eval(tokens_, places_, want_, logits_.data());
    } catch (const std::exception& e) {
        log_warn("forward pass of {} tokens failed: {}", tokens_.size(), e.what());
        for (Slot* slot : in_batch) finish(*slot, FinishReason::kError, e.what());
        return true;
    }
    for (Slot& slot : slots_) {
        if (slot.request && slot.pending >= 0) {
            ++slot.n_cached;
            slot.pending = -1;
        }
    }
    for (const auto& [slot, n] : chunks) slot->n_cached += n;
    const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
    for (size_t row = 0; row < row_slot_.size(); ++row) {
        sample_row(slots_[row_slot_[row]], logits_.data() + row * n_vocab);
    }
    int64_t kv_used = 0;
    for (const Slot& slot : slots_) {
        if (slot.request) kv_used += slot.n_cached;
    }
    kv_used_.store(kv_used, std::memory_order_relaxed);
    return true;
}

void Scheduler::sample_row(Slot& slot, float* logits) {
    const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
    const GenerationParams& p = slot.request->params();
    int32_t id = 0;
    std::optional<TokenLogprobs> logprobs;
    try {
        // Log probabilities are the model's, taken before a grammar masks the row (the
        // sampled token is never masked, so its logit is the same after).
        LogitSummary summary;
        if (p.logprobs >= 0)
            summary = summarize_logits(std::span<const float>(logits, n_vocab), p.logprobs);
        if (p.constraint) p.constraint->mask(std::span<float>(logits, n_vocab));
        id = slot.sampler->sample(std::span<const float>(logits, n_vocab), slot.history);
        if (p.constraint) p.constraint->accept(id);
        if (p.logprobs >= 0)
            logprobs = TokenLogprobs{id, summary.logprob(logits[id]), std::move(summary.top)};
    } catch (const std::exception& e) {
        finish(slot, FinishReason::kError, e.what());
        return;
    }
    if (slot.n_generated++ == 0) slot.first_token_at = now_seconds();
    slot.history.push_back(id);
    if (!p.ignore_eos && options_.is_end_of_generation && options_.is_end_of_generation(id)) {
        finish(slot, FinishReason::kStop);
    } else if (!deliver(slot, id, logprobs ? &*logprobs : nullptr)) {
        if (slot.request) finish(slot, FinishReason::kStop);
    } else if (p.max_tokens > 0 && slot.n_generated >= p.max_tokens) {
        finish(slot, FinishReason::kLength);
    } else if (slot.n_cached >= options_.n_ctx) {
        finish(slot, FinishReason::kLength);  // no position left to evaluate the token at
    } else {
        slot.pending = id;
    }
}

bool Scheduler::deliver(Slot& slot, int32_t token, const TokenLogprobs* logprobs) {
    try {
        if (logprobs) slot.request->sink().on_logprobs(*logprobs);
        return slot.request->sink().on_token(token);
    } catch (const std::exception& e) {
        // A sink that cannot take the token ends its own request, not the scheduler.
        finish(slot, FinishReason::kError, e.what());
        return false;
    }
}

void Scheduler::notify_finish(Request& request, const GenerationResult& result) {
    try {
        request.sink().on_finish(result);
    } catch (const std::exception& e) {
        log_warn("request {}: the sink failed at the end: {}", request.id(), e.what());
    }
}

void Scheduler::finish(Slot& slot, FinishReason reason, std::string error) {
    std::shared_ptr<Request> request = std::move(slot.request);
    slot.request.reset();
    slot.sampler.reset();
    slot.pending = -1;
    const double now = now_seconds();
    GenerationResult result;
    result.reason = reason;
    result.prompt_tokens = slot.n_prompt;
    result.completion_tokens = slot.n_generated;
    result.cached_tokens = slot.n_reused;
    result.error = std::move(error);
    result.queue_seconds = slot.admitted_at - request->submitted_at();
    result.first_token_seconds =
        slot.first_token_at > 0.0 ? slot.first_token_at - request->submitted_at() : 0.0;
    result.total_seconds = now - request->submitted_at();
    log_debug(
        "request {}: {} after {} prompt + {} generated tokens; queued {:.3f} s, first token {:.3f} "
        "s, "
        "total {:.3f} s",
        request->id(), finish_reason_name(reason), result.prompt_tokens, result.completion_tokens,
        result.queue_seconds, result.first_token_seconds, result.total_seconds);
    {
        // Counted before the sink hears of it, so a client that saw the end sees the free slot.
        std::lock_guard<std::mutex> lock(mutex_);
        // What the KV holds stays for the next prompt that starts with it, unless a failed forward
        // pass may have left the cache (or a recurrent state) half written.
        if (reason != FinishReason::kError && options_.reuse_prefix) {
            slot.kept.assign(slot.history.begin(), slot.history.begin() + slot.n_cached);
        }
        slot.freed = ++frees_;
        publish_kept();
        ++free_slots_;
        ++finished_;
        if (reason == FinishReason::kCancelled) ++cancelled_;
    }
    notify_finish(*request, result);
}

}  // namespace tandem
