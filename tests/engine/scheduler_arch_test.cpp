// Batched requests on gpt-oss, gemma4, qwen35moe and deepseek2 give the tokens of a solo run:
// every sequence slot keeps its own sliding-window ring, recurrent state or latent cache (a slot
// taken by a new request starts its state over), prompts are prefilled in chunks beside other
// requests' decode rows, and generation runs well past the window.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "support/collecting_sink.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

std::shared_ptr<testing::CollectingSink> submit(Scheduler& s, std::vector<int32_t> prompt) {
    auto sink = std::make_shared<testing::CollectingSink>();
    GenerationParams p;
    p.prompt = std::move(prompt);
    p.sampling.temperature = 0.0f;
    p.max_tokens = 30;
    p.ignore_eos = true;
    EXPECT_EQ(s.submit(std::make_shared<Request>(std::move(p), sink)), SubmitStatus::kAccepted);
    return sink;
}

class SchedulerSliding : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerSliding, BatchedEqualSolo) {
    testing::TempDir dir;
    SynthSpec spec = testing::tiny_spec(GetParam());
    spec.n_layer = 4;
    spec.sliding_window = 8;
    spec.n_embd = 128;
    spec.head_dim = 32;
    if (GetParam() == "deepseek2") {
        spec.n_head_kv = 1;
        spec.head_dim = 16;
        spec.q_lora_rank = 32;
    }
    spec.attn_type = GgmlType::kQ8_0;
    spec.exp_gate_type = spec.exp_up_type = spec.exp_down_type = GgmlType::kQ8_0;
    auto model = Model::load(testing::write_model(spec, dir.file("m.gguf")));
    ThreadPool pool(2);
    std::vector<std::vector<int32_t>> prompts;
    std::mt19937 rng(3);
    for (int i = 0; i < 4; ++i) {
        std::vector<int32_t> p(5 + 11 * i);
        for (int32_t& t : p) t = static_cast<int32_t>(rng() % 256);
        prompts.push_back(p);
    }
    std::vector<std::vector<int32_t>> solo;
    {
        SchedulerOptions o;
        o.n_slots = 1;
        o.n_ctx = 128;
        o.max_batch = 64;
        Scheduler s(*model, pool, o);
        for (const auto& p : prompts) {
            const auto sink = submit(s, p);
            sink->wait();
            solo.push_back(sink->tokens());
        }
    }
    // Four slots, batches of 12 rows: prompts in chunks next to decode rows, rings of other sizes.
    SchedulerOptions o;
    o.n_slots = 4;
    o.n_ctx = 128;
    o.max_batch = 12;
    Scheduler s(*model, pool, o);
    std::vector<std::shared_ptr<testing::CollectingSink>> sinks;
    for (const auto& p : prompts) sinks.push_back(submit(s, p));
    for (size_t i = 0; i < sinks.size(); ++i) {
        sinks[i]->wait();
        EXPECT_EQ(sinks[i]->tokens(), solo[i]) << "request " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Archs, SchedulerSliding, ::testing::Values("gpt-oss", "gemma4", "qwen35moe", "deepseek2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param == "gpt-oss" ? std::string("gpt_oss") : info.param;
                         });

}  // namespace
}  // namespace tandem
