// qwen3.5 (qwen35, qwen35moe) on the GPU. The operations of its gated delta-net layers and gates
// through the GPU backend against the same operations of the CPU backend (sigmoid, mul_sigmoid,
// l2_norm_heads, ssm_decay, copies of strided views, and short_conv and delta_net over several
// sequences in batches that mix them, split them and start one over at position 0, their states
// saved and loaded); interleaved multimodal rope against the CPU's. Whole models: teacher-forced
// logits against the CPU backend in batches of every size, decode steps against prefill over
// hundreds of tokens, interleaved sequences against each alone, every expert strategy, sequence
// copies (the prefix cache) on the GPU. Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cpu/rope.h"
#include "cuda/gpu_model_checks.h"
#include "cuda/gpu_test_util.h"
#include "cuda/matmul.h"
#include "cuda/rope.h"
#include "cuda/stream.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "model/backend.h"
#include "model/decoder.h"
#include "model/model.h"
#include "support/collecting_sink.h"
#include "support/model_files.h"
#include "support/oracle_runs.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::all_logits;
using testing::compare_logits;
using testing::DeviceArray;
using testing::expect_conformant;
using testing::expect_conformant_routed;
using testing::LogitComparison;
using testing::strategy;

ThreadPool& pool() {
    return testing::gpu_test_pool();
}

// ---------------------------------------------------------------- the operations

// The largest |a - b| / (1 + |b|).
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0.0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::fabs(b[i]));
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
    return worst;
}

// Writes packed host rows into a (strided) activation of either backend.
void upload(Ops& ops, Act a, const std::vector<float>& host) {
    ASSERT_EQ(host.size(), static_cast<size_t>(a.rows) * a.cols);
    if (ops.name() == "cuda") {
        cuda::check(cudaDeviceSynchronize(), "test upload");
        cuda::check(
            cudaMemcpy2D(a.data, sizeof(float) * a.stride, host.data(), sizeof(float) * a.cols,
                         sizeof(float) * a.cols, a.rows, cudaMemcpyHostToDevice),
            "test upload");
        return;
    }
    for (int r = 0; r < a.rows; ++r)
        std::memcpy(a.row(r), host.data() + r * a.cols, sizeof(float) * a.cols);
}

std::vector<float> download(Ops& ops, Act a) {
    std::vector<float> host(static_cast<size_t>(a.rows) * a.cols);
    ops.read(a, host.data());
    return host;
}

// The delta-net's shape: state (head) size, key and value heads, convolution taps.
struct DeltaShape {
    int state, k_heads, v_heads, taps;
};

std::ostream& operator<<(std::ostream& os, const DeltaShape& s) {
    return os << "state" << s.state << "_k" << s.k_heads << "_v" << s.v_heads << "_taps" << s.taps;
}

// A two-layer qwen35 (layer 0 a delta-net, layer 1 full attention) and both backends over it:
// 3 sequences of 64 positions, batches of up to 32 tokens.
struct Backends {
    explicit Backends(const DeltaShape& d) {
        SynthSpec s = testing::tiny_spec("qwen35");
        s.n_layer = 2;
        s.full_attn_interval = 2;
        s.n_embd = 256;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 64;
        s.n_ff = 256;
        s.ssm_state = d.state;
        s.ssm_k_heads = d.k_heads;
        s.ssm_v_heads = d.v_heads;
        s.conv_kernel = d.taps;
        model = Model::load(testing::write_model(s, dir.file("ops.gguf")));
        BackendOptions o;
        o.n_seq = 3;
        o.n_ctx = 64;
        o.max_batch = 32;
        o.kv_type = KvType::kF32;
        cpu = make_backend(*model, pool(), o);
        o.device = Device::kCuda;
        gpu = make_backend(*model, pool(), o);
    }
    const ModelConfig::DeltaNet& delta() const { return model->config().delta; }
    // Both backends' batch: token 0 at every place, no logits.
    void set_batch(const std::vector<TokenPlace>& places) {
        const std::vector<int32_t> tokens(places.size(), 0);
        cpu->set_batch(tokens, places, {});
        gpu->set_batch(tokens, places, {});
    }

    testing::TempDir dir;
    std::unique_ptr<Model> model;
    std::unique_ptr<Ops> cpu, gpu;
};

const DeltaShape kOpsShape{32, 2, 4, 4};

