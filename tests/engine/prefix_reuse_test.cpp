// Prompt-prefix reuse in the scheduler: a request whose prompt starts with a finished request's
// tokens prefills only the rest, reports them as cached, and gets the very tokens it gets without
// reuse (seeded sampling included); a sliding window or a recurrent state that cannot rewind to
// the shared prefix starts over instead; among free slots the longest shared prefix wins. With
// the prefix cache in host memory, conversations beyond the slots keep their prefixes on every
// architecture (full attention, sliding windows, recurrent state, latent attention), with the
// same tokens as without reuse.
#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "base/thread_pool.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "support/collecting_sink.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

ThreadPool& pool() {
    static ThreadPool p(2);
    return p;
}

struct Reply {
    std::vector<int32_t> tokens;
    GenerationResult result;
};

// Runs one request to its end (max_tokens generated).
Reply generate(Scheduler& s, const std::vector<int32_t>& prompt, int max_tokens) {
    auto sink = std::make_shared<testing::CollectingSink>();
    GenerationParams p;
    p.prompt = prompt;
    p.sampling.temperature = 1.1f;
    p.sampling.top_k = 40;
    p.sampling.seed = 1234;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    EXPECT_EQ(s.submit(std::make_shared<Request>(std::move(p), sink)), SubmitStatus::kAccepted);
    Reply r;
    r.result = sink->wait();
    r.tokens = sink->tokens();
    return r;
}

