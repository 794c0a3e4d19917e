// The GPU operations Gemma 4 needs, against the CPU's: attention over a KV cache whose layers
// have their own head counts and sizes (heads of 512 values, as a real Gemma 4 file's global
// layers, in the decode and the prefill kernels), sliding windows over rings and a cache read by
// a later layer; per-head norm and partial rope of heads of 512 and the store into such a cache;
// the value norm without a weight; GELU through ggml's fp16 table (alone and fused with the
// rounding); scale, mul, soft-capping and strided copies. The KV cache's layout is checked on
// the host (it needs no GPU).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/kv_cache.h"
#include "cpu/rope.h"
#include "cuda/attention.h"
#include "cuda/elementwise.h"
#include "cuda/gpu_test_util.h"
#include "cuda/matmul.h"
#include "cuda/rope.h"
#include "cuda/stream.h"

namespace tandem {
namespace {

using testing::DeviceArray;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = a.size() == b.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
    return worst;
}

// ---- the KV cache's layout (host arithmetic only)

// Layers of their own heads, one of them reading an earlier layer's cache: each owning layer's
// keys and values start where the last owning layer's end, the sharing layer takes no memory and
// gets its source's cache, and the sizes add up.
TEST(GpuGemma4KvLayout, LayersOfTheirOwnShapesAndSharedCaches) {
    KvShape shape{4, 3, 100, 4, 512, 512};
    cuda::DeviceKv kv;
    kv.k = reinterpret_cast<void*>(uintptr_t{1} << 40);
    kv.v = reinterpret_cast<void*>(uintptr_t{1} << 41);
    kv.shape = shape;
    kv.f16 = true;
    kv.positions = {23, 100, 23, 23};
    // Layer 0 slides (ring of 23, 4 heads of 256), layer 1 is global (1 head of 512, values of
    // 512), layer 2 slides with 2 heads of 128, layer 3 reads layer 2's cache.
    kv.per_layer = {{4, 256, 256, 0}, {1, 512, 512, 1}, {2, 128, 128, 2}, {2, 128, 128, 2}};
    EXPECT_TRUE(kv.owns(0) && kv.owns(1) && kv.owns(2));
    EXPECT_FALSE(kv.owns(3));
    const auto at = [](const void* p, const void* base) {
        return static_cast<size_t>(static_cast<const uint8_t*>(p) -
                                   static_cast<const uint8_t*>(base));
    };
    const size_t k0 = size_t{3} * 23 * 4 * 256 * 2, k1 = size_t{3} * 100 * 1 * 512 * 2,
                 k2 = size_t{3} * 23 * 2 * 128 * 2;
    const cuda::KvLayer l0 = kv.layer(0), l1 = kv.layer(1), l2 = kv.layer(2), l3 = kv.layer(3);
    EXPECT_EQ(at(l0.k, kv.k), 0u);
    EXPECT_EQ(at(l1.k, kv.k), k0);
    EXPECT_EQ(at(l2.k, kv.k), k0 + k1);
    EXPECT_EQ(at(l1.v, kv.v), k0);  // values as wide as keys here
    EXPECT_EQ(at(l2.v, kv.v), k0 + k1);
    EXPECT_EQ(l3.k, l2.k);
    EXPECT_EQ(l3.v, l2.v);
    EXPECT_EQ(l3.positions, 23);
    EXPECT_EQ(l1.n_kv, 1);
    EXPECT_EQ(l1.dk, 512);
    EXPECT_EQ(l2.dv, 128);
    EXPECT_EQ(l1.positions, 100);
    EXPECT_EQ(kv.key_bytes(), k0 + k1 + k2);
    EXPECT_EQ(kv.value_bytes(), k0 + k1 + k2);
    // Values narrower than keys.
    kv.per_layer[1].dv = 256;
    EXPECT_EQ(kv.value_bytes(), k0 + k1 / 2 + k2);
    EXPECT_EQ(at(kv.layer(2).v, kv.v), k0 + k1 / 2);
    // Without per-layer shapes: the uniform layout, every layer its own.
    kv.per_layer.clear();
    kv.positions.clear();
    EXPECT_TRUE(kv.owns(3));
    EXPECT_EQ(at(kv.layer(3).k, kv.k), size_t{3} * 3 * 100 * 4 * 512 * 2);
    EXPECT_EQ(kv.key_bytes(), size_t{4} * 3 * 100 * 4 * 512 * 2);
}

// ---- attention

struct Gemma4AttentionCase {
    int n_head, n_kv, head_dim, n_ctx;
    bool f16;
    int window = 0;  // > 0: a sliding window over a ring of window + 15 positions
};

std::ostream& operator<<(std::ostream& os, const Gemma4AttentionCase& c) {
    return os << c.n_head << "x" << c.head_dim << " (" << c.n_kv << " kv), ctx " << c.n_ctx
              << (c.f16 ? " f16" : " f32") << ", window " << c.window;
}

class GpuGemma4Attention : public ::testing::TestWithParam<Gemma4AttentionCase> {};

// A cache of three layers: layer 0 of other heads (a sliding ring), layer 1 of the case's heads,
// layer 2 reading layer 1's cache. Both owning layers are filled; attention through layer 2 (and
// 1) must give the CPU's over layer 1's keys and values, and through layer 0 the CPU's over
// layer 0's: neither layer's cache overlaps the other's.
TEST_P(GpuGemma4Attention, LayersOfTheirOwnHeadsMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    const Gemma4AttentionCase c = GetParam();
    const int n_seq = 2;
    const KvType type = c.f16 ? KvType::kF16 : KvType::kF32;
    const int ring = c.window > 0 ? std::min(c.n_ctx, c.window + 15) : c.n_ctx;
    // Layer 0: 2 KV heads of 64 sliding over 8 positions (a ring of 23), 4 query heads.
    const int other_kv = 2, other_dim = 64, other_heads = 4, other_window = 8;
    const int other_ring = std::min(c.n_ctx, other_window + 15);

    const int len[2] = {c.n_ctx, c.n_ctx / 3 + 1};
    std::vector<TokenPlace> places;
    for (int s = 0; s < n_seq; ++s)
        for (int p = 0; p < len[s]; ++p) places.push_back({s, p});
    const int n = static_cast<int>(places.size());
    const int64_t kv_cols = int64_t{c.n_kv} * c.head_dim,
                  other_cols = int64_t{other_kv} * other_dim;
    const std::vector<float> k = testing::random_floats(n * kv_cols, 1),
                             v = testing::random_floats(n * kv_cols, 2),
                             k0 = testing::random_floats(n * other_cols, 3),
                             v0 = testing::random_floats(n * other_cols, 4);
    KvCache cpu(KvShape{1, n_seq, ring, c.n_kv, c.head_dim, c.head_dim}, type);
    KvCache cpu0(KvShape{1, n_seq, other_ring, other_kv, other_dim, other_dim}, type);
    for (int t = 0; t < n; ++t) {
        cpu.store_k(0, places[t].seq, places[t].pos, k.data() + t * kv_cols);
        cpu.store_v(0, places[t].seq, places[t].pos, v.data() + t * kv_cols);
        cpu0.store_k(0, places[t].seq, places[t].pos, k0.data() + t * other_cols);
        cpu0.store_v(0, places[t].seq, places[t].pos, v0.data() + t * other_cols);
    }

    cuda::Stream stream;
    cuda::DeviceKv kv;
    kv.shape = KvShape{3, n_seq, c.n_ctx, c.n_kv, c.head_dim, c.head_dim};
    kv.f16 = c.f16;
    kv.positions = {other_ring, ring, ring};
    kv.per_layer = {{other_kv, other_dim, other_dim, 0},
                    {c.n_kv, c.head_dim, c.head_dim, 1},
                    {c.n_kv, c.head_dim, c.head_dim, 1}};
    DeviceArray<uint8_t> dk(kv.key_bytes()), dv(kv.value_bytes());
    kv.k = dk.get();
    kv.v = dv.get();
    const cuda::KvLayer layer0 = kv.layer(0), layer1 = kv.layer(1), shared = kv.layer(2);
    ASSERT_EQ(shared.k, layer1.k);
    ASSERT_EQ(shared.positions, ring);
    ASSERT_EQ(layer0.positions, other_ring);
    DeviceArray<float> dkin(k), dvin(v), dk0(k0), dv0(v0);
    DeviceArray<TokenPlace> dplaces(places);
    // In batches no longer than either ring: a batch never stores two positions in one slot.
    const int step = std::min(ring, other_ring);
    for (int t0 = 0; t0 < n; t0 += step) {
        const int rows = std::min(step, n - t0);
        cuda::store_kv(layer1, {dkin.get() + t0 * kv_cols, rows, kv_cols, kv_cols},
                       {dvin.get() + t0 * kv_cols, rows, kv_cols, kv_cols}, dplaces.get() + t0,
                       stream.get());
        cuda::store_kv(layer0, {dk0.get() + t0 * other_cols, rows, other_cols, other_cols},
                       {dv0.get() + t0 * other_cols, rows, other_cols, other_cols},
                       dplaces.get() + t0, stream.get());
    }

    // Queries: the last position of each sequence and the last 16 of sequence 0 (what a ring
    // still holds the windows of).
    std::vector<TokenPlace> qp = {{0, len[0] - 1}, {1, len[1] - 1}};
    for (int p = len[0] - 16; p < len[0]; ++p) qp.push_back({0, p});
    const int nq = static_cast<int>(qp.size());
    DeviceArray<TokenPlace> dqp(qp);
    ThreadPool pool(1);
    const double tolerance =
        c.f16 ? (c.head_dim > 256 ? 5e-3 : 3e-3) : (c.head_dim > 256 ? 4e-5 : 2e-5);

    // One layer's attention, CPU against both GPU kernels.
    const auto check = [&](const KvCache& ref_cache, const cuda::KvLayer& cache, int n_head,
                           int head_dim, int window, const std::string& what) {
        const int64_t q_cols = int64_t{n_head} * head_dim;
        const std::vector<float> q = testing::random_floats(nq * q_cols, 5 + head_dim);
        std::vector<float> ref(nq * q_cols);
        Attention attention(1, c.n_ctx, head_dim, n_head / cache.n_kv, window);
        Attention::Params params;
        params.n_head = n_head;
        // Gemma 4's layers scale by 1 (the Q norm does the scaling); the queries are small here.
        params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        params.window = window;
        attention.run(ref_cache, 0, q.data(), qp.data(), nq, params, ref.data(), pool);
        for (int chunk : {64, 0}) {
            const int n_chunks =
                chunk > 0 ? (c.n_ctx + chunk - 1) / chunk : cuda::decode_chunks(c.n_ctx);
            const int64_t capacity = int64_t{n_head} * n_chunks * cuda::kSmallBatch;
            DeviceArray<float> values(capacity * head_dim), stats(capacity * 2);
            const cuda::AttentionScratch scratch{values.get(), stats.get(), capacity};
            DeviceArray<float> dq(q), dout(std::vector<float>(nq * q_cols, NAN));
            cuda::attention(cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params, chunk,
                            n_chunks, scratch, {dout.get(), nq, q_cols, q_cols}, stream.get());
            EXPECT_LE(max_abs_diff(dout.download(), ref), tolerance)
                << what << ", decode, chunk " << chunk;
        }
        DeviceArray<float> dq(q), dout(std::vector<float>(nq * q_cols, NAN));
        cuda::attention_tiled(cache, {dq.get(), nq, q_cols, q_cols}, dqp.get(), params,
                              {dout.get(), nq, q_cols, q_cols}, stream.get());
        EXPECT_LE(max_abs_diff(dout.download(), ref), tolerance) << what << ", query tiles";
    };
    check(cpu, layer1, c.n_head, c.head_dim, c.window, "layer 1");
    check(cpu, shared, c.n_head, c.head_dim, c.window, "layer 2 (layer 1's cache)");
    check(cpu0, layer0, other_heads, other_dim, other_window, "layer 0");
}

// Heads of 512 (global layers of a real Gemma 4 file) full and sliding, heads of 256 (its
// sliding layers), the synthetic models' small heads; f16 and f32 caches; contexts over many
// decode chunks and prefill key tiles.
INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemma4Attention,
                         ::testing::Values(Gemma4AttentionCase{4, 2, 512, 300, false},
                                           Gemma4AttentionCase{8, 1, 512, 700, true},
                                           Gemma4AttentionCase{16, 2, 512, 1100, false},
                                           Gemma4AttentionCase{4, 2, 512, 300, false, 40},
                                           Gemma4AttentionCase{4, 1, 512, 300, true, 8},
                                           Gemma4AttentionCase{8, 4, 256, 520, true, 40},
                                           Gemma4AttentionCase{8, 2, 384, 200, false},
                                           Gemma4AttentionCase{4, 1, 16, 300, false, 8}));

