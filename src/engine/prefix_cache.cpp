// The prefix cache in host memory.
#include "engine/prefix_cache.h"

#include <algorithm>

namespace tandem {

int reusable_prefix(std::span<const int32_t> kept, std::span<const int32_t> prompt,
                    int max_rewind) {
    if (kept.empty() || prompt.empty()) return 0;
    const auto [kept_end, prompt_end] =
        std::mismatch(kept.begin(), kept.end(), prompt.begin(), prompt.end());
    // The last prompt token is always evaluated again: its logits give the first new token.
    const int shared =
        std::min(static_cast<int>(kept_end - kept.begin()), static_cast<int>(prompt.size()) - 1);
    // Continuing at `shared` rewinds the state by the kept tokens after it; a sliding window's
    // ring or a recurrent state may no longer hold what that needs, and then nothing is reused.
    if (static_cast<int>(kept.size()) - shared > max_rewind) return 0;
    return shared;
}

PrefixCache::PrefixCache(size_t budget, int max_rewind, int n_ctx)
    : budget_(budget), max_rewind_(max_rewind), keeps_all_positions_(max_rewind >= n_ctx) {}

size_t PrefixCache::entry_bytes(size_t n_tokens, size_t state_bytes) {
    constexpr size_t kPage = 4096;
    return (state_bytes + kPage - 1) / kPage * kPage + n_tokens * sizeof(int32_t) + sizeof(Entry);
}

bool PrefixCache::dominates(std::span<const int32_t> a, std::span<const int32_t> b) const {
    if (a.size() < b.size() || (!keeps_all_positions_ && a.size() != b.size())) return false;
    // With every position kept, a state of a serves any prompt as far as its common prefix with
    // a, which is at least its common prefix with b when b starts a. Otherwise only the same
    // tokens rewind alike.
    return std::equal(b.begin(), b.end(), a.begin());
}

std::pair<const PrefixCache::Entry*, int> PrefixCache::find(std::span<const int32_t> prompt) const {
    const Entry* best = nullptr;
    int best_prefix = 0;
    for (const Entry& e : entries_) {
        const int prefix = reusable_prefix(e.tokens, prompt, max_rewind_);
        if (prefix > best_prefix) {
            best = &e;
            best_prefix = prefix;
        }
    }
    return {best, best_prefix};
}

void PrefixCache::touch(const Entry* entry) {
    for (Entry& e : entries_) {
        if (&e == entry) e.used = ++clock_;
    }
}

bool PrefixCache::covers(std::span<const int32_t> tokens) const {
    return std::any_of(entries_.begin(), entries_.end(),
                       [&](const Entry& e) { return dominates(e.tokens, tokens); });
}

PrefixCache::Entry* PrefixCache::add(std::vector<int32_t> tokens, size_t state_bytes,
                                     const Entry* keep) {
    const size_t need = entry_bytes(tokens.size(), state_bytes);
    const size_t keep_bytes = keep ? entry_bytes(keep->tokens.size(), keep->state.size()) : 0;
    if (need + keep_bytes > budget_) return nullptr;
    // The entries the new one makes useless go first, then the least recently used.
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (&*it != keep && dominates(tokens, it->tokens)) {
            bytes_ -= entry_bytes(it->tokens.size(), it->state.size());
            it = entries_.erase(it);
        } else {
            ++it;
        }
    }
    while (bytes_ + need > budget_) {
        auto lru = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (&*it != keep && (lru == entries_.end() || it->used < lru->used)) lru = it;
        }
        bytes_ -= entry_bytes(lru->tokens.size(), lru->state.size());
        entries_.erase(lru);
        ++evictions_;
    }
    Entry e;
    e.state = HostBuffer(state_bytes, "the prefix cache's copy of a sequence");
    e.tokens = std::move(tokens);
    e.used = ++clock_;
    entries_.push_back(std::move(e));
    bytes_ += need;
    return &entries_.back();
}

void PrefixCache::remove(const Entry* entry) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (&*it != entry) continue;
        bytes_ -= entry_bytes(it->tokens.size(), it->state.size());
        entries_.erase(it);
        return;
    }
}

}  // namespace tandem
