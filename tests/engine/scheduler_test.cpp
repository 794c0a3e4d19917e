// The continuous-batching scheduler without HTTP: batched requests give exactly the tokens of a
// solo run (greedy and seeded sampling, long prompts prefilled in chunks), limits and stops end
// requests with the right reason, a full queue refuses, cancellation frees the slot.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

constexpr auto kWait = std::chrono::seconds(120);

ThreadPool& pool() {
    static ThreadPool p(2);
    return p;
}

// A small MoE model, written once per test binary. Quantized attention and experts make the
// activations go through q8 rows, where batching mistakes would show.
const Model& model() {
    static testing::TempDir dir;
    static std::unique_ptr<Model> m = [] {
        SynthSpec s;
        s.arch = "qwen3moe";
        s.n_layer = 2;
        s.n_embd = 128;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 32;
        s.n_expert = 4;
        s.n_expert_used = 2;
        s.n_ff_exp = 64;
        s.n_vocab = 300;
        s.attn_type = GgmlType::kQ8_0;
        s.exp_gate_type = s.exp_up_type = s.exp_down_type = GgmlType::kQ8_0;
        s.seed = 7;
        const std::string path = dir.file("sched.gguf");
        write_synthetic_model(s, path);
        return Model::load(path);
    }();
    return *m;
}

// Records what the scheduler hands out; stops after `stop_after` tokens when set.
class RecordingSink : public GenerationSink {
  public:
    explicit RecordingSink(int stop_after = 0) : stop_after_(stop_after) {}
    bool on_token(int32_t token) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tokens_.push_back(token);
        cv_.notify_all();
        return stop_after_ == 0 || static_cast<int>(tokens_.size()) < stop_after_;
    }
    void on_finish(const GenerationResult& result) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++finishes_;
        result_ = result;
        cv_.notify_all();
    }
    // Waits (bounded) for the end; fails the test on a timeout.
    GenerationResult wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        EXPECT_TRUE(cv_.wait_for(lock, kWait, [&] { return finishes_ > 0; }))
            << "request did not finish";
        return result_;
    }
    bool wait_tokens(size_t n) {
        std::unique_lock<std::mutex> lock(mutex_);
        return cv_.wait_for(lock, kWait, [&] { return tokens_.size() >= n || finishes_ > 0; }) &&
               tokens_.size() >= n;
    }
    std::vector<int32_t> tokens() {
        std::lock_guard<std::mutex> lock(mutex_);
        return tokens_;
    }
    int finishes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return finishes_;
    }

  private:
    int stop_after_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<int32_t> tokens_;
    GenerationResult result_;
    int finishes_ = 0;
};

std::vector<int32_t> random_prompt(int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> id(0, model().config().n_vocab - 1);
    std::vector<int32_t> out(n);
    for (int32_t& t : out) t = id(rng);
    return out;
}

SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
}