// ---- norm, rope and the store

// Per-head norm then rope of heads of 512 with a partial rotation through frequency factors of
// 1e30 (Gemma 4's proportional rope: the pairs past the rotated share turn by nothing) and of
// heads of 256 with their own base: the CPU's rms_norm then Rope::apply.
TEST(GpuGemma4Rope, NormRopeOfWideHeadsMatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    for (const int head_dim : {512, 256}) {
        std::vector<float> factors(head_dim / 2, 1e30f);
        std::fill(factors.begin(), factors.begin() + head_dim / 8, 1.0f);
        RopeParams p;
        p.type = RopeType::kNeox;
        p.n_dims = head_dim;
        p.freq_base = head_dim == 512 ? 1000000.0f : 10000.0f;
        if (head_dim == 512) p.freq_factors = factors.data();
        const int n_heads = 3, rows = 4;
        const int64_t cols = int64_t{n_heads} * head_dim;
        const std::vector<TokenPlace> places = {{0, 0}, {0, 9}, {1, 2047}, {0, 30000}};
        const std::vector<float> x = testing::random_floats(rows * cols, 61, 3.0f);
        const std::vector<float> w = testing::random_floats(head_dim, 62);
        std::vector<float> ref = x;
        Rope rope(p);
        std::vector<float> cache(p.n_dims + 2);
        for (int t = 0; t < rows; ++t) {
            for (int h = 0; h < n_heads; ++h) {
                float* head = ref.data() + t * cols + h * head_dim;
                rms_norm(head, w.data(), head_dim, 1e-6f, head);
            }
            rope.apply(ref.data() + t * cols, n_heads, head_dim, places[t].pos, cache.data());
        }
        const cuda::RopeTable table = cuda::make_rope_table(p);
        DeviceArray<float> dx(x), dw(w), factor(table.factor), ramp(table.ramp);
        DeviceArray<TokenPlace> dp(places);
        cuda::Stream stream;
        cuda::norm_rope({dx.get(), rows, cols, cols}, n_heads, head_dim, dw.get(), 1e-6f, dp.get(),
                        table, factor.get(), ramp.get(), stream.get());
        EXPECT_LE(max_abs_diff(dx.download(), ref), 2e-5) << "heads of " << head_dim;
    }
}

