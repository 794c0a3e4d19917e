// Rewinding a session keeps what the cache still holds: with sliding-window layers, a rewind
// farther than their ring allows starts the sequence over, and either way the logits of what is
// fed next are those of a fresh session.
#include <gtest/gtest.h>

#include <vector>

#include "base/thread_pool.h"
#include "engine/session.h"
#include "model/model.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

std::vector<float> fresh_logits(const Model& model, ThreadPool& pool, const SessionOptions& o,
                                const std::vector<int32_t>& tokens) {
    Session s(model, pool, o);
    std::span<const float> l = s.feed(tokens);
    return {l.begin(), l.end()};
}

TEST(SessionRewind, SlidingWindowsRewindWithinTheirRing) {
    testing::TempDir dir;
    SynthSpec spec = testing::tiny_spec("gemma4");
    spec.n_layer = 4;
    spec.swa_period = 2;
    spec.sliding_window = 8;
    auto model = Model::load(testing::write_model(spec, dir.file("g.gguf")));
    ThreadPool pool(1);
    SessionOptions o;
    o.n_ctx = 64;
    o.max_batch = 4;  // rings of 8 + 4 - 1: a rewind of up to 4 positions keeps the window
    o.kv_type = KvType::kF32;
    ASSERT_EQ(max_rewind(model->config(), o.n_ctx, o.max_batch), 4);
    std::vector<int32_t> tokens(40);
    for (int i = 0; i < 40; ++i) tokens[i] = (i * 37 + 11) % 256;
    std::vector<int32_t> other = tokens;
    for (int i = 20; i < 40; ++i) other[i] = (i * 53 + 5) % 256;

    Session s(*model, pool, o);
    s.feed(tokens);
    // Within the ring: positions 0..36 stay.
    s.rewind(36);
    EXPECT_EQ(s.position(), 36);
    std::span<const float> got = s.feed(std::span<const int32_t>(other).subspan(36));
    std::vector<int32_t> expect_tokens(tokens.begin(), tokens.begin() + 36);
    expect_tokens.insert(expect_tokens.end(), other.begin() + 36, other.end());
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()), fresh_logits(*model, pool, o, expect_tokens));
    // Beyond it: the sequence starts over.
    s.rewind(20);
    EXPECT_EQ(s.position(), 0);
    got = s.feed(other);
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()), fresh_logits(*model, pool, o, other));
}

// A recurrent state cannot go back: any rewind starts the sequence over, with the same logits.
TEST(SessionRewind, RecurrentStatesStartOver) {
    testing::TempDir dir;
    SynthSpec spec = testing::tiny_spec("qwen35");
    spec.n_layer = 4;
    auto model = Model::load(testing::write_model(spec, dir.file("q.gguf")));
    ThreadPool pool(1);
    SessionOptions o;
    o.n_ctx = 64;
    o.max_batch = 8;
    o.kv_type = KvType::kF32;
    std::vector<int32_t> tokens(30);
    for (int i = 0; i < 30; ++i) tokens[i] = (i * 41 + 7) % 256;
    Session s(*model, pool, o);
    s.feed(tokens);
    s.rewind(29);
    EXPECT_EQ(s.position(), 0);
    std::span<const float> got = s.feed(tokens);
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()), fresh_logits(*model, pool, o, tokens));
}

}  // namespace
}  // namespace tandem