SamplingParams seeded(uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.2f;
    p.top_k = 50;
    p.top_p = 0.95f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

// The reference: one sequence through Session, sampled with the same sampler.
std::vector<int32_t> session_generate(const std::vector<int32_t>& prompt, const SamplingParams& sp,
                                      int n) {
    SessionOptions o;
    o.n_ctx = 512;
    o.max_batch = 64;
    Session session(model(), pool(), o);
    Sampler sampler(sp);
    std::vector<int32_t> history = prompt, out;
    std::span<const float> logits = session.feed(prompt);
    for (int i = 0; i < n; ++i) {
        const int32_t id = sampler.sample(logits, history);
        out.push_back(id);
        history.push_back(id);
        if (i + 1 < n) logits = session.feed(std::span<const int32_t>(&id, 1));
    }
    return out;
}

SchedulerOptions options(int slots, int max_batch = 64, int queue = 16) {
    SchedulerOptions o;
    o.n_slots = slots;
    o.n_ctx = 512;
    o.max_batch = max_batch;
    o.queue_capacity = queue;
    return o;
}

struct Submitted {
    std::shared_ptr<RecordingSink> sink;
    std::shared_ptr<Request> request;
};

Submitted submit(Scheduler& s, std::vector<int32_t> prompt, SamplingParams sp, int max_tokens,
                 int stop_after = 0) {
    Submitted out;
    out.sink = std::make_shared<RecordingSink>(stop_after);
    GenerationParams p;
    p.prompt = std::move(prompt);
    p.sampling = sp;
    p.max_tokens = max_tokens;
    out.request = std::make_shared<Request>(std::move(p), out.sink);
    EXPECT_EQ(s.submit(out.request), SubmitStatus::kAccepted);
    return out;
}

TEST(Scheduler, SoloMatchesSession) {
    Scheduler s(model(), pool(), options(1));
    const auto prompt = random_prompt(20, 1);
    Submitted r = submit(s, prompt, greedy(), 24);
    GenerationResult result = r.sink->wait();
    EXPECT_EQ(result.reason, FinishReason::kLength);
    EXPECT_EQ(result.prompt_tokens, 20);
    EXPECT_EQ(result.completion_tokens, 24);
    EXPECT_EQ(r.sink->tokens(), session_generate(prompt, greedy(), 24));
}

// Eight requests with different prompt lengths, submitted together and staggered, each give
// what they give alone: greedy and seeded sampling alike.
void check_batched_equals_solo(const std::vector<SamplingParams>& params) {
    const int n = static_cast<int>(params.size());
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < n; ++i) prompts.push_back(random_prompt(5 + 13 * i, 100 + i));
    std::vector<std::vector<int32_t>> solo;
    {
        Scheduler s(model(), pool(), options(1));
        for (int i = 0; i < n; ++i) {
            Submitted r = submit(s, prompts[i], params[i], 30);
            r.sink->wait();
            solo.push_back(r.sink->tokens());
            ASSERT_EQ(solo.back().size(), 30u);
        }
    }
    // max_batch 40: the longer prompts are prefilled in several chunks next to decode rows.
    Scheduler s(model(), pool(), options(n, 40));
    std::vector<Submitted> batched;
    for (int i = 0; i < n; ++i) {
        batched.push_back(submit(s, prompts[i], params[i], 30));
        if (i == n / 2) batched.front().sink->wait_tokens(3);  // later ones join mid-decode
    }
    for (int i = 0; i < n; ++i) {
        GenerationResult result = batched[i].sink->wait();
        EXPECT_EQ(result.reason, FinishReason::kLength);
        EXPECT_EQ(batched[i].sink->tokens(), solo[i]) << "request " << i;
    }
}

TEST(Scheduler, EightBatchedGreedyEqualSolo) {
    check_batched_equals_solo(std::vector<SamplingParams>(8, greedy()));
}

TEST(Scheduler, EightBatchedSeededEqualSolo) {
    std::vector<SamplingParams> params;
    for (int i = 0; i < 8; ++i) params.push_back(seeded(1000 + i));
    check_batched_equals_solo(params);
}

TEST(Scheduler, LongPromptPrefilledInChunks) {
    Scheduler s(model(), pool(), options(2, 16));
    const auto prompt = random_prompt(150, 5);
    Submitted r = submit(s, prompt, greedy(), 10);
    r.sink->wait();
    EXPECT_EQ(r.sink->tokens(), session_generate(prompt, greedy(), 10));
}

TEST(Scheduler, EndOfGenerationTokenStops) {
    const auto prompt = random_prompt(12, 9);
    const std::vector<int32_t> expected = session_generate(prompt, greedy(), 8);
    // Declare the fourth greedy token an end-of-generation token: it ends the request unsent.
    const int32_t eog = expected[3];
    const int stop_at =
        static_cast<int>(std::find(expected.begin(), expected.end(), eog) - expected.begin());
    SchedulerOptions o = options(1);
    o.is_end_of_generation = [eog](int32_t id) { return id == eog; };
    Scheduler s(model(), pool(), o);
    Submitted r = submit(s, prompt, greedy(), 8);
    GenerationResult result = r.sink->wait();
    EXPECT_EQ(result.reason, FinishReason::kStop);
    EXPECT_EQ(result.completion_tokens, stop_at + 1);
    EXPECT_EQ(r.sink->tokens(), std::vector<int32_t>(expected.begin(), expected.begin() + stop_at));

    // ignore_eos: the token is just another token.
    auto sink = std::make_shared<RecordingSink>();
    GenerationParams p{prompt, greedy(), 8};
    p.ignore_eos = true;
    ASSERT_EQ(s.submit(std::make_shared<Request>(std::move(p), sink)), SubmitStatus::kAccepted);
    EXPECT_EQ(sink->wait().reason, FinishReason::kLength);
    EXPECT_EQ(sink->tokens(), expected);
}

// Allows only the tokens of `script`, one after another (then only `script`'s last token);
// records what it was shown and told. Fails on request when `fail_at` is reached.
class ScriptedConstraint : public TokenConstraint {
  public:
    explicit ScriptedConstraint(std::vector<int32_t> script, int fail_at = -1)
        : script_(std::move(script)), fail_at_(fail_at) {}
    void mask(std::span<float> logits) override {
        if (static_cast<int>(accepted.size()) == fail_at_) throw Error("constraint failed");
        const int32_t allowed = script_[std::min(accepted.size(), script_.size() - 1)];
        for (size_t i = 0; i < logits.size(); ++i) {
            if (static_cast<int32_t>(i) != allowed) logits[i] = -INFINITY;
        }
    }
    void accept(int32_t token) override { accepted.push_back(token); }
    std::vector<int32_t> accepted;

