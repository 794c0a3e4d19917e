// deepseek2 (DeepSeek-V2/V3, Kimi-K2) operations on the GPU against the CPU's: strided copies,
// matmul_heads (the absorbed key and value up-projections, per-head activation rounding, decode
// and prefill kernels, on the backends themselves), the routing (sigmoid gating, the selection
// bias, group-limited routing; ties), and attention over the compressed KV cache (one KV head
// whose keys hold the values, 576-wide keys over 512-wide values as the real models, and narrow
// ones). The whole models: deepseek2_model_gpu_test.cpp. Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "cpu/attention.h"
#include "cpu/kv_cache.h"
#include "cpu/moe_routing.h"
#include "cuda/attention.h"
#include "cuda/elementwise.h"
#include "cuda/gpu_test_util.h"
#include "cuda/moe_routing.h"
#include "cuda/stream.h"
#include "model/backend.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::DeviceArray;

ThreadPool& pool() {
    static ThreadPool p(0);
    return p;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
    return worst;
}

double max_abs(const std::vector<float>& a) {
    double m = 0.0;
    for (float x : a) m = std::max(m, std::fabs(static_cast<double>(x)));
    return m;
}

// The decoder's copy of each head's rotated query part behind its absorbed part: n·H rows of R
// values, qk apart in the source and kd apart in the destination; the rest stays.
TEST(GpuDeepseek2Ops, CopyRowsOfStridedViews) {
    TANDEM_REQUIRE_GPU();
    const int n = 3, H = 5, qk = 48, kd = 80, R = 16, at_src = 32, at_dst = 64;
    const std::vector<float> src = testing::random_floats(n * H * qk, 61),
                             dst = testing::random_floats(n * H * kd, 62);
    std::vector<float> expected = dst;
    for (int r = 0; r < n * H; ++r)
        for (int c = 0; c < R; ++c) expected[r * kd + at_dst + c] = src[r * qk + at_src + c];
    DeviceArray<float> ds(src), dd(dst);
    cuda::Stream stream;
    cuda::copy_rows({ds.get() + at_src, n * H, R, qk}, {dd.get() + at_dst, n * H, R, kd},
                    stream.get());
    EXPECT_EQ(dd.download(), expected);
}

struct RouteCase {
    std::string name;
    int n_expert, k;
    ExpertGating gating;
    bool bias;
    int groups, used;
    bool normalize;
    float scale;
};

// The GPU's routes against route_experts(): the experts in order and their weights, and the
// unbiased scores it leaves in probs. Row 0's logits are all equal (every score and group score
// ties: the lower ids first; with a bias, experts 5 and 6 tie); rows 1.. random, with a tie
// between experts 5 and 6 in row 1.
TEST(GpuDeepseek2Ops, RoutingMatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    using G = ExpertGating;
    const RouteCase cases[] = {
        {"deepseek_v3", 256, 8, G::kSigmoid, true, 8, 4, true, 2.5f},
        {"kimi_k2", 384, 8, G::kSigmoid, true, 1, 0, true, 2.827f},
        {"deepseek_v2", 160, 6, G::kSoftmax, false, 8, 3, false, 16.0f},
        {"groups_softmax_norm", 64, 6, G::kSoftmax, false, 8, 3, true, 1.0f},
        {"groups_no_bias_sigmoid", 32, 4, G::kSigmoid, false, 4, 2, true, 1.0f},
        {"sigmoid_alone", 32, 4, G::kSigmoid, false, 0, 0, false, 1.0f},
        {"bias_softmax", 60, 2, G::kSoftmax, true, 0, 0, true, 1.0f},
        {"bias_softmax_selected", 60, 4, G::kSoftmaxSelected, true, 0, 0, false, 1.0f},
        {"most_experts_groups", 1024, 8, G::kSigmoid, true, 16, 4, true, 2.5f},
        {"groups_take_all_used", 24, 6, G::kSigmoid, true, 4, 1, true, 1.0f},
    };
    for (const RouteCase& c : cases) {
        const int rows = 37, n = c.n_expert, k = c.k;
        std::vector<float> logits = testing::random_floats(static_cast<size_t>(rows) * n, n + k, 2.0f);
        std::fill(logits.begin(), logits.begin() + n, 0.25f);
        logits[n + 5] = logits[n + 6];
        std::vector<float> bias = testing::random_floats(n, 7 * n, 0.5f);
        bias[5] = bias[6];
        RoutingParams p;
        p.n_expert = n;
        p.top_k = k;
        p.gating = c.gating;
        p.normalize = c.normalize;
        p.scale = c.scale;
        p.n_groups = c.groups;
        p.n_groups_used = c.used;
        std::vector<Route> ref(static_cast<size_t>(rows) * k);
        std::vector<float> cpu = logits;
        for (int t = 0; t < rows; ++t)
            route_experts(p, cpu.data() + t * n, ref.data() + t * k, c.bias ? bias.data() : nullptr);
        DeviceArray<float> dl(logits), dbias(bias), probs(logits.size());
        DeviceArray<Route> routes(ref.size());
        cuda::Stream stream;
        cuda::route_topk({dl.get(), rows, n, n}, {probs.get(), rows, n, n}, p, routes.get(),
                         stream.get(), c.bias ? dbias.get() : nullptr);
        const std::vector<Route> got = routes.download();
        for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_EQ(got[i].expert, ref[i].expert) << c.name << ", route " << i;
            ASSERT_NEAR(got[i].weight, ref[i].weight, 2e-6f * (1.0f + std::fabs(ref[i].weight)))
                << c.name << ", route " << i;
        }
        EXPECT_LE(max_abs_diff(probs.download(), cpu), 1e-6) << c.name;
        // Row 0 without a bias (all scores equal): the lowest ids of the lowest groups.
        if (!c.bias) {
            EXPECT_EQ(got[0].expert, 0) << c.name;
        }
    }
}