TEST(GpuQwen35Ops, SigmoidAndMulSigmoidMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    Backends b(kOpsShape);
    const int rows = 5, cols = 300;
    const std::vector<float> x = testing::random_floats(rows * cols, 1, 6.0f),
                             gate = testing::random_floats(rows * cols, 2, 6.0f);
    std::vector<float> results[2][3];
    for (int i = 0; i < 2; ++i) {
        Ops& ops = i == 0 ? *b.cpu : *b.gpu;
        // Strided rows (a view of every other 300 of 600 columns).
        const Act buffer = ops.allocate(rows, 2 * cols), gbuf = ops.allocate(rows, cols);
        const Act xs{buffer.data + cols, rows, cols, 2 * cols};
        upload(ops, xs, x);
        ops.sigmoid(xs);
        results[i][0] = download(ops, xs);
        // A gate per value, and one per row (the shared expert's).
        upload(ops, xs, x);
        upload(ops, gbuf, gate);
        ops.mul_sigmoid(xs, gbuf);
        results[i][1] = download(ops, xs);
        upload(ops, xs, x);
        ops.mul_sigmoid(xs, Act{gbuf.data, rows, 1, cols});
        results[i][2] = download(ops, xs);
    }
    for (int k = 0; k < 3; ++k)
        EXPECT_LE(max_rel_diff(results[1][k], results[0][k]), 1e-6) << "case " << k;
    // Not the identity: sigmoid moved the values.
    EXPECT_NE(results[0][0], x);
}

TEST(GpuQwen35Ops, L2NormHeadsSsmDecayAndStridedCopyMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    Backends b(kOpsShape);
    const int rows = 7, head = 32, heads = 6, hv = b.delta().n_v_heads;
    const int64_t cols = int64_t{head} * heads;
    std::vector<float> x = testing::random_floats(rows * cols, 3, 2.0f);
    std::fill(x.begin(), x.begin() + head, 0.0f);  // a zero head: eps keeps it finite
    // Decay inputs across softplus's branch at 20.
    std::vector<float> d = testing::random_floats(rows * hv, 4, 12.0f);
    d[1] = 19.9f, d[2] = 20.1f, d[3] = -30.0f;
    std::vector<float> got[2][3];
    for (int i = 0; i < 2; ++i) {
        Ops& ops = i == 0 ? *b.cpu : *b.gpu;
        const LayerWeights& L = ops.weights().layers[0];
        const Act buffer = ops.allocate(rows, cols + 40);
        const Act xs{buffer.data + 8, rows, cols,
                     cols + 40};  // strided, as q and k of the conv output
        upload(ops, xs, x);
        ops.l2_norm_heads(xs, head, 1e-6f);
        got[i][0] = download(ops, xs);
        const Act decay = ops.allocate(rows, hv);
        upload(ops, decay, d);
        ops.ssm_decay(decay, L.ssm_dt, L.ssm_a);
        got[i][1] = download(ops, decay);
        // q and the gate interleaved per head in wq's output, split as the decoder splits them.
        const Act qg = ops.allocate(rows, 2 * cols), q = ops.allocate(rows, cols),
                  g = ops.allocate(rows, cols);
        const std::vector<float> both = testing::random_floats(rows * 2 * cols, 5);
        upload(ops, qg, both);
        ops.copy(Act{qg.data, rows * heads, head, 2 * head}, Act{q.data, rows * heads, head, head});
        ops.copy(Act{qg.data + head, rows * heads, head, 2 * head},
                 Act{g.data, rows * heads, head, head});
        got[i][2] = download(ops, q);
        const std::vector<float> gate = download(ops, g);
        got[i][2].insert(got[i][2].end(), gate.begin(), gate.end());
        if (i == 0) {
            // The copies are the halves of each head pair.
            EXPECT_EQ(got[0][2][0], both[0]);
            EXPECT_EQ(got[0][2][rows * cols], both[head]);
        }
    }
    EXPECT_LE(max_rel_diff(got[1][0], got[0][0]), 1e-6) << "l2_norm_heads";
    EXPECT_LE(max_rel_diff(got[1][1], got[0][1]), 1e-6) << "ssm_decay";
    EXPECT_EQ(got[1][2], got[0][2]) << "copy";
}

// short_conv and delta_net over 3 sequences: a prefill batch of one sequence, decode batches
// that interleave all three, a prefill batch of two interleaved, one sequence starting over at
// position 0 (inside a decode batch) and going on in a prefill batch; against the CPU's after
// every batch. Then the states: saved by the GPU as the CPU saves them, loaded from the CPU's
// into another sequence, which continues as the CPU's does; and a batch at the wrong position
// refused without a change.
class GpuQwen35DeltaNet : public ::testing::TestWithParam<DeltaShape> {};

