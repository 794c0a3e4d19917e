#include "cuda/gpu_model_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <span>

#include "engine/session.h"

namespace tandem::testing {

ThreadPool& gpu_test_pool() {
    static ThreadPool p(0);
    return p;
}

std::vector<float> all_logits(const Model& model, const std::vector<int32_t>& tokens, Device device,
                              KvType kv, const GpuOptions& gpu, int max_batch) {
    SessionOptions o;
    o.n_ctx = static_cast<int>(tokens.size()) + 8;
    o.max_batch = max_batch > 0 ? max_batch : static_cast<int>(tokens.size());
    o.kv_type = kv;
    o.device = device;
    o.gpu = gpu;
    Session session(model, gpu_test_pool(), o);
    std::span<const float> logits = session.feed_all(tokens);
    return {logits.begin(), logits.end()};
}

void expect_conformant(const LogitComparison& cmp, const std::string& what, double max_kl,
                       bool carried) {
    const int over = static_cast<int>(
        std::count_if(cmp.row_kl.begin(), cmp.row_kl.end(), [](double kl) { return kl > 1e-3; }));
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
    std::vector<double> kl = cmp.row_kl;
    std::sort(kl.begin(), kl.end());
    const double median = kl.empty() ? 0.0 : kl[kl.size() / 2];
    std::printf(
        "[ %s ] %d rows: max|d| %.3e, KL %.3e, median KL %.3e, argmax flips %d (beyond noise %d)\n",
        what.c_str(), cmp.rows, cmp.worst_abs, cmp.worst_kl, median, cmp.argmax_flips,
        cmp.flips_beyond_noise);
    EXPECT_LE(median, 1e-3) << what;
    EXPECT_LE(cmp.worst_kl, 5e-2) << what;
    EXPECT_EQ(cmp.flips_beyond_noise, 0) << what;
}

GpuOptions strategy(MoeStrategy s, int cpu_layers, int slots) {
    GpuOptions g;
    g.moe_strategy = s;
    g.moe_cpu_layers = cpu_layers;
    g.moe_slots = slots;
    return g;
}

}  // namespace tandem::testing
