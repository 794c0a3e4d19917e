// The prefix cache in host memory: finished sequences' states (Ops::save_sequence: their KV,
// sliding-window rings and recurrent states) kept beyond the scheduler's slots, within a byte
// budget (`tandem serve --cache-mem`), so that more conversations than slots keep what they
// computed. The scheduler copies a free slot's kept tokens here before a request that does not
// continue them overwrites the slot, and copies an entry back into a slot when it serves more of
// a new prompt than any free slot does. The least recently used entries are evicted first.
// Used by the scheduling thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <utility>
#include <vector>

#include "base/host_memory.h"

namespace tandem {

// Prompt positions that a sequence holding the state of `kept` (from position 0) serves: their
// common prefix, less at least the last prompt token (its logits give the first new token); 0
// when continuing there would rewind the state by more than max_rewind positions (max_rewind():
// a sliding window's ring, a recurrent state that cannot go back at all).
int reusable_prefix(std::span<const int32_t> kept, std::span<const int32_t> prompt, int max_rewind);

class PrefixCache {
  public:
    struct Entry {
        std::vector<int32_t> tokens;  // the state is the sequence's after these, from position 0
        HostBuffer state;             // Ops::save_sequence(seq, tokens.size(), ...)
        uint64_t used = 0;            // last found or added (least recently used goes first)
    };

    // budget: bytes of states and token lists together. max_rewind and n_ctx: the backend's
    // (max_rewind == n_ctx when every layer keeps every position, so that an entry serves
    // every prompt that an entry of its prefix serves).
    PrefixCache(size_t budget, int max_rewind, int n_ctx);

    // The entry serving the most positions of `prompt` (reusable_prefix()), and those
    // positions; {nullptr, 0} when none serves any.
    std::pair<const Entry*, int> find(std::span<const int32_t> prompt) const;
    // Marks an entry used now (it was copied into a slot).
    void touch(const Entry* entry);
    // True when an entry serves every prompt at least as well as a state of `tokens` would:
    // the same tokens, or (every position kept) tokens that start with them.
    bool covers(std::span<const int32_t> tokens) const;
    // Makes room for a state of state_bytes after `tokens` and returns its entry, whose state
    // the caller fills: first drops the entries the new one covers, then the least recently
    // used ones, never `keep`. Null, and nothing dropped, when it cannot fit (larger than the
    // budget, or only by evicting `keep`). Throws Error when the memory cannot be allocated.
    Entry* add(std::vector<int32_t> tokens, size_t state_bytes, const Entry* keep = nullptr);
    // Forgets an entry add() returned (its state could not be filled).
    void remove(const Entry* entry);

    size_t budget() const { return budget_; }
    size_t bytes() const { return bytes_; }
    size_t entries() const { return entries_.size(); }
    uint64_t evictions() const { return evictions_; }

    // What an entry counts against the budget: its state in whole pages (the host allocator
    // maps pages, so that is what it holds), its tokens and its bookkeeping.
    static size_t entry_bytes(size_t n_tokens, size_t state_bytes);

  private:
    // True when a state of `a` serves every prompt at least as well as one of `b`.
    bool dominates(std::span<const int32_t> a, std::span<const int32_t> b) const;

    size_t budget_;
    int max_rewind_;
    bool keeps_all_positions_;
    std::list<Entry> entries_;  // a list: find()'s and add()'s pointers stay valid
    size_t bytes_ = 0;
    uint64_t clock_ = 0;
    uint64_t evictions_ = 0;
};

}  // namespace tandem
