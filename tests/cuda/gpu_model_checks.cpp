#include "cuda/gpu_model_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include "cuda/matmul.h"
#include "engine/session.h"
#include "model/decoder.h"
#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem::testing {

namespace {

double median_kl(const LogitComparison& cmp) {
    std::vector<double> kl = cmp.row_kl;
    std::sort(kl.begin(), kl.end());
    return kl.empty() ? 0.0 : kl[kl.size() / 2];
}

}  // namespace

ThreadPool& gpu_test_pool() {
    static ThreadPool p(0);
    return p;
}

namespace {

// A session for `tokens` and 8 more, in batches of max_batch (0: all of them at once).
SessionOptions options_for(const std::vector<int32_t>& tokens, Device device, KvType kv,
                           const GpuOptions& gpu, int max_batch) {
    SessionOptions o;
    o.n_ctx = static_cast<int>(tokens.size()) + 8;
    o.max_batch = max_batch > 0 ? max_batch : static_cast<int>(tokens.size());
    o.kv_type = kv;
    o.device = device;
    o.gpu = gpu;
    return o;
}

}  // namespace

std::vector<float> all_logits(const Model& model, const std::vector<int32_t>& tokens, Device device,
                              KvType kv, const GpuOptions& gpu, int max_batch) {
    Session session(model, gpu_test_pool(), options_for(tokens, device, kv, gpu, max_batch));
    std::span<const float> logits = session.feed_all(tokens);
    return {logits.begin(), logits.end()};
}

std::vector<float> decode_logits(const Model& model, const std::vector<int32_t>& tokens, KvType kv,
                                 int n_ctx) {
    SessionOptions o;
    o.n_ctx = n_ctx;
    o.max_batch = 8;
    o.kv_type = kv;
    o.device = Device::kCuda;
    Session session(model, gpu_test_pool(), o);
    Session greedy(model, gpu_test_pool(), o);
    std::vector<float> decode;
    for (int32_t t : tokens) {
        std::span<const float> row = session.feed(std::span<const int32_t>(&t, 1));
        decode.insert(decode.end(), row.begin(), row.end());
        const int32_t host_argmax =
            static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        const int32_t gpu_argmax = greedy.feed_greedy(std::span<const int32_t>(&t, 1));
        EXPECT_EQ(gpu_argmax, host_argmax) << "decode step " << decode.size() / row.size() - 1;
    }
    return decode;
}

int rows_over_1e3(const LogitComparison& cmp) {
    return static_cast<int>(
        std::count_if(cmp.row_kl.begin(), cmp.row_kl.end(), [](double kl) { return kl > 1e-3; }));
}

void expect_conformant(const LogitComparison& cmp, const std::string& what, double max_kl,
                       bool carried) {
    const int over = rows_over_1e3(cmp);
    std::printf(
        "[ %s ] %d rows: max|d| %.3e, KL %.3e, rows over 1e-3: %d, argmax flips %d (beyond noise "
        "%d)\n",
        what.c_str(), cmp.rows, cmp.worst_abs, cmp.worst_kl, over, cmp.argmax_flips,
        cmp.flips_beyond_noise);
    EXPECT_LE(cmp.worst_kl, max_kl) << what;
    EXPECT_LE(over * (carried ? 2 : 4), cmp.rows) << what;
    EXPECT_EQ(cmp.flips_beyond_noise, 0) << what;
}

void expect_conformant_routed(const LogitComparison& cmp, const std::string& what) {
    const double median = median_kl(cmp);
    std::printf(
        "[ %s ] %d rows: max|d| %.3e, KL %.3e, median KL %.3e, argmax flips %d (beyond noise %d)\n",
        what.c_str(), cmp.rows, cmp.worst_abs, cmp.worst_kl, median, cmp.argmax_flips,
        cmp.flips_beyond_noise);
    EXPECT_LE(median, 1e-3) << what;
    EXPECT_LE(cmp.worst_kl, 5e-2) << what;
    EXPECT_EQ(cmp.flips_beyond_noise, 0) << what;
}

