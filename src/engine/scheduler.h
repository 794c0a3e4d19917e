// Continuous batching: up to n_slots requests decode together as one batch through one decoder,
// each in its own KV cache sequence slot. Between steps, waiting requests take free slots and
// their prompts are prefilled in chunks alongside the others' decode rows; finished and cancelled
// requests leave and free their slot. Further requests wait in a bounded queue.
//
// Each batch row is computed independently of the others (the forward pass never mixes rows), and
// every request samples with its own seeded sampler, so a request gets the same tokens whether it
// runs alone or with others.
//
// Prompt-prefix reuse: a slot keeps the KV of the tokens its last request evaluated after that
// request finishes. A new request takes the free slot whose kept tokens share the longest prefix
// with its prompt (ties: the least recently used slot) and prefills only the rest, so a chat that
// resends its conversation every turn computes only the new turn. Beyond the slots, a prefix
// cache in host memory (engine/prefix_cache.h, cache_bytes) takes a free slot's kept state before
// a request that does not continue it overwrites the slot, and gives it back to a later prompt
// that starts with it, so that more conversations than slots keep their prefixes. Without it
// (cache_bytes 0, or a backend that cannot copy sequences) the slots' KV caches are the whole
// budget, and a slot's kept tokens are forgotten when another request takes it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "model/backend.h"
#include "model/decoder.h"
#include "model/model.h"

namespace tandem {

struct SchedulerOptions {
    int n_slots = 1;          // requests decoding together (KV cache sequences)
    int n_ctx = 4096;         // positions per slot: prompt plus generated tokens of one request
    int max_batch = 512;      // tokens per forward pass: decode rows plus prefill chunks
    int queue_capacity = 64;  // requests waiting for a slot beyond those being served
    KvType kv_type = KvType::kF16;
    Device device = Device::kCpu;
    GpuOptions gpu;  // BackendOptions::gpu
    // Reuse the KV of a finished request's tokens for a new prompt that starts with them.
    bool reuse_prefix = true;
    // Host memory for the prefix cache beyond the slots, in bytes (states and their tokens);
    // 0: none. Used with reuse_prefix, on a backend that can copy sequences out.
    size_t cache_bytes = 0;
    // True for the tokens that end generation (the tokenizer's EOS, EOT, ...). Unset: none.
    std::function<bool(int32_t)> is_end_of_generation;
};

enum class SubmitStatus { kAccepted, kQueueFull, kShutDown };

struct SchedulerStats {
    int slots_total = 0;
    int slots_busy = 0;
    int queued = 0;
    uint64_t finished = 0;    // requests finished, any reason
    uint64_t cancelled = 0;   // of which cancelled
    int64_t kv_used = 0;      // KV cache positions held by the requests in the slots
    int64_t kv_capacity = 0;  // n_slots × n_ctx
    uint64_t prefix_hits = 0;           // requests that reused cached prompt tokens
    uint64_t prefix_cached_tokens = 0;  // prompt tokens those requests did not recompute
    int64_t kv_kept = 0;  // KV positions kept by free slots for reuse
    // The prefix cache in host memory (all 0 without one).
    uint64_t cache_loads = 0;      // requests whose prefix was copied back from it into a slot
    uint64_t cache_saves = 0;      // free slots' states copied into it
    uint64_t cache_evictions = 0;  // entries evicted to make room
    int64_t cache_bytes = 0;       // held now
    int64_t cache_budget = 0;
    int64_t cache_entries = 0;
};

class Scheduler {
  public:
    // Allocates the KV cache for n_slots × n_ctx positions and starts the scheduling thread.
    // The pool is used only by that thread from now on.
    Scheduler(const Model& model, ThreadPool& pool, const SchedulerOptions& options);
    // Stops the thread; requests still queued or running finish as kCancelled.
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Throws Error, naming the problem, for a request that can never run: an empty prompt, an id
    // outside the vocabulary, a prompt (plus max_tokens) that does not fit a slot's context.
    void validate(const GenerationParams& params) const;
    // Validates (throws Error as above), then queues the request. kQueueFull when every slot is
    // busy and the queue holds queue_capacity requests; the sink is not called then.
    SubmitStatus submit(const std::shared_ptr<Request>& request);