TEST_P(GpuQwen35DeltaNet, ShortConvAndDeltaRuleMatchTheCpuOverSequencesAndBatches) {
    TANDEM_REQUIRE_GPU();
    Backends b(GetParam());
    const ModelConfig::DeltaNet& d = b.delta();
    const int64_t C = d.conv_width(), Kw = d.key_width(), Vw = d.value_width();
    const int Hv = d.n_v_heads;
    const int T = 32;
    struct Buffers {
        Act x, conv, g, beta, out;
    } buf[2];
    for (int i = 0; i < 2; ++i) {
        Ops& ops = i == 0 ? *b.cpu : *b.gpu;
        buf[i] = {ops.allocate(T, C), ops.allocate(T, C), ops.allocate(T, Hv), ops.allocate(T, Hv),
                  ops.allocate(T, Vw)};
    }
    int next[3] = {0, 0, 0};
    auto rows_of = [&](int seq, int n) {
        std::vector<TokenPlace> p;
        for (int i = 0; i < n; ++i) p.push_back({seq, next[seq]++});
        return p;
    };
    auto cat = [](std::vector<TokenPlace> a, const std::vector<TokenPlace>& c) {
        a.insert(a.end(), c.begin(), c.end());
        return a;
    };
    std::vector<std::vector<TokenPlace>> batches;
    batches.push_back(rows_of(0, 10));  // prefill, one sequence
    {
        std::vector<TokenPlace> mixed = rows_of(1, 2);  // decode rows of all three, interleaved
        mixed = cat(mixed, rows_of(0, 1));
        mixed = cat(mixed, rows_of(2, 1));
        mixed = cat(mixed, rows_of(1, 1));
        mixed = cat(mixed, rows_of(0, 1));
        batches.push_back(mixed);
    }
    batches.push_back(rows_of(2, 1));
    {
        std::vector<TokenPlace> mixed = rows_of(0, 1);  // prefill, three sequences interleaved
        for (int i = 0; i < 10; ++i) {
            mixed = cat(mixed, rows_of(2, 1));
            if (i % 3 == 1) mixed = cat(mixed, rows_of(1, 1));
        }
        batches.push_back(mixed);
    }
    next[0] = 0;  // sequence 0 starts over inside a decode batch
    batches.push_back(cat(rows_of(0, 2), rows_of(1, 1)));
    batches.push_back(cat(rows_of(0, 19), rows_of(1, 1)));
    batches.push_back(rows_of(2, 8));  // a full decode batch of one sequence

    std::mt19937 rng(7);
    int batch_no = 0;
    for (const std::vector<TokenPlace>& places : batches) {
        const int n = static_cast<int>(places.size());
        ASSERT_LE(n, T);
        const std::string what =
            "batch " + std::to_string(batch_no++) + " of " + std::to_string(n) + " rows";
        b.set_batch(places);
        const std::vector<float> x = testing::random_floats(n * C, rng(), 1.0f);
        std::vector<float> conv[2], out[2];
        for (int i = 0; i < 2; ++i) {
            Ops& ops = i == 0 ? *b.cpu : *b.gpu;
            upload(ops, buf[i].x.first_rows(n), x);
            ops.short_conv(0, buf[i].x.first_rows(n), buf[i].conv.first_rows(n));
            conv[i] = download(ops, buf[i].conv.first_rows(n));
        }
        ASSERT_LE(max_rel_diff(conv[1], conv[0]), 1e-6) << "short_conv, " << what;
        // The delta rule on the same inputs: the CPU's convolution, its q and k L2-normed, a
        // decay and a write strength.
        std::vector<float> g = testing::random_floats(n * Hv, rng(), 1.0f), beta(n * Hv);
        for (float& v : g) v = -0.3f * std::fabs(v);
        const std::vector<float> braw = testing::random_floats(n * Hv, rng(), 2.0f);
        for (size_t i = 0; i < beta.size(); ++i) beta[i] = 1.0f / (1.0f + std::exp(-braw[i]));
        for (int i = 0; i < 2; ++i) {
            Ops& ops = i == 0 ? *b.cpu : *b.gpu;
            const Act cv = buf[i].conv.first_rows(n);
            upload(ops, cv, conv[0]);
            const Act q{cv.data, n, Kw, C}, k{cv.data + Kw, n, Kw, C},
                v{cv.data + 2 * Kw, n, Vw, C};
            ops.l2_norm_heads(q, d.head_dim, 1e-6f);
            ops.l2_norm_heads(k, d.head_dim, 1e-6f);
            upload(ops, buf[i].g.first_rows(n), g);
            upload(ops, buf[i].beta.first_rows(n), beta);
            if (i == 1)
                upload(ops, cv, download(*b.cpu, buf[0].conv.first_rows(n)));  // the CPU's norms
            ops.delta_net(0, q, k, v, buf[i].g.first_rows(n), buf[i].beta.first_rows(n),
                          buf[i].out.first_rows(n));
            out[i] = download(ops, buf[i].out.first_rows(n));
        }
        ASSERT_LE(max_rel_diff(out[1], out[0]), 2e-5) << "delta_net, " << what;
    }

    // The states of sequence 0 (at position 21): the GPU saves the KV cache first (keys, then
    // values of layer 1), then layer 0's conv and delta-rule states; the CPU layer by layer.
    ASSERT_EQ(next[0], 21);
    const size_t bytes = b.cpu->sequence_state_bytes(21);
    ASSERT_EQ(b.gpu->sequence_state_bytes(21), bytes);
    const size_t state_bytes = sizeof(float) * ((d.conv_kernel - 1) * C + Vw * d.head_dim);
    ASSERT_LT(state_bytes, bytes);
    std::vector<uint8_t> saved_cpu(bytes), saved_gpu(bytes);
    b.cpu->save_sequence(0, 21, saved_cpu.data());
    b.gpu->save_sequence(0, 21, saved_gpu.data());
    auto floats = [](const uint8_t* p, size_t n) {
        std::vector<float> f(n / sizeof(float));
        std::memcpy(f.data(), p, n);
        return f;
    };
    EXPECT_LE(max_rel_diff(floats(saved_gpu.data() + bytes - state_bytes, state_bytes),
                           floats(saved_cpu.data(), state_bytes)),
              2e-5)
        << "saved states";
    EXPECT_THROW(b.gpu->save_sequence(0, 20, saved_gpu.data()), Error);  // its state is at 21
    // The CPU's states into sequence 1 of both; one more decode batch there.
    std::vector<uint8_t> for_gpu(bytes);
    std::memcpy(for_gpu.data(), saved_cpu.data() + state_bytes, bytes - state_bytes);
    std::memcpy(for_gpu.data() + bytes - state_bytes, saved_cpu.data(), state_bytes);
    b.cpu->load_sequence(1, 21, saved_cpu.data());
    b.gpu->load_sequence(1, 21, for_gpu.data());
    // A batch at the wrong position is refused before anything changes.
    EXPECT_THROW(b.gpu->set_batch(std::vector<int32_t>(1, 0), std::vector<TokenPlace>{{1, 23}}, {}),
                 Error);
    const std::vector<TokenPlace> places = {{1, 21}, {1, 22}, {2, next[2]}};
    b.set_batch(places);
    const int n = static_cast<int>(places.size());
    const std::vector<float> x = testing::random_floats(n * C, 99, 1.0f);
    std::vector<float> conv[2];
    for (int i = 0; i < 2; ++i) {
        Ops& ops = i == 0 ? *b.cpu : *b.gpu;
        upload(ops, buf[i].x.first_rows(n), x);
        ops.short_conv(0, buf[i].x.first_rows(n), buf[i].conv.first_rows(n));
        conv[i] = download(ops, buf[i].conv.first_rows(n));
    }
    EXPECT_LE(max_rel_diff(conv[1], conv[0]), 1e-6) << "short_conv after a load";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuQwen35DeltaNet,
                         ::testing::Values(DeltaShape{32, 2, 4, 4}, DeltaShape{128, 1, 2, 3},
                                           DeltaShape{16, 2, 2, 2}, DeltaShape{64, 2, 4, 1},
                                           DeltaShape{256, 1, 1, 8}),
                         [](const ::testing::TestParamInfo<DeltaShape>& info) {
                             std::ostringstream os;
                             os << info.param;
                             return os.str();
                         });