std::vector<float> reference_kernel_logits(const std::string& model_path,
                                           const std::vector<int32_t>& tokens) {
    TempDir dir;
    const std::string out = dir.file("reference.f32");
    std::string ids;
    for (const int32_t t : tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    std::string log;
    const int rc =
        run_command("TANDEM_CPU_VARIANT=reference " + shell_quote(tandem_binary()) + " logits -m " +
                        shell_quote(model_path) + " --kv-type f32 --tokens " + ids + " -o " +
                        shell_quote(out) + " 2>&1",
                    &log);
    if (rc != 0) {
        ADD_FAILURE() << "tandem logits with the reference kernels failed (" << rc << "): " << log;
        return {};
    }
    return read_f32_file(out);
}

void expect_within_cpu_spread(const LogitComparison& cmp, const LogitComparison& cpu_spread,
                              const std::string& what) {
    const double median = median_kl(cmp), spread_median = median_kl(cpu_spread);
    const double median_bound = std::max(1e-3, 2 * spread_median),
                 worst_bound = std::max(5e-2, 2 * cpu_spread.worst_kl);
    std::printf(
        "[ %s ] %d rows: max|d| %.3e, KL %.3e, median KL %.3e, argmax flips %d (beyond noise %d); "
        "the CPU's kernel sets apart: KL %.3e, median %.3e\n",
        what.c_str(), cmp.rows, cmp.worst_abs, cmp.worst_kl, median, cmp.argmax_flips,
        cmp.flips_beyond_noise, cpu_spread.worst_kl, spread_median);
    EXPECT_EQ(cpu_spread.rows, cmp.rows) << what << ": the spread is of other rows";
    EXPECT_LE(median, median_bound) << what;
    EXPECT_LE(cmp.worst_kl, worst_bound) << what;
    EXPECT_EQ(cmp.flips_beyond_noise, 0) << what;
}

void expect_strategies_prefill_as_fused(const Model& model, const std::string& name) {
    const int V = model.config().n_vocab;
    const std::vector<int32_t> tokens = random_tokens(70, V, 15);
    const std::vector<float> fused =
        all_logits(model, tokens, Device::kCuda, KvType::kF32, strategy(MoeStrategy::kFused));
    for (const auto& [what, gpu] : {std::pair{"cpu", strategy(MoeStrategy::kCpu)},
                                    std::pair{"cpu layers 1", strategy(MoeStrategy::kAuto, 1)}}) {
        for (int batch : {70, 16}) {
            const LogitComparison cmp = compare_logits(
                fused, all_logits(model, tokens, Device::kCuda, KvType::kF32, gpu, batch), V);
            expect_conformant_routed(
                cmp,
                name + " " + what + (batch == 70 ? " streamed" : " cpu executor") + " vs fused");
            // Streamed experts run the resident ones' kernels on the same bytes.
            if (batch == 70) {
                EXPECT_EQ(cmp.worst_abs, 0.0) << name << " " << what;
            }
        }
    }
    // Slotted experts too, evicted or not (against fused in the same batches: decode-sized
    // batches take other attention kernels).
    const std::vector<float> fused8 =
        all_logits(model, tokens, Device::kCuda, KvType::kF32, strategy(MoeStrategy::kFused), 8);
    for (const GpuOptions& gpu : {strategy(MoeStrategy::kOffload),
                                  strategy(MoeStrategy::kOffload, -1, model.config().n_expert)}) {
        for (int batch : {70, 8}) {
            const LogitComparison cmp = compare_logits(
                batch == 8 ? fused8 : fused,
                all_logits(model, tokens, Device::kCuda, KvType::kF32, gpu, batch), V);
            EXPECT_EQ(cmp.worst_abs, 0.0)
                << name << " offload, " << gpu.moe_slots << " slots, batches of " << batch;
        }
    }
    for (const GpuOptions& gpu :
         {strategy(MoeStrategy::kHybrid), strategy(MoeStrategy::kHybrid, -1, 1)}) {
        const std::string what = name + " hybrid, " + std::to_string(gpu.moe_slots) + " slots";
        expect_conformant_routed(
            compare_logits(fused8, all_logits(model, tokens, Device::kCuda, KvType::kF32, gpu, 8),
                           V),
            what + ", batches of 8 vs fused");
        const LogitComparison streamed = compare_logits(
            fused, all_logits(model, tokens, Device::kCuda, KvType::kF32, gpu, 70), V);
        EXPECT_EQ(streamed.worst_abs, 0.0) << what << ", streamed";
    }
    // A prompt after a decode-sized batch, whose experts the slots then hold: the prompt's
    // streamed layers take those from the slots. Offload's first batch is fused's bit for bit,
    // so its prompt must be too; hybrid's first batch ran its misses on the CPU executor.
    // The tokens fed in batches of `sizes`: the last batch's logits.
    const auto in_batches = [&](const GpuOptions& gpu, std::initializer_list<int> sizes) {
        Session session(model, gpu_test_pool(),
                        options_for(tokens, Device::kCuda, KvType::kF32, gpu, 0));
        std::span<const int32_t> rest(tokens);
        std::span<const float> last;
        for (const int n : sizes) {
            last = session.feed_all(rest.first(n));
            rest = rest.subspan(n);
        }
        return std::vector<float>(last.begin(), last.end());
    };
    const int X = model.config().n_expert, B = cuda::kSmallBatch;
    const std::vector<float> fused_after = in_batches(strategy(MoeStrategy::kFused), {B, 70 - B});
    EXPECT_EQ(compare_logits(fused_after,
                             in_batches(strategy(MoeStrategy::kOffload, -1, X), {B, 70 - B}), V)
                  .worst_abs,
              0.0)
        << name << " offload: a prompt after the slots filled";
    expect_conformant_routed(
        compare_logits(fused_after,
                       in_batches(strategy(MoeStrategy::kHybrid, -1, X / 2), {B, 70 - B}), V),
        name + " hybrid: a prompt after the slots filled vs fused");
    // Two prompts with a decode-sized batch between: the first prompt's last layer copied the
    // first host layer's experts ahead for the second, partly out of slots that the batch between
    // then refilled (one layer's worth of slots: every layer evicts).
    const std::vector<float> fused_again =
        in_batches(strategy(MoeStrategy::kFused), {32, 70 - 64, 32});
    EXPECT_EQ(compare_logits(fused_again,
                             in_batches(strategy(MoeStrategy::kOffload, -1, X), {32, 70 - 64, 32}),
                             V)
                  .worst_abs,
              0.0)
        << name << " offload: a prompt after a prompt and a decode-sized batch";
}

void expect_strategies_decode_as_fused(const Model& model, const std::string& name, int steps,
                                       int min_same, int cpu_layers, int n_ctx) {
    const int V = model.config().n_vocab, X = model.config().n_expert;
    const std::vector<int32_t> prompt = random_tokens(12, V, 21);
    SessionOptions o;
    o.n_ctx = n_ctx;
    o.max_batch = cuda::kSmallBatch;
    o.kv_type = KvType::kF16;
    o.device = Device::kCuda;
    o.gpu = strategy(MoeStrategy::kFused);
    Session fused(model, gpu_test_pool(), o);
    constexpr int kOthers = 4, kOffload = 2;
    const GpuOptions options[kOthers] = {
        strategy(MoeStrategy::kCpu), strategy(MoeStrategy::kAuto, cpu_layers),
        strategy(MoeStrategy::kOffload, -1, X), strategy(MoeStrategy::kHybrid, -1, X / 2)};
    std::vector<std::unique_ptr<Session>> others;
    for (const GpuOptions& g : options) {
        o.gpu = g;
        others.push_back(std::make_unique<Session>(model, gpu_test_pool(), o));
    }
    std::span<const float> f = fused.feed(prompt);
    std::span<const float> g[kOthers];
    for (int j = 0; j < kOthers; ++j) g[j] = others[j]->feed(prompt);
    const auto argmax = [](std::span<const float> row) {
        return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    };
    int same[kOthers] = {}, ties = 0, offload_differs = 0;
    for (int step = 0; step < steps; ++step) {
        const int32_t token = argmax(f);
        offload_differs += !std::equal(f.begin(), f.end(), g[kOffload].begin());
        for (int j = 0; j < kOthers; ++j) {
            const int32_t theirs = argmax(g[j]);
            if (theirs == token) {
                ++same[j];
                continue;
            }
            double noise = 1e-3;
            for (int v = 0; v < V; ++v) noise = std::max(noise, std::fabs(double(f[v]) - g[j][v]));
            EXPECT_LE(f[token] - f[theirs], noise)
                << name << " strategy " << j << " step " << step << ": token " << theirs
                << " instead of " << token;
            ++ties;
        }
        f = fused.feed(std::span<const int32_t>(&token, 1));
        for (int j = 0; j < kOthers; ++j)
            g[j] = others[j]->feed(std::span<const int32_t>(&token, 1));
    }
    std::printf(
        "[ %s ] %d greedy steps x %d strategies: fused's token %d, %d, %d, %d times, a tie %d\n",
        name.c_str(), steps, kOthers, same[0], same[1], same[2], same[3], ties);
    EXPECT_GE(same[0] + same[1] + same[2] + same[3], kOthers * min_same) << name;
    EXPECT_EQ(offload_differs, 0) << name << ": offload's logits differ from fused's";
}

std::vector<float> feed_sequence(Decoder& decoder, int seq, std::span<const int32_t> tokens,
                                 int pos0, int max_batch, int n_vocab) {
    std::vector<float> logits(n_vocab);
    for (size_t b = 0; b < tokens.size(); b += max_batch) {
        const std::span<const int32_t> batch =
            tokens.subspan(b, std::min<size_t>(max_batch, tokens.size() - b));
        std::vector<TokenPlace> places;
        for (size_t i = 0; i < batch.size(); ++i)
            places.push_back({seq, pos0 + static_cast<int>(b + i)});
        std::vector<uint8_t> want(batch.size(), 0);
        want.back() = 1;
        decoder.eval(batch, places, want, logits.data());
    }
    return logits;
}

size_t expect_sequence_copy_continues(const Model& model, KvType kv, int max_batch,
                                      int prompt_tokens, const std::string& what) {
    const int V = model.config().n_vocab;
    BackendOptions o;
    o.device = Device::kCuda;
    o.n_seq = 3;
    o.n_ctx = 64;
    o.max_batch = max_batch;
    o.kv_type = kv;
    const std::unique_ptr<Ops> backend = make_backend(model, gpu_test_pool(), o);
    Decoder decoder(model, *backend, o.max_batch);
    const std::vector<int32_t> prompt = random_tokens(prompt_tokens, V, 12);
    const auto feed = [&](int seq, std::span<const int32_t> tokens, int pos0) {
        return feed_sequence(decoder, seq, tokens, pos0, max_batch, V);
    };
    const int n = static_cast<int>(prompt.size()) - 1;
    feed(0, std::span<const int32_t>(prompt).first(n), 0);
    const size_t bytes = backend->sequence_state_bytes(n);
    EXPECT_GT(bytes, 0u) << what;
    o.device = Device::kCpu;
    EXPECT_EQ(bytes, make_backend(model, gpu_test_pool(), o)->sequence_state_bytes(n)) << what;
    std::vector<uint8_t> saved(bytes), again(bytes);
    backend->save_sequence(0, n, saved.data());
    backend->load_sequence(2, n, saved.data());
    // Before the next token: a sliding layer's ring slot of position n may hold one of the saved
    // positions.
    backend->save_sequence(2, n, again.data());
    const std::span<const int32_t> next(&prompt[n], 1);
    const std::vector<float> original = feed(0, next, n), loaded = feed(2, next, n),
                             empty = feed(1, next, n);
    EXPECT_EQ(original, loaded) << what;
    EXPECT_NE(original, empty) << what;
    EXPECT_EQ(saved, again) << what;
    return bytes;
}

GpuOptions strategy(MoeStrategy s, int cpu_layers, int slots) {
    GpuOptions g;
    g.moe_strategy = s;
    g.moe_cpu_layers = cpu_layers;
    g.moe_slots = slots;
    return g;
}

}  // namespace tandem::testing