    SchedulerStats stats() const;
    const SchedulerOptions& options() const { return options_; }

  private:
    struct Slot {
        int index = 0;
        std::shared_ptr<Request> request;  // null: free
        std::optional<Sampler> sampler;
        std::vector<int32_t> history;  // prompt, then generated tokens (repetition penalty)
        int n_prompt = 0;
        int n_cached = 0;  // positions in the KV cache
        int n_reused = 0;  // of the prompt, positions kept from the slot's previous request
        bool loaded = false;  // ... or copied in from the prefix cache
        // Free slot: the tokens whose KV the slot still holds, from position 0; and when it was
        // last freed (least recently used goes first among equal prefixes).
        std::vector<int32_t> kept;
        uint64_t freed = 0;
        int n_generated = 0;
        int32_t pending = -1;   // sampled, not yet evaluated
        uint64_t admitted = 0;  // admission order: older prompts prefill first
        double admitted_at = 0.0, first_token_at = 0.0;
    };

    // One forward pass at construction, so the first request does not pay for the first one.
    void warm_up();
    void run();
    // Moves queued requests into free slots and drops cancelled ones; false when stopping.
    bool admit();
    bool step();
    // Prompt positions a free slot's kept KV can serve (reusable_prefix()); 0 without reuse.
    int reusable(const Slot& slot, const std::vector<int32_t>& prompt) const;
    // A free slot for a prompt (one is free): the one that serves most of it, or the least
    // recently freed one with the prompt's prefix copied in from the prefix cache when that
    // serves at least 16 positions more; sets its n_reused and whether it was loaded.
    Slot& place(const std::vector<int32_t>& prompt);
    // Before a request that reuses `reused` of a free slot's kept tokens overwrites the rest:
    // copies the slot's state into the prefix cache unless the request continues it or the
    // cache already serves it. Never evicts `keep`.
    void save_kept(Slot& slot, int reused, const PrefixCache::Entry* keep);
    // Under mutex_: the counters stats() reads from the slots and the prefix cache.
    void publish_kept();
    void sample_row(Slot& slot, float* logits);
    // Hands a token to the sink; false ends the request (stop string, or the sink failed).
    bool deliver(Slot& slot, int32_t token, const TokenLogprobs* logprobs);
    void finish(Slot& slot, FinishReason reason, std::string error = {});
    static void notify_finish(Request& request, const GenerationResult& result);

    const Model& model_;
    SchedulerOptions options_;
    std::unique_ptr<Ops> backend_;
    Decoder decoder_;
    std::vector<Slot> slots_;
    uint64_t admissions_ = 0;
    uint64_t frees_ = 0;
    int max_rewind_ = 0;  // max_rewind() for this cache's n_ctx and max_batch
    std::unique_ptr<PrefixCache> cache_;          // null: reuse within the slots only
    uint64_t cache_loads_ = 0, cache_saves_ = 0;  // scheduling thread's

    // Batch buffers, sized once for max_batch rows.
    std::vector<int32_t> tokens_;
    std::vector<TokenPlace> places_;
    std::vector<uint8_t> want_;
    std::vector<int> row_slot_;  // slot of each logits row
    std::vector<float> logits_;  // [n_slots × n_vocab]: at most one logits row per slot a step

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Request>> queue_;
    int free_slots_ = 0;  // under mutex_: slots not holding a request
    bool stopping_ = false;
    uint64_t finished_ = 0, cancelled_ = 0;
    uint64_t prefix_hits_ = 0, prefix_cached_tokens_ = 0;
    int64_t kv_kept_ = 0;
    SchedulerStats cache_stats_;       // the prefix cache's fields, published under mutex_
    std::atomic<int64_t> kv_used_{0};  // after each step, for stats()
    std::thread thread_;
};

}  // namespace tandem