  private:
    std::vector<int32_t> script_;
    int fail_at_;
};

TEST(Scheduler, ConstraintDecidesTheTokensGreedyOrSampled) {
    const auto prompt = random_prompt(10, 21);
    const std::vector<int32_t> script = {7, 42, 42, 299, 0, 13};
    SchedulerOptions o = options(2);
    o.is_end_of_generation = [](int32_t id) { return id == 13; };
    Scheduler s(model(), pool(), o);
    for (const SamplingParams& sp : {greedy(), seeded(5)}) {
        auto constraint = std::make_shared<ScriptedConstraint>(script);
        auto sink = std::make_shared<RecordingSink>();
        GenerationParams p{prompt, sp, 20};
        p.constraint = constraint;
        // A request without a constraint alongside is unaffected.
        Submitted free = submit(s, prompt, greedy(), 6);
        ASSERT_EQ(s.submit(std::make_shared<Request>(std::move(p), sink)), SubmitStatus::kAccepted);
        const GenerationResult result = sink->wait();
        EXPECT_EQ(result.reason, FinishReason::kStop);  // 13 ends generation
        EXPECT_EQ(sink->tokens(), std::vector<int32_t>(script.begin(), script.end() - 1));
        EXPECT_EQ(constraint->accepted, script);
        free.sink->wait();
        EXPECT_EQ(free.sink->tokens(), session_generate(prompt, greedy(), 6));
    }
    // A constraint that throws ends its request with an error, not the scheduler.
    auto failing = std::make_shared<ScriptedConstraint>(script, /*fail_at=*/2);
    auto sink = std::make_shared<RecordingSink>();
    GenerationParams p{prompt, greedy(), 20};
    p.constraint = failing;
    ASSERT_EQ(s.submit(std::make_shared<Request>(std::move(p), sink)), SubmitStatus::kAccepted);
    const GenerationResult result = sink->wait();
    EXPECT_EQ(result.reason, FinishReason::kError);
    EXPECT_EQ(result.error, "constraint failed");
    EXPECT_EQ(sink->tokens(), std::vector<int32_t>(script.begin(), script.begin() + 2));
    Submitted after = submit(s, prompt, greedy(), 4);
    EXPECT_EQ(after.sink->wait().reason, FinishReason::kLength);
}

TEST(Scheduler, StatsCountKvPositions) {
    Scheduler s(model(), pool(), options(2));
    EXPECT_EQ(s.stats().kv_capacity, 2 * 512);
    Submitted r = submit(s, random_prompt(30, 4), greedy(), 400);
    ASSERT_TRUE(r.sink->wait_tokens(5));
    const SchedulerStats busy = s.stats();
    EXPECT_GE(busy.kv_used, 30 + 3);
    EXPECT_LE(busy.kv_used, 30 + 400);
    r.request->cancel();
    r.sink->wait();
    // The next step (of another request) no longer counts the freed slot.
    Submitted q = submit(s, random_prompt(5, 5), greedy(), 2);
    q.sink->wait();
    EXPECT_LE(s.stats().kv_used, 5 + 2);
}

TEST(Scheduler, SinkCanStop) {
    Scheduler s(model(), pool(), options(1));
    Submitted r = submit(s, random_prompt(8, 3), greedy(), 50, /*stop_after=*/5);
    GenerationResult result = r.sink->wait();
    EXPECT_EQ(result.reason, FinishReason::kStop);
    EXPECT_EQ(result.completion_tokens, 5);
    EXPECT_EQ(r.sink->tokens().size(), 5u);
}

TEST(Scheduler, ContextFullEndsWithLength) {
    SchedulerOptions o = options(1);
    o.n_ctx = 40;
    Scheduler s(model(), pool(), o);
    Submitted r = submit(s, random_prompt(30, 4), greedy(), 0);
    GenerationResult result = r.sink->wait();
    EXPECT_EQ(result.reason, FinishReason::kLength);
    // 10 positions left: 10 tokens evaluated there, and the one sampled from the last of them.
    EXPECT_EQ(result.completion_tokens, 11);
}