// The fused norms, rotations and store into a cache whose layers have their own heads: the
// store lands in the layer's own part of the cache (heads of 512 after a layer of other heads),
// byte for byte as norm_rope() twice and store_kv() give it.
TEST(GpuGemma4Rope, NormRopeStoreIntoALayerOfItsOwnHeads) {
    TANDEM_REQUIRE_GPU();
    const int dk = 512, n_head = 4, n_kv = 1, rows = 3;
    RopeParams p;
    p.type = RopeType::kNeox;
    p.n_dims = 128;  // a partial rotation: the rest of each head left alone
    p.freq_base = 1000000.0f;
    const cuda::RopeTable table = cuda::make_rope_table(p);
    const int64_t q_cols = int64_t{n_head} * dk, k_cols = int64_t{n_kv} * dk;
    const std::vector<TokenPlace> places = {{0, 0}, {1, 5}, {0, 15}};
    const std::vector<float> q = testing::random_floats(rows * q_cols, 71, 3.0f),
                             k = testing::random_floats(rows * k_cols, 72, 3.0f),
                             v = testing::random_floats(rows * k_cols, 73),
                             qw = testing::random_floats(dk, 74),
                             kw = testing::random_floats(dk, 75);
    DeviceArray<float> factor(table.factor), ramp(table.ramp), dqw(qw), dkw(kw);
    DeviceArray<TokenPlace> dp(places);
    for (const bool f16 : {true, false}) {
        cuda::DeviceKv shape_only;
        shape_only.shape = KvShape{2, 2, 16, 2, 64, 64};
        shape_only.f16 = f16;
        shape_only.positions = {16, 6};  // layer 1: a ring of 6
        shape_only.per_layer = {{2, 64, 64, 0}, {n_kv, dk, dk, 1}};
        DeviceArray<uint8_t> ref_k(shape_only.key_bytes()), ref_v(shape_only.value_bytes()),
            got_k(shape_only.key_bytes()), got_v(shape_only.value_bytes());
        for (auto* a : {&ref_k, &ref_v, &got_k, &got_v}) cudaMemset(a->get(), 0, a->size());
        cuda::DeviceKv ref_kv = shape_only, got_kv = shape_only;
        ref_kv.k = ref_k.get(), ref_kv.v = ref_v.get();
        got_kv.k = got_k.get(), got_kv.v = got_v.get();
        DeviceArray<float> rq(q), rk(k), rv(v), gq(q), gk(k), gv(v);
        cuda::Stream stream;
        cuda::norm_rope({rq.get(), rows, q_cols, q_cols}, n_head, dk, dqw.get(), 1e-6f, dp.get(),
                        table, factor.get(), ramp.get(), stream.get());
        cuda::norm_rope({rk.get(), rows, k_cols, k_cols}, n_kv, dk, dkw.get(), 1e-6f, dp.get(),
                        table, factor.get(), ramp.get(), stream.get());
        cuda::store_kv(ref_kv.layer(1), {rk.get(), rows, k_cols, k_cols},
                       {rv.get(), rows, k_cols, k_cols}, dp.get(), stream.get());
        cuda::norm_rope_store({gq.get(), rows, q_cols, q_cols}, n_head,
                              {gk.get(), rows, k_cols, k_cols}, {gv.get(), rows, k_cols, k_cols},
                              dqw.get(), dkw.get(), 1e-6f, dp.get(), table, factor.get(),
                              ramp.get(), got_kv.layer(1), stream.get());
        EXPECT_EQ(rq.download(), gq.download()) << "queries, f16 " << f16;
        EXPECT_EQ(rk.download(), gk.download()) << "keys, f16 " << f16;
        const std::vector<uint8_t> a = ref_k.download(), b = got_k.download();
        EXPECT_EQ(a, b) << "key cache, f16 " << f16;
        EXPECT_EQ(ref_v.download(), got_v.download()) << "value cache, f16 " << f16;
        // Layer 0's part stayed zero, layer 1's was written.
        const size_t layer0 = static_cast<const uint8_t*>(got_kv.layer(1).k) - got_k.get();
        EXPECT_EQ(std::count(b.begin(), b.begin() + layer0, uint8_t{0}),
                  static_cast<std::ptrdiff_t>(layer0));
        EXPECT_NE(std::count(b.begin() + layer0, b.end(), uint8_t{0}),
                  static_cast<std::ptrdiff_t>(b.size() - layer0));
    }
}