struct LatentCase {
    int n_head, dk, dv, n_ctx;
    bool f16;
};

std::ostream& operator<<(std::ostream& os, const LatentCase& c) {
    return os << c.n_head << " heads " << c.dk << "/" << c.dv << " ctx " << c.n_ctx
              << (c.f16 ? " f16" : " f32");
}

class GpuDeepseek2Attention : public ::testing::TestWithParam<LatentCase> {};

// Attention over a latent cache (one KV head, values = the first dv of each key, no value cache)
// against the CPU's: two sequences, queries at their last positions and along sequence 0; the
// decode kernels (fixed chunks and the decode split, scratch for a few queries at a time) and the
// prefill tiles (where the GPU gives a block their shared memory).
TEST_P(GpuDeepseek2Attention, DecodeAndPrefillMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    const LatentCase c = GetParam();
    const int n_seq = 2, n_layer = 2, layer = 1;
    const KvShape shape{n_layer, n_seq, c.n_ctx, 1, c.dk, c.dv, true};
    const KvType type = c.f16 ? KvType::kF16 : KvType::kF32;
    KvCache cpu(shape, type);
    const int len[2] = {c.n_ctx, c.n_ctx / 3 + 1};
    std::vector<TokenPlace> places;
    for (int s = 0; s < n_seq; ++s)
        for (int p = 0; p < len[s]; ++p) places.push_back({s, p});
    const int n = static_cast<int>(places.size());
    const std::vector<float> k = testing::random_floats(static_cast<size_t>(n) * c.dk, 71);
    for (int t = 0; t < n; ++t) cpu.store_k(layer, places[t].seq, places[t].pos, k.data() + t * c.dk);

    cuda::Stream stream;
    cuda::DeviceKv kv{nullptr, nullptr, shape, c.f16, {}};
    ASSERT_EQ(kv.value_bytes(), 0u);
    DeviceArray<uint8_t> dkeys(kv.key_bytes());
    kv.k = dkeys.get();
    const cuda::KvLayer cache = kv.layer(layer);
    ASSERT_TRUE(cache.values_in_keys);
    ASSERT_EQ(cache.v, cache.k);
    DeviceArray<float> dkin(k);
    DeviceArray<TokenPlace> dplaces(places);
    cuda::store_kv(cache, {dkin.get(), n, c.dk, c.dk}, {}, dplaces.get(), stream.get());

    std::vector<TokenPlace> qp = {{0, len[0] - 1}, {1, len[1] - 1}};
    for (int p = 0; p < len[0]; p += std::max(1, c.n_ctx / 20)) qp.push_back({0, p});
    const int nq = static_cast<int>(qp.size());
    const int64_t q_cols = int64_t{c.n_head} * c.dk, out_cols = int64_t{c.n_head} * c.dv;
    const std::vector<float> q = testing::random_floats(nq * q_cols, 72);
    std::vector<float> ref(nq * out_cols);
    Attention attention(pool().size(), c.n_ctx, c.dk, c.n_head);
    Attention::Params params;
    params.n_head = c.n_head;
    params.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    attention.run(cpu, layer, q.data(), qp.data(), nq, params, ref.data(), pool());
    ASSERT_GT(max_abs(ref), 0.0);
    const double tolerance = c.f16 ? 3e-3 : 3e-5;

    DeviceArray<TokenPlace> dqp(qp);
    DeviceArray<float> dq(q);
    for (int chunk : {64, 0}) {
        const int n_chunks =
            chunk > 0 ? (c.n_ctx + chunk - 1) / chunk : cuda::decode_chunks(c.n_ctx);
        const int64_t capacity = int64_t{c.n_head} * n_chunks * std::min(nq, 3);
        DeviceArray<float> values(capacity * c.dv), stats(capacity * 2);
        const cuda::AttentionScratch scratch{values.get(), stats.get(), capacity};
        DeviceArray<float> dout(std::vector<float>(nq * out_cols, NAN));
        cuda::attention(cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params, chunk, n_chunks,
                        scratch, {dout.get(), nq, out_cols, out_cols}, stream.get());
        EXPECT_LE(max_abs_diff(dout.download(), ref), tolerance) << "chunk " << chunk;
    }
    if (!cuda::tiled_attention_fits(c.dk, c.dv)) {
        std::printf("[ %d/%d ] prefill tiles: this GPU gives a block too little shared memory\n",
                    c.dk, c.dv);
        return;
    }
    DeviceArray<float> dout(std::vector<float>(nq * out_cols, NAN));
    cuda::attention_tiled(cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params,
                          {dout.get(), nq, out_cols, out_cols}, stream.get());
    EXPECT_LE(max_abs_diff(dout.download(), ref), tolerance) << "query tiles";
}

// DeepSeek-V3's and Kimi-K2's shapes (128 and 64 heads of 576-wide keys over 512-wide values),
// and narrow latent heads on the common path.
INSTANTIATE_TEST_SUITE_P(Shapes, GpuDeepseek2Attention,
                         ::testing::Values(LatentCase{128, 576, 512, 300, true},
                                           LatentCase{64, 576, 512, 1100, false},
                                           LatentCase{16, 576, 512, 80, true},
                                           LatentCase{8, 160, 128, 700, true},
                                           LatentCase{4, 80, 64, 300, false}));

// Fills a backend's activations (rows × stride floats) from host values.
void fill(Ops& ops, Act a, const std::vector<float>& host) {
    const size_t bytes = sizeof(float) * static_cast<size_t>(a.rows) * a.stride;
    ASSERT_EQ(host.size() * sizeof(float), bytes);
    if (ops.name() == "cuda") {
        cuda::check(cudaMemcpy(a.data, host.data(), bytes, cudaMemcpyHostToDevice), "test upload");
    } else {
        std::memcpy(a.data, host.data(), bytes);
    }
}

std::vector<float> whole(Ops& ops, Act a) {
    std::vector<float> host(static_cast<size_t>(a.rows) * a.stride);
    ops.read({a.data, a.rows, a.stride, a.stride}, host.data());
    return host;
}

struct HeadsCase {
    std::string name;
    GgmlType type;
    int embd, q_lora, qk_nope, kv_lora, v_head;
};

// matmul_heads on the GPU backend against the CPU backend, with the model's own wk_b and wv_b:
// as the decoder calls it (the queries' unrotated parts qk apart into heads kd apart, leaving the
// rest of each head; the latent outputs into packed heads) and from rows with a gap after the
// heads (each head rounded on its own), for decode (3 rows) and prefill (40 rows) batches.
TEST(GpuDeepseek2Ops, MatmulHeadsMatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    using T = GgmlType;
    const HeadsCase cases[] = {
        {"f32", T::kF32, 64, 64, 32, 64, 32},
        {"f16", T::kF16, 64, 64, 32, 64, 32},
        {"bf16", T::kBF16, 64, 64, 32, 64, 32},
        {"q8_0", T::kQ8_0, 64, 64, 32, 64, 32},
        {"q4_K", T::kQ4_K, 256, 256, 256, 256, 256},  // q8_K activations: heads of 256
    };
    testing::TempDir dir;
    for (const HeadsCase& c : cases) {
        SynthSpec s = testing::tiny_spec("deepseek2");
        s.n_layer = 2;
        s.n_dense_lead = 1;
        s.n_embd = c.embd;
        s.n_head = 6;
        s.head_dim = 16;
        s.q_lora_rank = c.q_lora;
        s.qk_nope = c.qk_nope;
        s.kv_lora_rank = c.kv_lora;
        s.v_head_mla = c.v_head;
        s.n_ff = 256;
        s.n_ff_exp = 256;
        s.attn_type = c.type;
        auto model = Model::load(testing::write_model(s, dir.file(c.name + ".gguf")));
        BackendOptions o;
        o.max_batch = 40;
        o.n_ctx = 64;
        o.device = Device::kCpu;
        const std::unique_ptr<Ops> cpu = make_backend(*model, pool(), o);
        o.device = Device::kCuda;
        const std::unique_ptr<Ops> gpu = make_backend(*model, pool(), o);
        const int H = s.n_head, R = s.head_dim, N = c.qk_nope, Lkv = c.kv_lora, Dv = c.v_head;
        const int qk = N + R, kd = Lkv + R;
        for (const int layer : {0, 1}) {
            for (const int n : {3, 40}) {
                struct Layout {
                    const char* what;
                    bool k_b;
                    int64_t in_stride, in_head, out_stride, out_head;
                };
                const Layout layouts[] = {
                    {"k_b as the decoder", true, int64_t{H} * qk, qk, int64_t{H} * kd, kd},
                    {"v_b as the decoder", false, int64_t{H} * Lkv, Lkv, int64_t{H} * Dv, Dv},
                    {"k_b from rows with a gap", true, int64_t{H} * qk + 8, qk, int64_t{H} * Lkv, Lkv},
                };
                for (const Layout& l : layouts) {
                    const std::string what =
                        fmt::format("{}, layer {}, {} rows, {}", c.name, layer, n, l.what);
                    const ExpertMatrix& wc =
                        l.k_b ? cpu->weights().layers[layer].wk_b : cpu->weights().layers[layer].wv_b;
                    const ExpertMatrix& wg =
                        l.k_b ? gpu->weights().layers[layer].wk_b : gpu->weights().layers[layer].wv_b;
                    const std::vector<float> in =
                        testing::random_floats(static_cast<size_t>(n) * l.in_stride, 81 + n, 2.0f);
                    const std::vector<float> sentinel(static_cast<size_t>(n) * l.out_stride, 7.0f);
                    std::vector<float> results[2];
                    Ops* backends[2] = {cpu.get(), gpu.get()};
                    for (int b = 0; b < 2; ++b) {
                        Ops& ops = *backends[b];
                        const Act x = ops.allocate(n, l.in_stride), y = ops.allocate(n, l.out_stride);
                        fill(ops, x, in);
                        fill(ops, y, sentinel);
                        ops.matmul_heads(b == 0 ? wc : wg, H,
                                         {x.data, n, H * l.in_head, l.in_stride}, l.in_head,
                                         {y.data, n, l.out_stride, l.out_stride}, l.out_head);
                        results[b] = whole(ops, y);
                    }
                    // The heads' rows were written, the rest of each output head left.
                    const auto written = std::count_if(results[0].begin(), results[0].end(),
                                                       [](float v) { return v != 7.0f; });
                    EXPECT_EQ(written, static_cast<std::ptrdiff_t>(n) * H * wc.matrix.rows) << what;
                    EXPECT_LE(max_abs_diff(results[1], results[0]), 2e-5 * max_abs(results[0]))
                        << what;
                }
            }
        }
    }
}

}  // namespace
}  // namespace tandem