std::vector<int32_t> pattern(int n, int mul, int add, int n_vocab) {
    std::vector<int32_t> out(n);
    for (int i = 0; i < n; ++i) out[i] = (i * mul + add) % n_vocab;
    return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

SchedulerOptions options(int slots, int max_batch, bool reuse, size_t cache_bytes = 0) {
    SchedulerOptions o;
    o.cache_bytes = cache_bytes;
    o.n_slots = slots;
    o.n_ctx = 256;
    o.max_batch = max_batch;
    o.kv_type = KvType::kF32;
    o.reuse_prefix = reuse;
    return o;
}

// A two-turn chat: the second prompt is the first prompt, its reply and a new turn. With reuse
// it computes only what follows the first request's evaluated tokens (its last sampled token was
// never evaluated); without, everything; the tokens are the same.
void check_second_turn(const Model& model, int max_batch) {
    const int n_vocab = model.config().n_vocab;
    const std::vector<int32_t> first = pattern(40, 37, 11, n_vocab);
    const std::vector<int32_t> turn = pattern(9, 53, 5, n_vocab);
    std::vector<Reply> replies;
    for (bool reuse : {true, false}) {
        Scheduler s(model, pool(), options(1, max_batch, reuse));
        const Reply a = generate(s, first, 12);
        EXPECT_EQ(a.result.cached_tokens, 0);
        replies.push_back(generate(s, concat(concat(first, a.tokens), turn), 6));
        EXPECT_EQ(s.stats().prefix_hits, reuse ? 1u : 0u);
    }
    EXPECT_EQ(replies[0].result.cached_tokens, 40 + 12 - 1);
    EXPECT_EQ(replies[0].result.prompt_tokens, 40 + 12 + 9);
    EXPECT_EQ(replies[1].result.cached_tokens, 0);
    EXPECT_EQ(replies[0].tokens, replies[1].tokens);
}

TEST(PrefixReuse, SecondTurnComputesOnlyTheNewTokens) {
    testing::TempDir dir;
    auto model = Model::load(testing::write_model(testing::tiny_spec("qwen3moe"), dir.file("m.gguf")));
    check_second_turn(*model, 16);
}

// The same prompt again: everything but the last token is reused.
TEST(PrefixReuse, RepeatedPromptRecomputesOnlyItsLastToken) {
    testing::TempDir dir;
    auto model = Model::load(testing::write_model(testing::tiny_spec("qwen3moe"), dir.file("m.gguf")));
    Scheduler s(*model, pool(), options(1, 16, true));
    const std::vector<int32_t> prompt = pattern(30, 41, 7, model->config().n_vocab);
    const Reply a = generate(s, prompt, 5);
    const Reply b = generate(s, prompt, 5);
    EXPECT_EQ(b.result.cached_tokens, 29);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(s.stats().prefix_cached_tokens, 29u);
}

// Two free slots hold different conversations: each next turn goes to its own conversation's
// slot, whichever was freed first.
TEST(PrefixReuse, LongestSharedPrefixChoosesTheSlot) {
    testing::TempDir dir;
    auto model = Model::load(testing::write_model(testing::tiny_spec("qwen3moe"), dir.file("m.gguf")));
    const int n_vocab = model->config().n_vocab;
    Scheduler s(*model, pool(), options(2, 32, true));
    const std::vector<int32_t> x = pattern(20, 37, 11, n_vocab), y = pattern(25, 29, 3, n_vocab);
    const Reply rx = generate(s, x, 4);
    const Reply ry = generate(s, y, 4);
    // The new turns start with a token neither reply starts with, so only x or y is shared.
    const int32_t fresh = (std::max(rx.tokens[0], ry.tokens[0]) + 1) % n_vocab;
    std::vector<int32_t> turn = pattern(5, 7, 1, n_vocab);
    turn[0] = fresh == rx.tokens[0] || fresh == ry.tokens[0] ? (fresh + 1) % n_vocab : fresh;
    const Reply ny = generate(s, concat(y, turn), 3);
    EXPECT_EQ(ny.result.cached_tokens, 25);
    const Reply nx = generate(s, concat(x, turn), 3);
    EXPECT_EQ(nx.result.cached_tokens, 20);
    EXPECT_EQ(s.stats().kv_kept, 0 + (25 + 5 + 3 - 1) + (20 + 5 + 3 - 1));
}

// Sliding windows (rings of window + max_batch - 1 positions) rewind at most max_batch - 1
// positions: a prompt that shares all but the last prompt token rewinds 4 and reuses; one that
// diverges 12 tokens earlier starts over. The tokens are the same either way.
TEST(PrefixReuse, SlidingWindowRewindsOnlyWithinItsRing) {
    testing::TempDir dir;
    SynthSpec spec = testing::tiny_spec("gemma4");
    spec.n_layer = 4;
    spec.swa_period = 2;
    spec.sliding_window = 8;
    auto model = Model::load(testing::write_model(spec, dir.file("g.gguf")));
    ASSERT_EQ(max_rewind(model->config(), 256, 4), 4);
    check_second_turn(*model, 4);  // extends the kept tokens: no rewind at all
    const int n_vocab = model->config().n_vocab;
    const std::vector<int32_t> first = pattern(40, 37, 11, n_vocab);
    for (int cut : {1, 12}) {
        std::vector<Reply> replies;
        for (bool reuse : {true, false}) {
            Scheduler s(*model, pool(), options(1, 4, reuse));
            generate(s, first, 4);  // keeps 43 positions
            std::vector<int32_t> next(first.begin(), first.end() - cut);
            next = concat(next, pattern(6, 53, 5, n_vocab));
            replies.push_back(generate(s, next, 6));
        }
        // Rewinding from 43 to 40 - cut: 3 + cut positions.
        EXPECT_EQ(replies[0].result.cached_tokens, 3 + cut <= 4 ? 40 - cut : 0) << "cut " << cut;
        EXPECT_EQ(replies[0].tokens, replies[1].tokens) << "cut " << cut;
    }
}

// A recurrent state cannot go back at all: a prompt that extends every kept token reuses them,
// one that diverges inside them starts over.
TEST(PrefixReuse, RecurrentStateReusedOnlyWhenExtended) {
    testing::TempDir dir;
    SynthSpec spec = testing::tiny_spec("qwen35");
    spec.n_layer = 4;
    auto model = Model::load(testing::write_model(spec, dir.file("q.gguf")));
    check_second_turn(*model, 8);
    const int n_vocab = model->config().n_vocab;
    const std::vector<int32_t> first = pattern(30, 41, 7, n_vocab);
    std::vector<Reply> replies;
    for (bool reuse : {true, false}) {
        Scheduler s(*model, pool(), options(1, 8, reuse));
        generate(s, first, 4);
        replies.push_back(generate(s, concat(first, pattern(5, 7, 1, n_vocab)), 4));
    }
    EXPECT_EQ(replies[0].result.cached_tokens, 0);  // the reply's 3 evaluated tokens diverge
    EXPECT_EQ(replies[0].tokens, replies[1].tokens);
}

// One slot, two conversations taking turns: each turn finds the slot holding the other
// conversation, whose state went to host memory, and copies its own back. Every turn reuses
// everything its conversation evaluated before, and the tokens are those of reuse off.
class HostPrefixCache : public ::testing::TestWithParam<std::string> {};

TEST_P(HostPrefixCache, ConversationsBeyondTheSlotsKeepTheirPrefixes) {
    testing::TempDir dir;
    SynthSpec spec = testing::tiny_spec(GetParam());
    spec.n_layer = 4;
    spec.sliding_window = 8;  // gemma4, gpt-oss: rings of 8 + 4 - 1 positions
    if (GetParam() == "deepseek2") {
        spec.n_head_kv = 1;
        spec.q_lora_rank = 32;
    }
    auto model = Model::load(testing::write_model(spec, dir.file("m.gguf")));
    const int n_vocab = model->config().n_vocab;
    const std::vector<int32_t> a = pattern(40, 37, 11, n_vocab), b = pattern(35, 29, 3, n_vocab);
    const std::vector<int32_t> turn = pattern(9, 53, 5, n_vocab);
    std::vector<std::vector<Reply>> runs;
    for (bool reuse : {true, false}) {
        Scheduler s(*model, pool(), options(1, 4, reuse, reuse ? 64 << 20 : 0));
        std::vector<Reply> r;
        r.push_back(generate(s, a, 8));
        r.push_back(generate(s, b, 8));                                     // a goes to host memory
        r.push_back(generate(s, concat(concat(a, r[0].tokens), turn), 6));  // b out, a back in
        r.push_back(generate(s, concat(concat(b, r[1].tokens), turn), 6));  // and the other way
        const SchedulerStats st = s.stats();
        if (reuse) {
            EXPECT_EQ(st.cache_saves, 3u);
            EXPECT_EQ(st.cache_loads, 2u);
            // a, b, and the a turn that b's second turn displaced; with every position kept
            // (full attention) that turn serves all a did, and replaced it.
            const bool all_positions = max_rewind(model->config(), 256, 4) >= 256;
            EXPECT_EQ(st.cache_entries, all_positions ? 2 : 3);
            EXPECT_GT(st.cache_bytes, 0);
            EXPECT_LE(st.cache_bytes, st.cache_budget);
        } else {
            EXPECT_EQ(st.cache_budget, 0);
            EXPECT_EQ(st.cache_entries, 0);
        }
        runs.push_back(std::move(r));
    }
    EXPECT_EQ(runs[0][2].result.cached_tokens, 40 + 8 - 1);
    EXPECT_EQ(runs[0][3].result.cached_tokens, 35 + 8 - 1);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(runs[0][i].tokens, runs[1][i].tokens) << "request " << i;
        EXPECT_EQ(runs[1][i].result.cached_tokens, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Archs, HostPrefixCache,
                         ::testing::Values("qwen3moe", "llama", "gemma4", "gpt-oss", "qwen35",
                                           "qwen35moe", "deepseek2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param == "gpt-oss" ? std::string("gpt_oss") : info.param;
                         });

// A state in host memory serves a prompt that shares only part of it (full attention rewinds
// anywhere), and the reply is the one computed whole.
TEST(HostPrefixCacheRewind, PartOfAnEntryServesADivergingPrompt) {
    testing::TempDir dir;
    auto model =
        Model::load(testing::write_model(testing::tiny_spec("qwen3moe"), dir.file("m.gguf")));
    const int n_vocab = model->config().n_vocab;
    const std::vector<int32_t> a = pattern(40, 37, 11, n_vocab), b = pattern(35, 29, 3, n_vocab);
    std::vector<int32_t> branch(a.begin(), a.begin() + 30);
    branch = concat(branch, pattern(7, 13, 2, n_vocab));
    branch[30] = (a[30] + 1) % n_vocab;
    std::vector<Reply> replies;
    for (bool reuse : {true, false}) {
        Scheduler s(*model, pool(), options(1, 16, reuse, reuse ? 64 << 20 : 0));
        generate(s, a, 4);
        generate(s, b, 4);
        replies.push_back(generate(s, branch, 8));
    }
    EXPECT_EQ(replies[0].result.cached_tokens, 30);
    EXPECT_EQ(replies[0].tokens, replies[1].tokens);
}

// A budget that holds one conversation keeps the most recent one; the memory never exceeds it.
TEST(HostPrefixCacheBudget, EvictsTheLeastRecentlyUsed) {
    testing::TempDir dir;
    auto model =
        Model::load(testing::write_model(testing::tiny_spec("qwen3moe"), dir.file("m.gguf")));
    const int n_vocab = model->config().n_vocab;
    // 64-position sequences of 2 layers × 2 KV heads × 16 dims × (k + v) × 4 bytes: 32 KiB
    // each; the budget fits one and its token list, not two.
    const size_t budget = 48 << 10;
    Scheduler s(*model, pool(), options(1, 16, true, budget));
    const std::vector<int32_t> a = pattern(60, 37, 11, n_vocab), b = pattern(60, 29, 3, n_vocab),
                               c = pattern(60, 31, 5, n_vocab);
    generate(s, a, 4);
    generate(s, b, 4);  // a to host memory
    generate(s, c, 4);  // b to host memory: a evicted
    SchedulerStats st = s.stats();
    EXPECT_EQ(st.cache_entries, 1);
    EXPECT_EQ(st.cache_evictions, 1u);
    EXPECT_LE(st.cache_bytes, static_cast<int64_t>(budget));
    // b comes back from host memory (all of it but the last prompt token); c, which it
    // displaces from the slot, does not fit beside it and is dropped; a was evicted.
    EXPECT_EQ(generate(s, b, 2).result.cached_tokens, 59);
    EXPECT_EQ(generate(s, a, 2).result.cached_tokens, 0);
    st = s.stats();
    EXPECT_LE(st.cache_bytes, static_cast<int64_t>(budget));
    EXPECT_EQ(st.cache_loads, 1u);
}

}  // namespace
}  // namespace tandem