// Gemma 4's value norm: per head, no weight.
TEST(GpuGemma4Ops, ValueNormWithoutAWeightMatchesTheCpu) {
    TANDEM_REQUIRE_GPU();
    const int rows = 5;
    for (const int head_dim : {16, 256, 512}) {
        const int64_t cols = 2 * int64_t{head_dim};
        const std::vector<float> x = testing::random_floats(rows * cols, 81, 3.0f);
        std::vector<float> ref(x.size());
        for (int r = 0; r < rows; ++r)
            for (int h = 0; h < 2; ++h)
                rms_norm(x.data() + r * cols + h * head_dim, nullptr, head_dim, 1e-6f,
                         ref.data() + r * cols + h * head_dim);
        DeviceArray<float> dx(x);
        cuda::Stream stream;
        cuda::rms_norm({dx.get(), rows, cols, cols}, nullptr, head_dim, 1e-6f,
                       {dx.get(), rows, cols, cols}, stream.get());
        EXPECT_LE(max_abs_diff(dx.download(), ref), 2e-5) << "heads of " << head_dim;
    }
}

// ---- GELU, scale, mul, softcap, copy

// ggml's fp16 table, read as the CPU reads it: bit for bit, gates past ±10 (the shortcuts) and
// near the table's rounding steps included; strided inputs (the per-layer inputs' columns).
TEST(GpuGemma4Ops, GeluThroughTheFp16TableIsTheCpus) {
    TANDEM_REQUIRE_GPU();
    cuda::upload_gelu_table();
    const int rows = 4, cols = 1024, stride = 1100;
    std::vector<float> g = testing::random_floats(rows * stride, 91, 6.0f),
                       u = testing::random_floats(rows * cols, 92);
    for (int i = 0; i < 64; ++i) g[i] = -12.0f + 0.375f * i;  // across -10 and 10
    g[70] = -10.0f, g[71] = 10.0f, g[72] = 0.0f, g[73] = -0.0f, g[74] = 1e-8f;
    std::vector<float> ref(rows * cols);
    for (int r = 0; r < rows; ++r)
        gelu_glu(g.data() + r * stride, u.data() + r * cols, cols, ref.data() + r * cols);
    DeviceArray<float> dg(g), du(u), out(ref.size());
    cuda::Stream stream;
    cuda::glu(GluKind::kGelu, {dg.get(), rows, cols, stride}, {du.get(), rows, cols, cols},
              {out.get(), rows, cols, cols}, stream.get());
    const std::vector<float> got = out.download();
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "value " << i;
    // And fused with the rounding for q8 products, as glu() then round_activations().
    const cuda::DeviceRows gate{dg.get(), rows, cols, stride}, up{du.get(), rows, cols, cols};
    for (GgmlType dot : {GgmlType::kQ8_0, GgmlType::kQ8_K}) {
        DeviceArray<float> ref_r(ref.size()), got_r(ref.size());
        DeviceArray<int8_t> q_ref(ref.size()), q_got(ref.size());
        DeviceArray<float> d_ref(ref.size() / 32), d_got(ref.size() / 32);
        const cuda::Q8Rows c_ref{q_ref.get(), d_ref.get(), cols, cols / 32},
            c_got{q_got.get(), d_got.get(), cols, cols / 32};
        cuda::round_activations({out.get(), rows, cols, cols}, dot, {ref_r.get(), rows, cols, cols},
                                stream.get(), &c_ref);
        cuda::glu_round_activations(GluKind::kGelu, gate, up, dot, {got_r.get(), rows, cols, cols},
                                    c_got, stream.get());
        EXPECT_EQ(ref_r.download(), got_r.download()) << format_of(dot).name;
        EXPECT_EQ(q_ref.download(), q_got.download()) << format_of(dot).name;
        EXPECT_EQ(d_ref.download(), d_got.download()) << format_of(dot).name;
    }
}

TEST(GpuGemma4Ops, ScaleMulSoftcapAndCopyMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    const int rows = 3, cols = 300, stride = 320;
    const std::vector<float> x = testing::random_floats(rows * stride, 101, 40.0f);
    const std::vector<float> w = testing::random_floats(cols, 102);
    cuda::Stream stream;
    const auto cpu_rows = [&](auto op) {
        std::vector<float> ref = x;
        for (int r = 0; r < rows; ++r) op(ref.data() + r * stride);
        return ref;
    };
    {
        DeviceArray<float> dx(x);
        cuda::scale_rows({dx.get(), rows, cols, stride}, 0.0625f, stream.get());
        const std::vector<float> ref = cpu_rows([&](float* p) {
            for (int i = 0; i < cols; ++i) p[i] *= 0.0625f;
        });
        EXPECT_EQ(dx.download(), ref) << "scale";
    }
    for (const bool one : {false, true}) {
        DeviceArray<float> dx(x), dw(w);
        cuda::mul_rows({dx.get(), rows, cols, stride}, dw.get(), one ? 1 : cols, stream.get());
        const std::vector<float> ref = cpu_rows([&](float* p) {
            for (int i = 0; i < cols; ++i) p[i] *= w[one ? 0 : i];
        });
        EXPECT_EQ(dx.download(), ref) << "mul, one value " << one;
    }
    {
        DeviceArray<float> dx(x);
        cuda::softcap_rows({dx.get(), rows, cols, stride}, 30.0f, stream.get());
        const std::vector<float> ref = cpu_rows([&](float* p) { softcap(p, cols, 30.0f); });
        const std::vector<float> got = dx.download();
        for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 4e-6f * (1.0f + std::fabs(ref[i]))) << "softcap " << i;
    }
    {
        // Per-head slices of rows: heads of 16 every 40 values into packed heads, and back into
        // another buffer's columns.
        const int heads = rows * 7;
        DeviceArray<float> dx(x), packed(std::vector<float>(heads * 16, NAN)),
            back(std::vector<float>(x.size(), 0.0f));
        cuda::copy_rows({dx.get() + 3, heads, 16, 40}, {packed.get(), heads, 16, 16}, stream.get());
        cuda::copy_rows({packed.get(), heads, 16, 16}, {back.get() + 3, heads, 16, 40},
                        stream.get());
        const std::vector<float> p = packed.download(), b = back.download();
        for (int h = 0; h < heads; ++h) {
            for (int i = 0; i < 16; ++i) {
                ASSERT_EQ(p[h * 16 + i], x[3 + h * 40 + i]) << "head " << h;
                ASSERT_EQ(b[3 + h * 40 + i], x[3 + h * 40 + i]) << "head " << h;
            }
        }
        EXPECT_EQ(b[0], 0.0f);
        EXPECT_EQ(b[3 + 16], 0.0f);  // between the slices: untouched
    }
}

}  // namespace
}  // namespace tandem
