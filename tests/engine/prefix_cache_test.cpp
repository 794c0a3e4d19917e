// The prefix cache in host memory on its own: which entry serves a prompt and how far (rewind
// limits included), which entries a new one makes useless, least-recently-used eviction within
// the byte budget, and entries that never fit.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "engine/prefix_cache.h"

namespace tandem {
namespace {

std::vector<int32_t> seq(int n, int start) {
    std::vector<int32_t> out(n);
    for (int i = 0; i < n; ++i) out[i] = start + i;
    return out;
}

// Adds an entry whose state is `bytes` bytes of `fill`.
const PrefixCache::Entry* put(PrefixCache& c, std::vector<int32_t> tokens, size_t bytes,
                              uint8_t fill = 7, const PrefixCache::Entry* keep = nullptr) {
    PrefixCache::Entry* e = c.add(std::move(tokens), bytes, keep);
    if (e) std::memset(e->state.data(), fill, bytes);
    return e;
}

TEST(ReusablePrefix, CommonPrefixLessTheLastPromptTokenWithinTheRewind) {
    const std::vector<int32_t> kept = seq(10, 0);
    EXPECT_EQ(reusable_prefix(kept, seq(15, 0), 100), 10);  // extends every kept token
    EXPECT_EQ(reusable_prefix(kept, seq(10, 0), 100), 9);   // the same: its last token again
    EXPECT_EQ(reusable_prefix(kept, seq(6, 0), 100), 5);    // shorter: rewinds 5
    EXPECT_EQ(reusable_prefix(kept, seq(6, 0), 4), 0);      // ... more than the ring allows
    EXPECT_EQ(reusable_prefix(kept, seq(15, 0), 0), 10);    // a recurrent state, extended
    EXPECT_EQ(reusable_prefix(kept, seq(10, 0), 0), 0);     // ... cannot step back one
    EXPECT_EQ(reusable_prefix(kept, seq(5, 1), 100), 0);
    EXPECT_EQ(reusable_prefix({}, seq(5, 0), 100), 0);
    EXPECT_EQ(reusable_prefix(kept, {}, 100), 0);
}

TEST(PrefixCache, FindsTheEntryServingTheMost) {
    PrefixCache c(1 << 20, 100, 100);
    put(c, seq(10, 0), 100);
    put(c, seq(20, 50), 100);
    auto [e, n] = c.find(seq(30, 50));
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(n, 20);
    EXPECT_EQ(e->tokens, seq(20, 50));
    std::tie(e, n) = c.find(seq(4, 0));
    EXPECT_EQ(n, 3);
    std::tie(e, n) = c.find(seq(4, 1000));
    EXPECT_EQ(e, nullptr);
    EXPECT_EQ(n, 0);
}

TEST(PrefixCache, ALongerEntryReplacesItsPrefixOnlyWhenEveryPositionIsKept) {
    PrefixCache all(1 << 20, 100, 100);  // full attention
    put(all, seq(10, 0), 100);
    EXPECT_TRUE(all.covers(seq(10, 0)));
    EXPECT_TRUE(all.covers(seq(6, 0)));
    EXPECT_FALSE(all.covers(seq(12, 0)));
    put(all, seq(12, 0), 100);
    EXPECT_EQ(all.entries(), 1u);
    EXPECT_EQ(all.find(seq(8, 0)).second, 7);  // the longer entry rewinds to serve it

    PrefixCache ring(1 << 20, 4, 100);  // a sliding window: rewinds 4 at most
    put(ring, seq(10, 0), 100);
    EXPECT_TRUE(ring.covers(seq(10, 0)));
    EXPECT_FALSE(ring.covers(seq(6, 0)));
    put(ring, seq(20, 0), 100);
    EXPECT_EQ(ring.entries(), 2u);
    EXPECT_EQ(ring.find(seq(8, 0)).second, 7);  // only the shorter one reaches back there
}

TEST(PrefixCache, EvictsTheLeastRecentlyUsedWithinTheBudget) {
    const size_t state = 1000;
    // Room for three entries of 10 tokens, not four.
    const size_t budget = 3 * PrefixCache::entry_bytes(10, state) + 100;
    PrefixCache c(budget, 100, 100);
    const PrefixCache::Entry* a = put(c, seq(10, 0), state, 1);
    put(c, seq(10, 100), state, 2);
    put(c, seq(10, 200), state, 3);
    EXPECT_EQ(c.entries(), 3u);
    c.touch(a);  // a used again: 100 is now the least recently used
    put(c, seq(10, 300), state, 4);
    EXPECT_EQ(c.entries(), 3u);
    EXPECT_EQ(c.evictions(), 1u);
    EXPECT_LE(c.bytes(), c.budget());
    EXPECT_EQ(c.find(seq(11, 100)).first, nullptr);
    auto [found, n] = c.find(seq(11, 0));
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(n, 10);
    EXPECT_EQ(found->state.data()[state - 1], 1);
    EXPECT_NE(c.find(seq(11, 200)).first, nullptr);
    EXPECT_NE(c.find(seq(11, 300)).first, nullptr);
}

TEST(PrefixCache, NeverEvictsTheEntryBeingCopiedNorTakesWhatCannotFit) {
    const size_t state = 1000;
    const size_t one = PrefixCache::entry_bytes(10, state);
    PrefixCache c(one + one / 2, 100, 100);
    EXPECT_EQ(put(c, seq(10, 0), 8 * state), nullptr);  // larger than the budget
    EXPECT_EQ(c.entries(), 0u);
    const PrefixCache::Entry* a = put(c, seq(10, 0), state);
    EXPECT_EQ(put(c, seq(10, 100), state, 7, a), nullptr);  // would need a's room
    EXPECT_EQ(c.entries(), 1u);
    EXPECT_NE(put(c, seq(10, 100), state), nullptr);  // a may go now
    EXPECT_EQ(c.entries(), 1u);
    EXPECT_EQ(c.find(seq(11, 0)).first, nullptr);
    c.remove(c.find(seq(11, 100)).first);
    EXPECT_EQ(c.entries(), 0u);
    EXPECT_EQ(c.bytes(), 0u);
}

}  // namespace
}  // namespace tandem