TEST(Scheduler, RejectsRequestsThatCannotRun) {
    SchedulerOptions o = options(1);
    o.n_ctx = 64;
    Scheduler s(model(), pool(), o);
    auto make = [](std::vector<int32_t> prompt, int max_tokens) {
        GenerationParams p;
        p.prompt = std::move(prompt);
        p.max_tokens = max_tokens;
        return std::make_shared<Request>(std::move(p), std::make_shared<RecordingSink>());
    };
    EXPECT_THROW(s.submit(make({}, 4)), Error);
    EXPECT_THROW(s.submit(make({1, 2, 100000}, 4)), Error);
    EXPECT_THROW(s.submit(make({1, -2}, 4)), Error);
    EXPECT_THROW(s.submit(make(random_prompt(60, 1), 5)), Error);
    EXPECT_THROW(s.submit(make(random_prompt(64, 1), 0)), Error);
    EXPECT_THROW(s.submit(make({1, 2}, -1)), Error);
    auto bad_temp = make({1, 2}, 4);
    const_cast<GenerationParams&>(bad_temp->params()).sampling.temperature = -1.0f;
    EXPECT_THROW(s.submit(bad_temp), Error);
    // Nothing was queued: a valid request still runs at once.
    Submitted r = submit(s, random_prompt(60, 1), greedy(), 4);
    EXPECT_EQ(r.sink->wait().completion_tokens, 4);
}

TEST(Scheduler, FullQueueRefuses) {
    Scheduler s(model(), pool(), options(1, 64, /*queue=*/1));
    Submitted running = submit(s, random_prompt(8, 1), greedy(), 400);
    ASSERT_TRUE(running.sink->wait_tokens(1));
    Submitted queued = submit(s, random_prompt(8, 2), greedy(), 3);
    auto refused = std::make_shared<Request>(GenerationParams{random_prompt(8, 3), greedy(), 3},
                                             std::make_shared<RecordingSink>());
    EXPECT_EQ(s.submit(refused), SubmitStatus::kQueueFull);
    SchedulerStats stats = s.stats();
    EXPECT_EQ(stats.slots_busy, 1);
    EXPECT_EQ(stats.queued, 1);
    running.request->cancel();
    EXPECT_EQ(running.sink->wait().reason, FinishReason::kCancelled);
    EXPECT_EQ(queued.sink->wait().completion_tokens, 3);
}

TEST(Scheduler, CancelFreesTheSlot) {
    Scheduler s(model(), pool(), options(1, 64, 4));
    Submitted running = submit(s, random_prompt(8, 1), greedy(), 450);
    ASSERT_TRUE(running.sink->wait_tokens(2));
    // Queued behind it, then cancelled before it starts: finishes without a token.
    Submitted waiting = submit(s, random_prompt(8, 2), greedy(), 5);
    waiting.request->cancel();
    running.request->cancel();
    GenerationResult cancelled = running.sink->wait();
    EXPECT_EQ(cancelled.reason, FinishReason::kCancelled);
    EXPECT_LT(cancelled.completion_tokens, 450);
    EXPECT_EQ(waiting.sink->wait().reason, FinishReason::kCancelled);
    EXPECT_TRUE(waiting.sink->tokens().empty());
    // The slot serves the next request, which matches a solo run.
    const auto prompt = random_prompt(9, 4);
    Submitted next = submit(s, prompt, greedy(), 12);
    EXPECT_EQ(next.sink->wait().reason, FinishReason::kLength);
    EXPECT_EQ(next.sink->tokens(), session_generate(prompt, greedy(), 12));
    SchedulerStats stats = s.stats();
    EXPECT_EQ(stats.slots_busy, 0);
    EXPECT_EQ(stats.cancelled, 2u);
    EXPECT_EQ(stats.finished, 3u);
}

TEST(Scheduler, ShutdownCancelsEverything) {
    std::vector<Submitted> all;
    {
        Scheduler s(model(), pool(), options(2, 64, 8));
        for (int i = 0; i < 5; ++i) all.push_back(submit(s, random_prompt(8, i), greedy(), 400));
        all.front().sink->wait_tokens(1);
    }
    for (Submitted& r : all) {
        EXPECT_EQ(r.sink->finishes(), 1);
        EXPECT_EQ(r.sink->wait().reason, FinishReason::kCancelled);
    }
}

// The tests above on the baseline kernels too, in a child process (batched rows are bit for bit
// equal to solo ones on every variant, batch_rows_test.cpp; this covers the plain C++ tiles).
TEST(SchedulerBaseline, SameTestsWithBaselineKernels) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string out;
    const int status =
        testing::run_command("TANDEM_CPU_VARIANT=baseline " + testing::shell_quote(self) +
                                 " --gtest_filter='Scheduler.*'",
                             &out);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("kernel variant baseline"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem
