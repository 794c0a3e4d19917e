// The GPU's row operations against the CPU's: attention over the KV cache (several sequences,
// grouped-query heads, contexts across many chunks, f32 and f16 caches), rope (NORMAL, NEOX,
// YaRN, frequency factors), RMS norms, the gated activations, and the MoE routing (top-k and
// weights). Attention with sliding windows over ring caches and sinks (gpt-oss).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/kv_cache.h"
#include "cpu/moe_routing.h"
#include "cpu/rope.h"
#include "cuda/activation_rounding.h"
#include "cuda/attention.h"
#include "cuda/elementwise.h"
#include "cuda/fused_norm.h"
#include "cuda/gpu_test_util.h"
#include "cuda/moe_routing.h"
#include "cuda/rope.h"
#include "cuda/stream.h"

namespace tandem {
namespace {

using testing::DeviceArray;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
    return worst;
}

// Rows rounded for a product: the values, and the q8 codes and scales where the type has them.
struct RoundedRows {
    RoundedRows(int64_t rows, int64_t cols)
        : values(rows * cols), codes(rows * cols), scales(rows * cols / 32), cols(cols) {}
    cuda::DeviceRows rows_view(int rows) { return {values.get(), rows, cols, cols}; }
    cuda::Q8Rows q8() { return {codes.get(), scales.get(), cols, cols / 32}; }
    DeviceArray<float> values;
    DeviceArray<int8_t> codes;
    DeviceArray<float> scales;
    int64_t cols;
};

// Whether `got` holds what round_activations() makes of x through `dot`: values, and codes and
// scales where the type has them, bit for bit.
void expect_rounded_as(cuda::DeviceRows x, GgmlType dot, RoundedRows& got, cudaStream_t stream,
                       const std::string& what) {
    const bool has_codes = cuda::has_q8_codes(dot);
    RoundedRows ref(x.rows, x.cols);
    cuda::Q8Rows ref_q8 = ref.q8();
    cuda::round_activations(x, dot, ref.rows_view(x.rows), stream, has_codes ? &ref_q8 : nullptr);
    const std::vector<float> a = ref.values.download(), b = got.values.download();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), 4 * a.size()), 0) << what;
    if (!has_codes) return;
    EXPECT_EQ(ref.codes.download(), got.codes.download()) << what;
    EXPECT_EQ(ref.scales.download(), got.scales.download()) << what;
}

struct AttentionCase {
    int n_head, n_kv, head_dim, n_ctx;
    bool f16;
    int window = 0;      // > 0: a sliding window over a ring of window + 15 positions
    bool sinks = false;  // a learnt sink per head (gpt-oss)
};

class GpuAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(GpuAttention, MatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    const AttentionCase c = GetParam();
    const int n_seq = 2, n_layer = 2, layer = 1;
    // Layer 1's cache: the whole context, or a ring that holds a window and 16 queries' positions
    // (kv_cache_positions() with a batch of 16); layer 0 keeps the whole context before it.
    const int ring = c.window > 0 ? std::min(c.n_ctx, c.window + 15) : c.n_ctx;
    const KvShape shape{n_layer, n_seq, c.n_ctx, c.n_kv, c.head_dim, c.head_dim};
    const KvType type = c.f16 ? KvType::kF16 : KvType::kF32;
    KvShape cpu_shape = shape;
    cpu_shape.n_ctx = ring;
    KvCache cpu(cpu_shape, type);
    // Fill sequence s up to len[s] positions; then queries at the last positions (and a
    // prefill-like batch of queries at many positions).
    const int len[2] = {c.n_ctx, c.n_ctx / 3 + 1};
    std::vector<TokenPlace> places;
    for (int s = 0; s < n_seq; ++s)
        for (int p = 0; p < len[s]; ++p) places.push_back({s, p});
    const int n = static_cast<int>(places.size());
    const int64_t kv_cols = int64_t{c.n_kv} * c.head_dim;
    const std::vector<float> k = testing::random_floats(n * kv_cols, 1),
                             v = testing::random_floats(n * kv_cols, 2);
    for (int t = 0; t < n; ++t) {
        cpu.store_k(layer, places[t].seq, places[t].pos, k.data() + t * kv_cols);
        cpu.store_v(layer, places[t].seq, places[t].pos, v.data() + t * kv_cols);
    }
    cuda::Stream stream;
    cuda::DeviceKv kv{nullptr, nullptr, shape, c.f16, {c.n_ctx, ring}};
    DeviceArray<uint8_t> dk(kv.key_bytes()), dv(kv.value_bytes());
    kv.k = dk.get();
    kv.v = dv.get();
    const cuda::KvLayer cache = kv.layer(layer);
    ASSERT_EQ(cache.positions, ring);
    DeviceArray<float> dkin(k), dvin(v);
    DeviceArray<TokenPlace> dplaces(places);
    // In batches of at most a ring's positions: a batch never stores two positions in one slot.
    for (int t0 = 0; t0 < n; t0 += ring) {
        const int rows = std::min(ring, n - t0);
        cuda::store_kv(cache, {dkin.get() + t0 * kv_cols, rows, kv_cols, kv_cols},
                       {dvin.get() + t0 * kv_cols, rows, kv_cols, kv_cols}, dplaces.get() + t0,
                       stream.get());
    }

    // Queries: the last position of each sequence, and every 7th position of sequence 0 (with a
    // ring: its last 16, whose windows it still holds).
    std::vector<TokenPlace> qp = {{0, len[0] - 1}, {1, len[1] - 1}};
    if (c.window > 0) {
        for (int p = len[0] - 16; p < len[0]; ++p) qp.push_back({0, p});
    } else {
        for (int p = 0; p < len[0]; p += 7) qp.push_back({0, p});
    }
    const int nq = static_cast<int>(qp.size());
    const int64_t q_cols = int64_t{c.n_head} * c.head_dim;
    const std::vector<float> q = testing::random_floats(nq * q_cols, 3);
    const std::vector<float> sinks = testing::random_floats(c.n_head, 4, 2.0f);
    DeviceArray<float> dsinks(sinks);
    std::vector<float> ref(nq * q_cols);
    ThreadPool pool(1);
    Attention attention(1, c.n_ctx, c.head_dim, c.n_head / c.n_kv, c.window);
    Attention::Params params;
    params.n_head = c.n_head;
    params.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    params.window = c.window;
    params.sinks = c.sinks ? sinks.data() : nullptr;
    attention.run(cpu, layer, q.data(), qp.data(), nq, params, ref.data(), pool);
    params.sinks = c.sinks ? dsinks.get() : nullptr;  // the GPU's copy

    // Fixed chunks of 64 and 256 positions; the decode split (chunk 0) of each query's positions.
    for (int chunk : {64, 256, 0}) {
        const int n_chunks =
            chunk > 0 ? (c.n_ctx + chunk - 1) / chunk : cuda::decode_chunks(c.n_ctx);
        for (int64_t capacity : {int64_t{c.n_head} * n_chunks, int64_t{c.n_head} * n_chunks * nq}) {
            // The combine as a kernel of its own, and in the last chunk block of each head.
            std::vector<float> combined[2];
            for (bool in_chunks : {false, true}) {
                DeviceArray<float> values(capacity * c.head_dim), stats(capacity * 2);
                DeviceArray<int> done(std::vector<int>(capacity, 0));
                const cuda::AttentionScratch scratch{values.get(), stats.get(), capacity,
                                                     in_chunks ? done.get() : nullptr};
                DeviceArray<float> dq(q), dout(std::vector<float>(nq * q_cols, NAN));
                DeviceArray<TokenPlace> dqp(qp);
                cuda::attention(cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params, chunk,
                                n_chunks, scratch, {dout.get(), nq, q_cols, q_cols}, stream.get());
                combined[in_chunks] = dout.download();
                // The CPU rounds the query and the softmax weights to the cache type (llama.cpp's
                // non-flash path); the GPU keeps them in f32.
                EXPECT_LE(max_abs_diff(combined[in_chunks], ref), c.f16 ? 3e-3 : 2e-5)
                    << "scratch " << capacity << ", chunk " << chunk << ", in chunks "
                    << in_chunks;
                // The counters are left at zero for the next launch (a replayed graph's).
                const std::vector<int> left = done.download();
                EXPECT_EQ(std::count(left.begin(), left.end(), 0),
                          static_cast<std::ptrdiff_t>(left.size()));
            }
            // The same sums in the same order either way.
            EXPECT_EQ(combined[0], combined[1]) << "scratch " << capacity << ", chunk " << chunk;
        }
    }
    // The combine's rounding of its output for the next product: where it rounds (always for
    // the float types), exactly what round_activations() makes of the output.
    const int n_chunks = cuda::decode_chunks(c.n_ctx);
    const int64_t capacity = int64_t{c.n_head} * n_chunks * nq;
    for (const GgmlType dot : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ8_K}) {
        DeviceArray<float> values(capacity * c.head_dim), stats(capacity * 2);
        DeviceArray<int> done(std::vector<int>(capacity, 0));
        const cuda::AttentionScratch scratch{values.get(), stats.get(), capacity, done.get()};
        DeviceArray<float> dq(q), dout(nq * q_cols);
        RoundedRows rounded(nq, q_cols);
        const cuda::Q8Rows q8 = rounded.q8();
        const bool has_codes = cuda::has_q8_codes(dot);
        DeviceArray<TokenPlace> dqp(qp);
        const bool rounds = cuda::attention(
            cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params, 0, n_chunks, scratch,
            {dout.get(), nq, q_cols, q_cols}, stream.get(),
            {dot, rounded.rows_view(nq), has_codes ? &q8 : nullptr});
        const std::string what = fmt::format("rounding through {}", format_of(dot).name);
        if (dot == GgmlType::kF16) {
            EXPECT_TRUE(rounds) << what;
        }
        if (rounds)
            expect_rounded_as({dout.get(), nq, q_cols, q_cols}, dot, rounded, stream.get(), what);
    }
    {
        // The prefill kernel: tiles of queries, the first mixing both sequences.
        DeviceArray<float> dq(q), dout(std::vector<float>(nq * q_cols, NAN));
        DeviceArray<TokenPlace> dqp(qp);
        cuda::attention_tiled(cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params,
                              {dout.get(), nq, q_cols, q_cols}, stream.get());
        EXPECT_LE(max_abs_diff(dout.download(), ref), c.f16 ? 3e-3 : 2e-5) << "query tiles";
    }
}

// Windows and sinks (gpt-oss): windows shorter than a decode chunk and longer than a prefill
// tile of keys, sinks with and without a window, f16 and f32 caches (f16 prefill of heads of 64,
// 128 and 256 on tensor cores, the others on the scalar tiles).
INSTANTIATE_TEST_SUITE_P(Shapes, GpuAttention,
                         ::testing::Values(AttentionCase{4, 4, 64, 300, false},
                                           AttentionCase{8, 2, 128, 700, false},
                                           AttentionCase{16, 2, 64, 1100, true},
                                           AttentionCase{6, 1, 96, 256, false},
                                           AttentionCase{4, 2, 256, 520, true},
                                           AttentionCase{8, 2, 64, 700, false, 40, true},
                                           AttentionCase{8, 2, 64, 700, true, 40, true},
                                           AttentionCase{4, 2, 64, 300, false, 8, false},
                                           AttentionCase{4, 1, 64, 1100, true, 128, false},
                                           AttentionCase{4, 4, 64, 300, false, 0, true},
                                           AttentionCase{4, 4, 64, 300, true, 0, true},
                                           // The tensor-core prefill (f16, heads of 64, 128
                                           // and 256): long contexts, windows with sinks.
                                           AttentionCase{8, 2, 128, 700, true},
                                           AttentionCase{4, 1, 128, 2100, true, 0, true},
                                           AttentionCase{4, 2, 256, 700, true, 100, true},
                                           // Decode on tensor cores: groups of 16 (all an
                                           // mma's rows) and 12; past 16, and heads of 96, the
                                           // scalar chunks.
                                           AttentionCase{32, 2, 64, 300, true, 0, true},
                                           AttentionCase{12, 1, 128, 700, true, 100, false},
                                           AttentionCase{40, 2, 64, 300, true},
                                           AttentionCase{24, 2, 96, 300, true},
                                           // Every query's window within one tensor-core
                                           // chunk (its block writes the output), over a ring.
                                           AttentionCase{8, 2, 128, 300, true, 40, false}));

TEST(GpuRope, MatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    std::vector<float> factors(32);
    for (size_t i = 0; i < factors.size(); ++i)
        factors[i] = 1.0f + 0.25f * static_cast<float>(i % 5);
    for (int variant = 0; variant < 4; ++variant) {
        RopeParams p;
        p.type = variant % 2 ? RopeType::kNeox : RopeType::kNormal;
        p.n_dims = 64;
        p.freq_base = variant < 2 ? 10000.0f : 1000000.0f;
        if (variant == 2) {  // YaRN
            p.freq_scale = 0.25f;
            p.ext_factor = 1.0f;
            p.n_ctx_orig = 4096;
        }
        if (variant == 3) p.freq_factors = factors.data();
        const int n_heads = 3, head_dim = 80, rows = 5;  // head_dim > n_dims: a tail left alone
        const std::vector<TokenPlace> places = {{0, 0}, {0, 1}, {1, 17}, {0, 4000}, {2, 31111}};
        std::vector<float> x = testing::random_floats(rows * n_heads * head_dim, 4 + variant);
        std::vector<float> ref = x;
        Rope rope(p);
        std::vector<float> cache(p.n_dims + 2);
        for (int t = 0; t < rows; ++t)
            rope.apply(ref.data() + t * n_heads * head_dim, n_heads, head_dim, places[t].pos,
                       cache.data());
        const cuda::RopeTable table = cuda::make_rope_table(p);
        DeviceArray<float> dx(x), factor(table.factor), ramp(table.ramp);
        DeviceArray<TokenPlace> dp(places);
        cuda::Stream stream;
        cuda::rope({dx.get(), rows, n_heads * head_dim, n_heads * head_dim}, n_heads, head_dim,
                   dp.get(), table, factor.get(), ramp.get(), stream.get());
        // Same angles, bit for bit; sin and cos within an ulp or two of each other's.
        EXPECT_LE(max_abs_diff(dx.download(), ref), 2e-6) << "variant " << variant;
    }
}

// The per-head norm and rope in one kernel give rms_norm over heads then rope, bit for bit.
TEST(GpuRope, NormThenRopeInOneKernelMatchesBoth) {
    TANDEM_REQUIRE_GPU();
    for (const bool neox : {false, true}) {
        for (const int head_dim : {64, 80, 128}) {
            RopeParams p;
            p.type = neox ? RopeType::kNeox : RopeType::kNormal;
            p.n_dims = head_dim == 80 ? 64 : head_dim;  // 80: a tail left unrotated
            p.freq_base = 1000000.0f;
            const int n_heads = 5, rows = 3;
            const int64_t cols = int64_t{n_heads} * head_dim;
            const std::vector<TokenPlace> places = {{0, 0}, {0, 9}, {1, 2047}};
            const std::vector<float> x = testing::random_floats(rows * cols, 31, 3.0f);
            const std::vector<float> w = testing::random_floats(head_dim, 32);
            const cuda::RopeTable table = cuda::make_rope_table(p);
            DeviceArray<float> ref(x), got(x), dw(w), factor(table.factor), ramp(table.ramp);
            DeviceArray<TokenPlace> dp(places);
            cuda::Stream stream;
            const cuda::DeviceRows r{ref.get(), rows, cols, cols}, g{got.get(), rows, cols, cols};
            cuda::rms_norm(r, dw.get(), head_dim, 1e-6f, r, stream.get());
            cuda::rope(r, n_heads, head_dim, dp.get(), table, factor.get(), ramp.get(),
                       stream.get());
            cuda::norm_rope(g, n_heads, head_dim, dw.get(), 1e-6f, dp.get(), table, factor.get(),
                            ramp.get(), stream.get());
            const std::vector<float> a = ref.download(), b = got.download();
            EXPECT_EQ(std::memcmp(a.data(), b.data(), 4 * a.size()), 0)
                << (neox ? "neox" : "normal") << " head_dim " << head_dim;
        }
    }
}

// The queries' and keys' norms and rotations and the cache store in one kernel: every byte as
// norm_rope() twice and store_kv() give it (f16 and f32 caches, values wider than keys, a layer
// whose cache is a ring of 6 positions after one of 16), for heads rotated in registers (neox
// and normal pairs, 64, 128 and 256 values, partial normal rotation, imrope, YaRN) and those
// that are not (neox rotating part of the head).
TEST(GpuRope, NormRopeStoreMatchesNormRopeAndStoreKv) {
    TANDEM_REQUIRE_GPU();
    struct Shape {
        RopeType type;
        int n_dims, dk, dv;
        bool imrope = false, yarn = false, weights = true;
    };
    const Shape shapes[] = {
        {RopeType::kNeox, 64, 64, 96},
        {RopeType::kNeox, 128, 128, 128},
        {RopeType::kNormal, 128, 128, 128},
        {RopeType::kNormal, 64, 64, 64},
        {RopeType::kNormal, 64, 128, 128},
        {RopeType::kNeox, 64, 128, 128},
        {RopeType::kNeox, 128, 128, 128, true},
        {RopeType::kNeox, 256, 256, 256, false, false, false},
        {RopeType::kNormal, 256, 256, 256, false, true},
    };
    for (const Shape& sh : shapes) {
        RopeParams p;
        p.type = sh.type;
        p.n_dims = sh.n_dims;
        p.freq_base = 1000000.0f;
        if (sh.imrope) {
            p.imrope = true;
            p.sections[0] = 24, p.sections[1] = 20, p.sections[2] = 20;
        }
        if (sh.yarn) {
            p.ext_factor = 1.0f, p.freq_scale = 0.25f, p.n_ctx_orig = 4096;
        }
        const cuda::RopeTable table = cuda::make_rope_table(p);
        const int n_head = 8, n_kv = 2, dk = sh.dk, dv = sh.dv, rows = 3, n_layer = 2, layer = 1;
        const std::string what =
            fmt::format("{} n_dims {} dk {}{}{}{}", sh.type == RopeType::kNeox ? "neox" : "normal",
                        sh.n_dims, dk, sh.imrope ? " imrope" : "", sh.yarn ? " yarn" : "",
                        sh.weights ? "" : " unweighted");
        const int64_t q_cols = int64_t{n_head} * dk, k_cols = int64_t{n_kv} * dk,
                      v_cols = int64_t{n_kv} * dv;
        const KvShape shape{n_layer, 2, 16, n_kv, dk, dv};
        // Layer 1's cache is a ring of 6: a position far into a context lands in it too.
        const std::vector<TokenPlace> places = {{0, 0}, {1, 5}, {0, 3001}};
        const std::vector<float> q = testing::random_floats(rows * q_cols, 51, 3.0f),
                                 k = testing::random_floats(rows * k_cols, 52, 3.0f),
                                 v = testing::random_floats(rows * v_cols, 53),
                                 qw = testing::random_floats(dk, 54),
                                 kw = testing::random_floats(dk, 55);
        DeviceArray<float> factor(table.factor), ramp(table.ramp), dqw(qw), dkw(kw);
        const float* q_w = sh.weights ? dqw.get() : nullptr;
        const float* k_w = sh.weights ? dkw.get() : nullptr;
        DeviceArray<TokenPlace> dp(places);
        for (const bool f16 : {true, false}) {
            const size_t positions = size_t{n_layer} * shape.n_seq * shape.n_ctx;
            const size_t elt = f16 ? 2 : 4;
            DeviceArray<uint8_t> ref_k(positions * k_cols * elt), ref_v(positions * v_cols * elt),
                got_k(positions * k_cols * elt), got_v(positions * v_cols * elt);
            cudaMemset(ref_k.get(), 0, ref_k.size());
            cudaMemset(ref_v.get(), 0, ref_v.size());
            cudaMemset(got_k.get(), 0, got_k.size());
            cudaMemset(got_v.get(), 0, got_v.size());
            DeviceArray<float> rq(q), rk(k), rv(v), gq(q), gk(k), gv(v);
            cuda::Stream stream;
            const cuda::DeviceKv ref_kv{ref_k.get(), ref_v.get(), shape, f16, {16, 6}},
                got_kv{got_k.get(), got_v.get(), shape, f16, {16, 6}};
            cuda::norm_rope({rq.get(), rows, q_cols, q_cols}, n_head, dk, q_w, 1e-6f, dp.get(),
                            table, factor.get(), ramp.get(), stream.get());
            cuda::norm_rope({rk.get(), rows, k_cols, k_cols}, n_kv, dk, k_w, 1e-6f, dp.get(), table,
                            factor.get(), ramp.get(), stream.get());
            cuda::store_kv(ref_kv.layer(layer), {rk.get(), rows, k_cols, k_cols},
                           {rv.get(), rows, v_cols, v_cols}, dp.get(), stream.get());
            cuda::norm_rope_store(
                {gq.get(), rows, q_cols, q_cols}, n_head, {gk.get(), rows, k_cols, k_cols},
                {gv.get(), rows, v_cols, v_cols}, q_w, k_w, 1e-6f, dp.get(), table, factor.get(),
                ramp.get(), got_kv.layer(layer), stream.get());
            EXPECT_EQ(rq.download(), gq.download()) << what << ": queries, f16 " << f16;
            EXPECT_EQ(rk.download(), gk.download()) << what << ": keys, f16 " << f16;
            EXPECT_EQ(ref_k.download(), got_k.download()) << what << ": key cache, f16 " << f16;
            EXPECT_EQ(ref_v.download(), got_v.download()) << what << ": value cache, f16 " << f16;
            // The store reached the layer (not only zeros compared), and the heads turned.
            const std::vector<uint8_t> cache = got_v.download();
            EXPECT_NE(std::count(cache.begin(), cache.end(), uint8_t{0}),
                      static_cast<std::ptrdiff_t>(cache.size()))
                << what;
            EXPECT_NE(gq.download(), q) << what;
        }
    }
}

// The residual add, norm and rounding in one kernel: the sum as add() gives it, the norm
// within float rounding of the CPU's, and the rounding (values, codes, scales) exactly what
// round_activations() makes of that norm's output.
TEST(GpuFusedNorm, ResidualNormMatchesAddNormAndRounding) {
    TANDEM_REQUIRE_GPU();
    const int rows = 3;
    EXPECT_FALSE(cuda::residual_norm_fits(2880));
    EXPECT_FALSE(cuda::residual_norm_fits(16384));
    for (const int64_t cols : {256, 2048, 8192}) {
        ASSERT_TRUE(cuda::residual_norm_fits(cols));
        const std::vector<float> x = testing::random_floats(rows * cols, 41, 3.0f);
        const std::vector<float> res = testing::random_floats(rows * cols, 42);
        const std::vector<float> w = testing::random_floats(cols, 43);
        for (const bool with_residual : {false, true}) {
            std::vector<float> sum = x;
            if (with_residual)
                for (size_t i = 0; i < sum.size(); ++i) sum[i] += res[i];
            std::vector<float> normed(sum.size());
            for (int r = 0; r < rows; ++r)
                rms_norm(sum.data() + r * cols, w.data(), cols, 1e-6f, normed.data() + r * cols);
            for (GgmlType dot : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ8_K, GgmlType::kF16,
                                 GgmlType::kBF16}) {
                const std::string what = fmt::format("{} cols, {}, residual {}", cols,
                                                     format_of(dot).name, with_residual);
                DeviceArray<float> dx(x), dres(res), dw(w), out(x.size());
                RoundedRows rounded(rows, cols);
                const cuda::Q8Rows codes = rounded.q8();
                cuda::Stream stream;
                const bool has_codes = cuda::has_q8_codes(dot);
                cuda::residual_norm({dx.get(), rows, cols, cols},
                                    with_residual ? cuda::DeviceRows{dres.get(), rows, cols, cols}
                                                  : cuda::DeviceRows{},
                                    dw.get(), 1e-6f, {out.get(), rows, cols, cols}, dot,
                                    rounded.rows_view(rows), has_codes ? &codes : nullptr,
                                    stream.get());
                const std::vector<float> new_x = dx.download();
                ASSERT_EQ(std::memcmp(new_x.data(), sum.data(), 4 * sum.size()), 0) << what;
                EXPECT_LE(max_abs_diff(out.download(), normed), 2e-5) << what;
                if (dot != GgmlType::kF32) {
                    expect_rounded_as({out.get(), rows, cols, cols}, dot, rounded, stream.get(),
                                      what);
                }
            }
        }
    }
}

// An MoE layer's weighted sum taken by the next norm as its residual: the same bits as the sum
// written by moe_weighted_sum() and then added; with extra rows after the routes' (hybrid's CPU
// sum), the same bits as the sum, then add(), then the norm.
TEST(GpuFusedNorm, ResidualNormTakesTheRoutedSum) {
    TANDEM_REQUIRE_GPU();
    // Rows up to the widest the fused norm takes (DeepSeek-V3's 7168 and 8192: its variant with
    // fewer routes in flight, within a block of 1024 threads), and more routes than go at once.
    for (const auto& [cols, k] :
         {std::pair<int64_t, int>{2048, 4}, {2048, 10}, {7168, 8}, {8192, 10}}) {
        const int rows = 3;
        std::vector<Route> routes(rows * k);
        for (int j = 0; j < rows * k; ++j) routes[j] = {j % 5 == 2 ? -1 : j % 7, 0.05f * (j + 1)};
        const std::vector<float> x = testing::random_floats(rows * cols, 44, 3.0f);
        const std::vector<float> y = testing::random_floats(rows * k * cols, 45);
        const std::vector<float> w = testing::random_floats(cols, 46);
        // Hybrid's CPU sum of the misses, added after the routes': as the add after the sum did.
        const std::vector<float> extra = testing::random_floats(rows * cols, 47);
        DeviceArray<float> dy(y), dw(w), dextra(extra), sum(rows * cols), summed_once(rows * cols);
        DeviceArray<Route> dr(routes);
        cuda::Stream stream;
        for (const bool with_extra : {false, true}) {
            cuda::RoutedRows routed{dy.get(), cols, dr.get(), k};
            if (with_extra) {
                routed.extra = dextra.get();
                routed.extra_stride = cols;
            }
            std::vector<float> results[2][3];  // x, out, rounded: through the sum, fused
            for (const bool fused : {false, true}) {
                DeviceArray<float> dx(x), out(x.size()), rounded(x.size());
                DeviceArray<int8_t> q(x.size());
                DeviceArray<float> d(x.size() / 32);
                const cuda::Q8Rows codes{q.get(), d.get(), cols, cols / 32};
                cuda::DeviceRows residual{};
                if (!fused) {
                    const cuda::DeviceRows s{sum.get(), rows, cols, cols};
                    cuda::moe_weighted_sum({dy.get(), cols, dr.get(), k}, s, stream.get());
                    if (with_extra) {
                        cuda::add(s, {dextra.get(), rows, cols, cols}, stream.get());
                        // The weighted sum takes the extra rows the same way.
                        cuda::moe_weighted_sum(routed, {summed_once.get(), rows, cols, cols},
                                               stream.get());
                        EXPECT_EQ(sum.download(), summed_once.download());
                    }
                    residual = s;
                }
                cuda::residual_norm({dx.get(), rows, cols, cols}, residual, dw.get(), 1e-6f,
                                    {out.get(), rows, cols, cols}, GgmlType::kQ8_K,
                                    {rounded.get(), rows, cols, cols}, &codes, stream.get(),
                                    fused ? routed : cuda::RoutedRows{});
                results[fused][0] = dx.download();
                results[fused][1] = out.download();
                results[fused][2] = rounded.download();
            }
            EXPECT_NE(results[1][0], x);  // the sum was added
            for (int i = 0; i < 3; ++i) {
                ASSERT_EQ(results[0][i].size(), results[1][i].size());
                EXPECT_EQ(std::memcmp(results[0][i].data(), results[1][i].data(),
                                      4 * results[0][i].size()),
                          0)
                    << i << ", extra rows " << with_extra << ", " << cols << " cols, top " << k;
            }
        }
    }
}

TEST(GpuRmsNorm, RowsAndHeadsMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    const int rows = 7;
    for (int64_t cols : {64, 2048, 5120}) {
        for (int64_t group : {cols, int64_t{32}}) {
            const std::vector<float> x = testing::random_floats(rows * cols, 5, 3.0f);
            const std::vector<float> w = testing::random_floats(group, 6);
            std::vector<float> ref(rows * cols);
            for (int r = 0; r < rows; ++r)
                for (int64_t g = 0; g < cols / group; ++g)
                    rms_norm(x.data() + r * cols + g * group, w.data(), group, 1e-6f,
                             ref.data() + r * cols + g * group);
            DeviceArray<float> dx(x), dw(w), out(x.size());
            cuda::Stream stream;
            cuda::rms_norm({dx.get(), rows, cols, cols}, dw.get(), group, 1e-6f,
                           {out.get(), rows, cols, cols}, stream.get());
            EXPECT_LE(max_abs_diff(out.download(), ref), 2e-5) << cols << " / " << group;
        }
    }
}

// The device's rounding kernels (warp-parallel scans) against the sequential block functions,
// which the host test checks against the formats' quantizers: bit for bit.
TEST(GpuActivationRounding, MatchesTheSequentialQuantizers) {
    TANDEM_REQUIRE_GPU();
    const int rows = 5, cols = 1024;
    std::vector<float> x = testing::random_floats(rows * cols, 12);
    for (int i = 0; i < cols; i += 37) x[i] = -x[i + 1];        // equal magnitudes, both signs
    std::fill(x.begin() + cols, x.begin() + cols + 256, 0.0f);  // an all-zero block
    for (GgmlType dot :
         {GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kF16, GgmlType::kBF16}) {
        const gpu::ActivationRounding r = gpu::rounding_for(dot);
        const int block = gpu::rounding_block(r);
        std::vector<float> ref(x.size());
        for (size_t b = 0; b < x.size(); b += block)
            gpu::round_block(r, x.data() + b, ref.data() + b);
        DeviceArray<float> dx(x), out(x.size());
        DeviceArray<int8_t> q(x.size());
        DeviceArray<float> d(x.size() / 32);
        cuda::Q8Rows q8{q.get(), d.get(), cols, cols / 32};
        cuda::Stream stream;
        const bool codes = cuda::has_q8_codes(dot);
        EXPECT_EQ(codes, block >= 32) << format_of(dot).name;
        cuda::round_activations({dx.get(), rows, cols, cols}, dot, {out.get(), rows, cols, cols},
                                stream.get(), codes ? &q8 : nullptr);
        const std::vector<float> got = out.download();
        ASSERT_EQ(std::memcmp(got.data(), ref.data(), 4 * ref.size()), 0) << format_of(dot).name;
        if (!codes) continue;
        // The codes and scales give the rounded values: d · q.
        const std::vector<int8_t> qs = q.download();
        const std::vector<float> ds = d.download();
        for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_EQ(ds[i / 32] * static_cast<float>(qs[i]), ref[i])
                << format_of(dot).name << " value " << i;
    }
}

// The fused GLU and rounding gives what glu() then round_activations() give, bit for bit.
TEST(GpuActivationRounding, FusedGluMatchesGluThenRounding) {
    TANDEM_REQUIRE_GPU();
    const int rows = 3, cols = 512;
    const std::vector<float> g = testing::random_floats(rows * cols, 21, 3.0f),
                             u = testing::random_floats(rows * cols, 22);
    cuda::upload_gelu_table();  // GELU reads ggml's fp16 table
    for (GluKind kind : {GluKind::kSilu, GluKind::kGelu, GluKind::kSwigluOai}) {
        for (GgmlType dot : {GgmlType::kQ8_0, GgmlType::kQ8_K}) {
            DeviceArray<float> dg(g), du(u), act(g.size()), ref(g.size()), got(g.size());
            DeviceArray<int8_t> q_ref(g.size()), q_got(g.size());
            DeviceArray<float> d_ref(g.size() / 32), d_got(g.size() / 32);
            const cuda::Q8Rows c_ref{q_ref.get(), d_ref.get(), cols, cols / 32},
                c_got{q_got.get(), d_got.get(), cols, cols / 32};
            cuda::Stream stream;
            const cuda::DeviceRows gate{dg.get(), rows, cols, cols}, up{du.get(), rows, cols, cols};
            cuda::glu(kind, gate, up, {act.get(), rows, cols, cols}, stream.get());
            cuda::round_activations({act.get(), rows, cols, cols}, dot,
                                    {ref.get(), rows, cols, cols}, stream.get(), &c_ref);
            cuda::glu_round_activations(kind, gate, up, dot, {got.get(), rows, cols, cols}, c_got,
                                        stream.get());
            const std::vector<float> a = ref.download(), b = got.download();
            EXPECT_EQ(std::memcmp(a.data(), b.data(), 4 * a.size()), 0) << format_of(dot).name;
            EXPECT_EQ(q_ref.download(), q_got.download()) << format_of(dot).name;
            EXPECT_EQ(d_ref.download(), d_got.download()) << format_of(dot).name;
        }
    }
}

// The activations against the CPU's, the gate and up past gpt-oss's clamps at ±7.
TEST(GpuGlu, MatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    const int rows = 3, cols = 512;
    const std::vector<float> g = testing::random_floats(rows * cols, 23, 10.0f),
                             u = testing::random_floats(rows * cols, 24, 10.0f);
    for (GluKind kind : {GluKind::kSilu, GluKind::kSwigluOai}) {
        std::vector<float> ref(g.size());
        tandem::glu(kind, g.data(), u.data(), static_cast<int64_t>(g.size()), ref.data());
        DeviceArray<float> dg(g), du(u), out(g.size());
        cuda::Stream stream;
        cuda::glu(kind, {dg.get(), rows, cols, cols}, {du.get(), rows, cols, cols},
                  {out.get(), rows, cols, cols}, stream.get());
        const std::vector<float> got = out.download();
        for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])))
                << "kind " << static_cast<int>(kind) << " value " << i;
    }
}

// Softmax then top-k, and gpt-oss's top-k of the logits then softmax over the chosen.
TEST(GpuRouting, TopKMatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    for (ExpertGating gating : {ExpertGating::kSoftmax, ExpertGating::kSoftmaxSelected}) {
        for (int n_expert : {8, 60, 128, 256}) {
            for (int k : {1, 2, 8}) {
                const int rows = 33;
                std::vector<float> logits = testing::random_floats(rows * n_expert, n_expert + k, 2.0f);
                // Ties that the first row's choice meets (above every other logit): experts 5
                // and 6 (neighbouring lanes), 3 and 35 (one lane), 2 and 33 (lane 2 holds the
                // lower id, lane 1 the higher): the lower id first.
                const float top = *std::max_element(logits.begin(), logits.begin() + n_expert);
                logits[5] = logits[6] = top + 1.0f;
                if (n_expert > 35) logits[3] = logits[35] = top + 2.0f;
                if (n_expert > 33) logits[2] = logits[33] = top + 3.0f;
                RoutingParams p;
                p.n_expert = n_expert;
                p.top_k = k;
                p.gating = gating;
                p.normalize = k > 1 && gating == ExpertGating::kSoftmax;
                p.scale = k == 2 ? 2.5f : 1.0f;
                std::vector<Route> ref(rows * k);
                std::vector<float> cpu = logits;
                for (int t = 0; t < rows; ++t)
                    route_experts(p, cpu.data() + t * n_expert, ref.data() + t * k);
                DeviceArray<float> dl(logits);
                DeviceArray<Route> routes(rows * k);
                cuda::Stream stream;
                DeviceArray<float> probs(logits.size());
                cuda::route_topk({dl.get(), rows, n_expert, n_expert},
                                 {probs.get(), rows, n_expert, n_expert}, p, routes.get(),
                                 stream.get());
                const std::vector<Route> got = routes.download();
                for (int i = 0; i < rows * k; ++i) {
                    ASSERT_EQ(got[i].expert, ref[i].expert) << n_expert << " experts, top " << k
                                                            << ", route " << i << ", gating "
                                                            << static_cast<int>(gating);
                    ASSERT_NEAR(got[i].weight, ref[i].weight, 1e-6f)
                        << n_expert << " experts, top " << k << ", gating " << static_cast<int>(gating);
                }
            }
        }
    }
}

TEST(GpuRouting, WeightedSumInRouteOrder) {
    TANDEM_REQUIRE_GPU();
    // 10 routes a token: more than the routes whose loads go out together (routed_sum.cuh).
    for (const int k : {3, 10}) {
        const int n_tokens = 5, cols = 300;
        std::vector<Route> routes(n_tokens * k);
        for (int j = 0; j < n_tokens * k; ++j)
            routes[j] = {j % 4 == 1 ? -1 : j % 5, 0.1f * (j + 1)};
        const std::vector<float> y = testing::random_floats(n_tokens * k * cols, 8);
        std::vector<float> ref(n_tokens * cols, 0.0f);
        for (int t = 0; t < n_tokens; ++t)
            for (int i = 0; i < k; ++i)
                if (routes[t * k + i].expert >= 0)
                    for (int c = 0; c < cols; ++c)
                        ref[t * cols + c] = std::fma(routes[t * k + i].weight,
                                                     y[(t * k + i) * cols + c], ref[t * cols + c]);
        DeviceArray<float> dy(y), out(ref.size());
        DeviceArray<Route> dr(routes);
        cuda::Stream stream;
        cuda::moe_weighted_sum({dy.get(), cols, dr.get(), k}, {out.get(), n_tokens, cols, cols},
                               stream.get());
        // The same fused products in the same order: the same bits.
        EXPECT_EQ(out.download(), ref) << k << " routes a token";
    }
}

TEST(GpuArgmax, LargestValueLowestIndexAcrossBlocks) {
    TANDEM_REQUIRE_GPU();
    // Rows of a vocabulary's width, split over many blocks: the largest value at the start, in
    // the middle, at the very end; a tie between blocks (the lower index wins); a row of -inf
    // (index 0, as a plain scan gives); NaNs never win.
    const int64_t cols = 151936;
    const int rows = 6;
    std::vector<float> x = testing::random_floats(static_cast<size_t>(rows) * cols, 21);
    const auto at = [&](int r, int64_t c) -> float& { return x[r * cols + c]; };
    at(0, 0) = 50.0f;
    at(1, 77777) = 50.0f;
    at(2, cols - 1) = 50.0f;
    at(3, 4099) = 50.0f, at(3, 100000) = 50.0f, at(3, 5000) = 49.0f;
    for (int64_t c = 0; c < cols; ++c) at(4, c) = -INFINITY;
    at(5, 12) = NAN, at(5, 9000) = 40.0f, at(5, 9001) = NAN;
    DeviceArray<float> dx(x);
    DeviceArray<uint64_t> keys(rows);
    cuda::Stream stream;
    cuda::argmax_rows({dx.get(), rows, cols, cols}, keys.get(), stream.get());
    const std::vector<uint64_t> got = keys.download();
    const int32_t want[rows] = {0, 77777, static_cast<int32_t>(cols - 1), 4099, 0, 9000};
    for (int r = 0; r < rows; ++r) EXPECT_EQ(cuda::argmax_index(got[r]), want[r]) << "row " << r;
}

}  // namespace
}  // namespace tandem