// Interleaved multimodal rope (qwen3.5's sections over text) with partial rotation, alone and
// with the per-head norm: the CPU's angles.
TEST(GpuQwen35Rope, InterleavedSectionsMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    struct Case {
        int n_dims, head_dim;
        int sections[4];
    };
    for (const Case& c : {Case{64, 256, {11, 11, 10, 0}}, Case{16, 64, {1, 1, 1, 1}},
                          Case{32, 64, {5, 5, 6, 0}}, Case{64, 64, {2, 3, 4, 5}}}) {
        RopeParams p;
        p.type = RopeType::kNeox;
        p.n_dims = c.n_dims;
        p.freq_base = 10000000.0f;
        p.imrope = true;
        std::copy(std::begin(c.sections), std::end(c.sections), p.sections);
        const int n_heads = 3, rows = 4;
        const int64_t cols = int64_t{n_heads} * c.head_dim;
        const std::vector<TokenPlace> places = {{0, 0}, {0, 1}, {1, 333}, {2, 40000}};
        const std::vector<float> x = testing::random_floats(rows * cols, 61, 2.0f);
        std::vector<float> ref = x;
        Rope rope(p);
        std::vector<float> cache(p.n_dims + 2);
        for (int t = 0; t < rows; ++t)
            rope.apply(ref.data() + t * cols, n_heads, c.head_dim, places[t].pos, cache.data());
        const cuda::RopeTable table = cuda::make_rope_table(p);
        ASSERT_TRUE(table.imrope);
        DeviceArray<float> dx(x), factor(table.factor), ramp(table.ramp);
        DeviceArray<TokenPlace> dp(places);
        cuda::Stream stream;
        cuda::rope({dx.get(), rows, cols, cols}, n_heads, c.head_dim, dp.get(), table, factor.get(),
                   ramp.get(), stream.get());
        const std::vector<float> got = dx.download();
        double worst = 0.0;
        for (size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::fabs(double(got[i]) - ref[i]));
        EXPECT_LE(worst, 2e-6) << "sections " << c.sections[0] << "," << c.sections[1] << ","
                               << c.sections[2];
        // A head's unrotated tail is left as it was.
        const size_t last = 2 * cols + c.head_dim - 1;
        if (c.n_dims < c.head_dim) {
            EXPECT_EQ(got[last], x[last]);
        }
        EXPECT_NE(got[2 * cols], x[2 * cols]);  // the first pair turns (a temporal sector)
        // With the norm first (norm_rope, as norm_rope_store's heads): rms_norm_heads then rope.
        std::vector<float> normed = x;
        for (int64_t h = 0; h < rows * n_heads; ++h)
            rms_norm(normed.data() + h * c.head_dim, nullptr, c.head_dim, 1e-6f,
                     normed.data() + h * c.head_dim);
        for (int t = 0; t < rows; ++t)
            rope.apply(normed.data() + t * cols, n_heads, c.head_dim, places[t].pos, cache.data());
        DeviceArray<float> dn(x);
        cuda::norm_rope({dn.get(), rows, cols, cols}, n_heads, c.head_dim, nullptr, 1e-6f, dp.get(),
                        table, factor.get(), ramp.get(), stream.get());
        const std::vector<float> got_n = dn.download();
        worst = 0.0;
        for (size_t i = 0; i < got_n.size(); ++i)
            worst = std::max(worst, std::fabs(double(got_n[i]) - normed[i]));
        EXPECT_LE(worst, 2e-5) << "norm_rope, sections " << c.sections[0];
    }
}

// ---------------------------------------------------------------- whole models

struct Qwen35Case {
    std::string name;
    std::string arch;
    GgmlType attn, experts;
    bool sections =
        false;  // Qwen3.5's rope sections over whole heads (else a quarter rotated, 1,1,1,1)
};

std::ostream& operator<<(std::ostream& os, const Qwen35Case& c) {
    return os << c.name;
}

SynthSpec spec_of(const Qwen35Case& c) {
    SynthSpec s;
    s.arch = c.arch;
    s.n_layer = 4;
    s.full_attn_interval = 2;  // layers 1 and 3 attend
    s.n_embd = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.n_ff_exp = 256;
    s.n_ff_shexp = 256;
    s.n_ff = 512;
    s.n_vocab = 600;
    s.ssm_state = 32;
    s.ssm_k_heads = 2;
    s.ssm_v_heads = 4;
    s.conv_kernel = 4;
    if (c.sections) {
        s.rope_dims = 64;
        s.rope_sections = {11, 11, 10, 0};
    }
    s.attn_type = s.ffn_type = s.embd_type = s.out_type = c.attn;
    s.exp_gate_type = s.exp_up_type = s.exp_down_type = c.experts;
    s.fast_random = false;
    return s;
}

bool strict(const Model& model, const Qwen35Case& c) {
    return !model.config().is_moe() && c.attn == GgmlType::kF32;
}

std::string model_file(const Qwen35Case& c, const testing::TempDir& dir) {
    return dir.file(c.name + ".gguf");
}

// Strict models as the conformance tests judge them; the others (routed experts, rounded
// activations, whose near-ties the recurrent state carries on) by how far the CPU's own two
// kernel sets lie apart on the same model and tokens.
void judge(const Model& model, const Qwen35Case& c, const LogitComparison& cmp,
           const std::string& what, const testing::TempDir& dir,
           const std::vector<int32_t>& tokens) {
    if (strict(model, c)) {
        expect_conformant(cmp, what);
        return;
    }
    const std::vector<float> cpu = all_logits(model, tokens, Device::kCpu);
    const std::vector<float> reference =
        testing::reference_kernel_logits(model_file(c, dir), tokens);
    testing::expect_within_cpu_spread(cmp, compare_logits(cpu, reference, model.config().n_vocab),
                                      what);
}

class GpuQwen35Model : public ::testing::TestWithParam<Qwen35Case> {};

// 300 tokens teacher-forced in one batch, in batches of 16 (prefill kernels, the state carried
// between batches), 5 and 1 (decode graphs).
TEST_P(GpuQwen35Model, TeacherForcedLogitsMatchTheCpu) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Qwen35Case& c = GetParam();
    auto model = Model::load(testing::write_model(spec_of(c), model_file(c, dir)));
    const int V = model->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(300, V, 5);
    const std::vector<float> cpu = all_logits(*model, tokens, Device::kCpu);
    for (const int batch : {300, 16, 5, 1}) {
        const std::vector<float> gpu =
            all_logits(*model, tokens, Device::kCuda, KvType::kF32, {}, batch);
        judge(*model, c, compare_logits(cpu, gpu, V),
              c.name + " gpu vs cpu, batches of " + std::to_string(batch), dir, tokens);
    }
}

// Token by token (decode graphs replayed, the state updated in place) against the whole prompt at
// once on the GPU, and the argmax on the GPU.
TEST_P(GpuQwen35Model, DecodeStepsMatchPrefill) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Qwen35Case& c = GetParam();
    auto model = Model::load(testing::write_model(spec_of(c), model_file(c, dir)));
    const int V = model->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(260, V, 6);
    const std::vector<float> prefill = all_logits(*model, tokens, Device::kCuda);
    const std::vector<float> decode = testing::decode_logits(*model, tokens, KvType::kF32, 272);
    judge(*model, c, compare_logits(prefill, decode, V), c.name + " decode vs prefill", dir,
          tokens);
}

// Three sequences fed together in batches that interleave them (decode batches whose graphs are
// replayed with other mixes of sequences, prefill chunks of several sequences), one of them
// started over at position 0 with another prompt: each sequence's logits as when fed alone.
TEST_P(GpuQwen35Model, InterleavedSequencesMatchEachAlone) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    const Qwen35Case& c = GetParam();
    auto model = Model::load(testing::write_model(spec_of(c), model_file(c, dir)));
    const int V = model->config().n_vocab;
    const std::vector<std::vector<int32_t>> prompts = {
        testing::random_tokens(90, V, 11), testing::random_tokens(70, V, 12),
        testing::random_tokens(50, V, 13), testing::random_tokens(60, V, 14)};
    // The sequence slot of each prompt: the fourth takes slot 0 over once the first is done.
    const int slot_of[4] = {0, 1, 2, 0};
    BackendOptions o;
    o.device = Device::kCuda;
    o.n_seq = 3;
    o.n_ctx = 96;
    o.max_batch = 24;
    o.kv_type = KvType::kF32;
    const std::unique_ptr<Ops> backend = make_backend(*model, pool(), o);
    Decoder decoder(*model, *backend, o.max_batch);
    std::vector<std::vector<float>> got(prompts.size());
    size_t done[4] = {0, 0, 0, 0};
    std::mt19937 rng(21);
    // Rounds: each live prompt puts its next few tokens in the batch, the prompts' rows merged
    // in turn (each one's in order); batches of up to 8 rows (decode graphs, replayed with other
    // mixes) and of more (prefill). The fourth prompt starts after the first is done.
    for (int round = 0; round < 400; ++round) {
        const bool first_done = done[0] == prompts[0].size();
        const int budget = round % 3 == 0 ? 24 : 1 + static_cast<int>(rng() % 8);
        std::vector<std::vector<int>> rows(prompts.size());  // per prompt: its token indices
        int taken = 0;
        for (int p = 0; p < 4 && taken < budget; ++p) {
            if (p == 3 && !first_done) continue;
            const int take = std::min<int>({budget - taken, 1 + static_cast<int>(rng() % 6),
                                            static_cast<int>(prompts[p].size() - done[p])});
            for (int i = 0; i < take; ++i) rows[p].push_back(static_cast<int>(done[p]++));
            taken += take;
        }
        if (taken == 0) break;
        std::vector<int32_t> tokens;
        std::vector<TokenPlace> places;
        std::vector<int> owner;
        for (size_t i = 0; tokens.size() < static_cast<size_t>(taken); ++i) {
            for (int p = 0; p < 4; ++p) {
                if (i >= rows[p].size()) continue;
                tokens.push_back(prompts[p][rows[p][i]]);
                places.push_back({slot_of[p], rows[p][i]});
                owner.push_back(p);
            }
        }
        std::vector<uint8_t> want(tokens.size(), 1);
        std::vector<float> logits(tokens.size() * static_cast<size_t>(V));
        decoder.eval(tokens, places, want, logits.data());
        for (size_t i = 0; i < tokens.size(); ++i)
            got[owner[i]].insert(got[owner[i]].end(), logits.begin() + i * V,
                                 logits.begin() + (i + 1) * V);
    }
    for (size_t p = 0; p < prompts.size(); ++p) {
        ASSERT_EQ(done[p], prompts[p].size()) << "prompt " << p;
        const std::vector<float> alone =
            all_logits(*model, prompts[p], Device::kCuda, KvType::kF32, {}, 8);
        judge(*model, c, compare_logits(alone, got[p], V),
              c.name + " prompt " + std::to_string(p) + " interleaved vs alone", dir, prompts[p]);
    }
}

const std::vector<Qwen35Case>& cases() {
    using T = GgmlType;
    static const std::vector<Qwen35Case> list = {
        {"qwen35_f32", "qwen35", T::kF32, T::kF32},
        {"qwen35_q8_0_sections", "qwen35", T::kQ8_0, T::kQ8_0, true},
        {"qwen35moe_f32", "qwen35moe", T::kF32, T::kF32},
        {"qwen35moe_q8_0_q4_K", "qwen35moe", T::kQ8_0, T::kQ4_K},
        {"qwen35moe_bf16_mxfp4_sections", "qwen35moe", T::kBF16, T::kMXFP4, true},
    };
    return list;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuQwen35Model, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Qwen35Case>& info) {
                             return info.param.name;
                         });

// ---------------------------------------------------------------- expert strategies

const Qwen35Case kMoe{"qwen35moe_strategies", "qwen35moe", GgmlType::kQ8_0, GgmlType::kQ4_K};

// The shared expert and its gate beside experts computed elsewhere: prompts of 70 tokens in one
// batch stream the host layers' experts (the resident kernels on the same bytes: the same
// logits), in batches of 16 the CPU executor computes them, in batches of 8 the slots of offload
// (the same logits) and hybrid hold them.
TEST(GpuQwen35Strategies, PrefillLogitsMatchResidentExperts) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    auto model = Model::load(testing::write_model(spec_of(kMoe), dir.file("moe.gguf")));
    const int V = model->config().n_vocab;
    const std::vector<int32_t> tokens = testing::random_tokens(70, V, 15);
    const std::vector<float> fused =
        all_logits(*model, tokens, Device::kCuda, KvType::kF32, strategy(MoeStrategy::kFused), 70);
    const std::vector<float> fused8 =
        all_logits(*model, tokens, Device::kCuda, KvType::kF32, strategy(MoeStrategy::kFused), 8);
    for (const auto& [name, gpu] : {std::pair{"cpu", strategy(MoeStrategy::kCpu)},
                                    std::pair{"cpu layers 1", strategy(MoeStrategy::kAuto, 1)}}) {
        for (int batch : {70, 16}) {
            const LogitComparison cmp = compare_logits(
                fused, all_logits(*model, tokens, Device::kCuda, KvType::kF32, gpu, batch), V);
            expect_conformant_routed(cmp, std::string("qwen35moe ") + name +
                                              (batch == 70 ? " streamed" : " cpu executor") +
                                              " vs fused");
            if (batch == 70) {
                EXPECT_EQ(cmp.worst_abs, 0.0) << name;
            }
        }
    }
    GpuOptions evicting = strategy(MoeStrategy::kOffload);
    evicting.moe_slots = model->config().n_expert;  // one layer's worth: every layer evicts
    for (const GpuOptions& gpu : {strategy(MoeStrategy::kOffload), evicting}) {
        for (int batch : {70, 8}) {
            const LogitComparison cmp = compare_logits(
                batch == 8 ? fused8 : fused,
                all_logits(*model, tokens, Device::kCuda, KvType::kF32, gpu, batch), V);
            EXPECT_EQ(cmp.worst_abs, 0.0)
                << "offload, " << gpu.moe_slots << " slots, batches of " << batch;
        }
    }
    GpuOptions one_slot = strategy(MoeStrategy::kHybrid);
    one_slot.moe_slots = 1;
    for (const GpuOptions& gpu : {strategy(MoeStrategy::kHybrid), one_slot}) {
        const std::string what = "qwen35moe hybrid, " + std::to_string(gpu.moe_slots) + " slots";
        expect_conformant_routed(
            compare_logits(fused8, all_logits(*model, tokens, Device::kCuda, KvType::kF32, gpu, 8),
                           V),
            what + ", batches of 8 vs fused");
        EXPECT_EQ(compare_logits(
                      fused, all_logits(*model, tokens, Device::kCuda, KvType::kF32, gpu, 70), V)
                      .worst_abs,
                  0.0)
            << what << ", streamed";
    }
}

// Greedy decoding of 128 tokens under each strategy (decode graphs with the delta-net's state
// updates and the CPU executor's host functions): fused's tokens, except where fused's own top
// two tie within the strategies' disagreement.
TEST(GpuQwen35Strategies, GreedyTokensMatchFused) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    auto model = Model::load(testing::write_model(spec_of(kMoe), dir.file("moe.gguf")));
    testing::expect_strategies_decode_as_fused(*model, "qwen35moe", 128, 120, 2, 160);
}

// ---------------------------------------------------------------- sequence copies

// The prefix cache's copies on the GPU: a sequence's KV and recurrent states saved to host memory
// (as many bytes as the CPU's) and loaded into another slot continue exactly as the original,
// token after token; the bytes saved from the loaded slot are the bytes loaded; a state is saved
// only at its position; another prompt's state gives other logits.
TEST(GpuQwen35SequenceCopy, ALoadedSequenceContinuesAsTheSavedOne) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    for (const Qwen35Case& c : {cases()[0], cases()[3]}) {
        auto model = Model::load(testing::write_model(spec_of(c), model_file(c, dir)));
        const int V = model->config().n_vocab;
        for (const KvType kv : {KvType::kF32, KvType::kF16}) {
            const std::string what = c.name + (kv == KvType::kF16 ? ", f16" : ", f32");
            BackendOptions o;
            o.device = Device::kCuda;
            o.n_seq = 3;
            o.n_ctx = 96;
            o.max_batch = 16;
            o.kv_type = kv;
            const std::unique_ptr<Ops> backend = make_backend(*model, pool(), o);
            Decoder decoder(*model, *backend, o.max_batch);
            const auto feed = [&](int seq, std::span<const int32_t> tokens, int pos0) {
                return testing::feed_sequence(decoder, seq, tokens, pos0, o.max_batch, V);
            };
            const std::vector<int32_t> prompt = testing::random_tokens(60, V, 12),
                                       other = testing::random_tokens(53, V, 13);
            const int n = 53;
            feed(0, std::span<const int32_t>(prompt).first(n), 0);
            feed(1, other, 0);
            const size_t bytes = backend->sequence_state_bytes(n);
            o.device = Device::kCpu;
            EXPECT_EQ(bytes, make_backend(*model, pool(), o)->sequence_state_bytes(n)) << what;
            std::vector<uint8_t> saved(bytes), again(bytes);
            EXPECT_THROW(backend->save_sequence(0, n - 1, saved.data()), Error) << what;
            backend->save_sequence(0, n, saved.data());
            backend->load_sequence(2, n, saved.data());
            backend->save_sequence(2, n, again.data());
            EXPECT_EQ(saved, again) << what;
            for (int i = n; i < static_cast<int>(prompt.size()); ++i) {
                const std::span<const int32_t> next(&prompt[i], 1);
                const std::vector<float> original = feed(0, next, i), loaded = feed(2, next, i),
                                         unrelated = feed(1, next, i);
                ASSERT_EQ(original, loaded) << what << ", position " << i;
                EXPECT_NE(original, unrelated) << what << ", position " << i;
            }
            // A loaded slot starts over like any other.
            const std::vector<float> fresh = feed(2, std::span<const int32_t>(prompt).first(5), 0),
                                     fresh0 = feed(0, std::span<const int32_t>(prompt).first(5), 0);
            EXPECT_EQ(fresh, fresh0) << what;
        }
    }
}

// The server's prefix cache in host memory on the GPU: one slot, two conversations taking
// turns, each turn copying its conversation's states back from host memory and computing only
// its new tokens.
TEST(GpuQwen35Scheduler, PrefixCacheInHostMemoryKeepsTheConversations) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    auto model = Model::load(testing::write_model(spec_of(cases()[2]), dir.file("moe.gguf")));
    const int V = model->config().n_vocab;
    SchedulerOptions o;
    o.n_slots = 1;
    o.n_ctx = 256;
    o.max_batch = 16;
    o.kv_type = KvType::kF32;
    o.device = Device::kCuda;
    o.cache_bytes = size_t{64} << 20;
    Scheduler s(*model, pool(), o);
    auto generate = [&](const std::vector<int32_t>& prompt, int max_tokens,
                        std::vector<int32_t>* out) {
        auto sink = std::make_shared<testing::CollectingSink>();
        GenerationParams p;
        p.prompt = prompt;
        p.sampling.temperature = 0.0f;
        p.max_tokens = max_tokens;
        p.ignore_eos = true;
        EXPECT_EQ(s.submit(std::make_shared<Request>(std::move(p), sink)), SubmitStatus::kAccepted);
        const GenerationResult r = sink->wait();
        *out = sink->tokens();
        return r;
    };
    auto concat = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    const std::vector<int32_t> a = testing::random_tokens(40, V, 31),
                               b = testing::random_tokens(35, V, 32),
                               turn = testing::random_tokens(9, V, 33);
    std::vector<int32_t> ra, rb, r3, r4;
    generate(a, 8, &ra);
    generate(b, 8, &rb);  // a goes to host memory
    const GenerationResult third = generate(concat(concat(a, ra), turn), 6, &r3);
    const GenerationResult fourth = generate(concat(concat(b, rb), turn), 6, &r4);
    EXPECT_EQ(third.cached_tokens, 40 + 8 - 1);
    EXPECT_EQ(fourth.cached_tokens, 35 + 8 - 1);
    const SchedulerStats st = s.stats();
    EXPECT_EQ(st.cache_saves, 3u);
    EXPECT_EQ(st.cache_loads, 2u);
    EXPECT_EQ(r3.size(), 6u);
    EXPECT_EQ(r4.size(), 6u);
}

}  // namespace
}  // namespace tandem
