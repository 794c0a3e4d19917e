// The MoE executor against an fp64 reference built from the dequantized expert rows (and their
// scales and biases): every weight type as gate/up and as down, mixed float and quantized
// pairs, fused gate_up tensors, NVFP4 second-level scales, T = 1, 3, 8 and 33 tokens, top-8 of
// 32 experts, measured as max |error| / max |reference|.
//
// Two references. Against exact fp64 the error is that of the activation formats the dot
// products take (as in llama.cpp): q8_0 inputs cost about 1.4e-2 here, q8_K intermediates (one
// scale per 256 heavy-tailed values) up to 2.4e-2, bf16 inputs 3e-3 — so those bounds are 2e-2
// for q8_0/q8_1 types, 2.5e-2 for q8_K types, 1e-3 for f16, 5e-3 for bf16. With the reference's
// inputs rounded through the same activation formats, only float rounding remains: 1e-7, or a
// few 1e-4 where that rounding flips one q8 value; bound 1e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cpu/moe_executor.h"
#include "formats/format_table.h"

namespace tandem {
namespace {

constexpr int kExperts = 32;
constexpr int kTopK = 8;
constexpr int64_t kEmbd = 256;
constexpr int64_t kFf = 256;

// One stacked expert tensor [n_expert][rows][cols] in a given type, with its dequantized copy.
struct ExpertTensor {
    const FormatTraits* format;
    int64_t rows = 0, cols = 0;
    std::vector<uint8_t> bytes;
    std::vector<float> values;  // dequantized, [n_expert][rows][cols]
    std::vector<float> scales;  // per expert (empty: none)
    std::vector<float> bias;    // [n_expert][rows] (empty: none)

    ExpertTensor(GgmlType type, int64_t rows_, int64_t cols_, uint64_t seed, bool with_scales, bool with_bias)
        : format(&format_of(type)), rows(rows_), cols(cols_) {
        const size_t rb = row_bytes(*format, cols);
        bytes.resize(rb * rows * kExperts);
        values.resize(static_cast<size_t>(rows) * cols * kExperts);
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
        std::vector<float> row(cols);
        for (int64_t r = 0; r < rows * kExperts; ++r) {
            uint8_t* dst = bytes.data() + r * rb;
            if (format->quantize_row != nullptr) {
                for (float& v : row) v = normal(rng);
                format->quantize_row(row.data(), dst, cols);
            } else {
                format->random_blocks(dst, cols / format->block_size, rng(), 1.0f / std::sqrt(static_cast<float>(cols)));
            }
            format->dequantize_row(dst, values.data() + r * cols, cols);
        }
        std::uniform_real_distribution<float> u(0.5f, 2.0f);
        if (with_scales) {
            for (int e = 0; e < kExperts; ++e) scales.push_back(u(rng) * 1e-2f);
        }
        if (with_bias) {
            for (int64_t i = 0; i < rows * kExperts; ++i) bias.push_back(normal(rng));
        }
    }

    ExpertMatrix view(int64_t first_row = 0, int64_t n_rows = -1) const {
        ExpertMatrix m;
        const size_t rb = row_bytes(*format, cols);
        m.matrix = {format, bytes.data() + first_row * rb, cols, n_rows < 0 ? rows : n_rows, rb, 1.0f};
        m.expert_stride = rb * rows;
        m.scales = scales.empty() ? nullptr : scales.data();
        m.bias = bias.empty() ? nullptr : bias.data() + first_row;
        m.bias_stride = rows;
        return m;
    }
    // Dequantized weight, times the expert's scale.
    double weight(int e, int64_t r, int64_t c) const {
        return values[(static_cast<size_t>(e) * rows + r) * cols + c] * (scales.empty() ? 1.0 : scales[e]);
    }
    double bias_of(int e, int64_t r) const { return bias.empty() ? 0.0 : bias[e * rows + r]; }
};

struct Experts {
    ExpertTensor gate_up;  // fused: [2F][E]; separate: gate only
    ExpertTensor up;       // unused when fused
    ExpertTensor down;
    bool fused;
    MoeLayer layer() const {
        MoeLayer l;
        l.n_expert = kExperts;
        l.n_embd = kEmbd;
        l.n_ff = kFf;
        if (fused) {
            l.gate = gate_up.view(0, kFf);
            l.up = gate_up.view(kFf, kFf);
            l.up.bias_stride = l.gate.bias_stride = 2 * kFf;
        } else {
            l.gate = gate_up.view();
            l.up = up.view();
        }
        l.down = down.view();
        return l;
    }
};

Experts make_experts(GgmlType gate_up_type, GgmlType down_type, bool fused, bool scales, bool bias) {
    return Experts{ExpertTensor(gate_up_type, fused ? 2 * kFf : kFf, kEmbd, 1, scales && !fused, bias),
                   ExpertTensor(gate_up_type, kFf, kEmbd, 2, scales, bias),
                   ExpertTensor(down_type, kEmbd, kFf, 3, scales, bias), fused};
}

// x rounded through an activation format and back (what the dot product actually sees).
std::vector<float> through_format(const float* x, int64_t n, GgmlType format) {
    const FormatTraits& f = format_of(format);
    std::vector<uint8_t> q(row_bytes(f, n));
    std::vector<float> out(n);
    f.quantize_row(x, q.data(), n);
    f.dequantize_row(q.data(), out.data(), n);
    return out;
}

// out[t] = Σ_j w_tj · (down_e · silu(gate_e · x_t) ⊙ (up_e · x_t)), in double. With
// `quantized_inputs`, every matmul input is first rounded through its dot product's activation
// format, as the executor (and llama.cpp) does, so only float rounding separates the two.
std::vector<double> reference(const Experts& ex, const std::vector<float>& x, const std::vector<Route>& routes, int T,
                              bool quantized_inputs = false) {
    std::vector<double> out(static_cast<size_t>(T) * kEmbd, 0.0);
    std::vector<double> act(kFf);
    const ExpertTensor& up = ex.fused ? ex.gate_up : ex.up;
    const int64_t up_off = ex.fused ? kFf : 0;
    const GgmlType gate_in = ex.gate_up.format->dot_type, up_in = up.format->dot_type;
    const GgmlType down_in = ex.down.format->dot_type;
    std::vector<float> act_f(kFf);
    for (int t = 0; t < T; ++t) {
        const std::vector<float> xg = quantized_inputs ? through_format(x.data() + t * kEmbd, kEmbd, gate_in)
                                                       : std::vector<float>(x.begin() + t * kEmbd, x.begin() + (t + 1) * kEmbd);
        const std::vector<float> xu = quantized_inputs ? through_format(x.data() + t * kEmbd, kEmbd, up_in) : xg;
        for (int j = 0; j < kTopK; ++j) {
            const Route r = routes[t * kTopK + j];
            if (r.expert < 0) continue;
            for (int64_t f = 0; f < kFf; ++f) {
                double g = ex.gate_up.bias_of(r.expert, f), u = up.bias_of(r.expert, up_off + f);
                double gs = 0, us = 0;
                for (int64_t c = 0; c < kEmbd; ++c) {
                    gs += ex.gate_up.weight(r.expert, f, c) * xg[c];
                    us += up.weight(r.expert, up_off + f, c) * xu[c];
                }
                g += gs;
                u += us;
                act[f] = g / (1.0 + std::exp(-g)) * u;
            }
            if (quantized_inputs) {
                for (int64_t f = 0; f < kFf; ++f) act_f[f] = static_cast<float>(act[f]);
                std::vector<float> rounded = through_format(act_f.data(), kFf, down_in);
                for (int64_t f = 0; f < kFf; ++f) act[f] = rounded[f];
            }
            for (int64_t h = 0; h < kEmbd; ++h) {
                double y = ex.down.bias_of(r.expert, h);
                for (int64_t f = 0; f < kFf; ++f) y += ex.down.weight(r.expert, h, f) * act[f];
                out[t * kEmbd + h] += r.weight * y;
            }
        }
    }
    return out;
}

std::vector<Route> random_routes(int T, uint64_t seed, double skip_fraction = 0.0) {
    std::mt19937_64 rng(seed);
    std::vector<Route> routes(static_cast<size_t>(T) * kTopK);
    std::uniform_real_distribution<float> w(0.05f, 1.0f), skip(0.0f, 1.0f);
    for (int t = 0; t < T; ++t) {
        std::vector<int> ids(kExperts);
        for (int e = 0; e < kExperts; ++e) ids[e] = e;
        std::shuffle(ids.begin(), ids.end(), rng);
        for (int j = 0; j < kTopK; ++j) routes[t * kTopK + j] = {skip(rng) < skip_fraction ? -1 : ids[j], w(rng)};
    }
    return routes;
}

ThreadPool& pool() {
    static ThreadPool p(2);
    return p;
}

struct Errors {
    double exact = 0.0;            // vs the fp64 reference
    double quantized_inputs = 0.0;  // vs the reference with inputs rounded through the formats
};

// Worst max|error| / max|reference| over T = 1, 3, 8, 33, against both references.
Errors relative_errors(const Experts& ex, double skip_fraction = 0.0) {
    MoeExecutor executor({ex.layer()}, 33, kTopK, pool());
    Errors worst;
    for (int T : {1, 3, 8, 33}) {
        std::mt19937_64 rng(T);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(T) * kEmbd);
        for (float& v : x) v = normal(rng);
        std::vector<Route> routes = random_routes(T, 100 + T, skip_fraction);
        executor.submit(0, x.data(), T, routes.data());
        const float* out = executor.wait();
        for (bool quantized : {false, true}) {
            std::vector<double> ref = reference(ex, x, routes, T, quantized);
            double max_err = 0.0, max_ref = 0.0;
            for (size_t i = 0; i < ref.size(); ++i) {
                max_err = std::max(max_err, std::fabs(out[i] - ref[i]));
                max_ref = std::max(max_ref, std::fabs(ref[i]));
            }
            double& w = quantized ? worst.quantized_inputs : worst.exact;
            w = std::max(w, max_ref > 0 ? max_err / max_ref : max_err);
        }
    }
    return worst;
}

double worst_relative_error(const Experts& ex, double skip_fraction = 0.0) {
    return relative_errors(ex, skip_fraction).exact;
}

std::vector<GgmlType> weight_types() {
    std::vector<GgmlType> types;
    for (const FormatTraits& f : all_formats()) {
        if ((f.kind == FormatKind::kFloat || f.kind == FormatKind::kQuantized) && f.ref_dot != nullptr &&
            kFf % f.block_size == 0) {
            types.push_back(f.type);
        }
    }
    return types;
}

// Each type as gate/up (with q8_0 down) and as down (with q8_0 gate/up).
TEST(MoeExecutor, EveryTypeInEveryRole) {
    std::map<std::string, Errors> worst;
    for (GgmlType t : weight_types()) {
        for (bool as_down : {false, true}) {
            Experts ex = as_down ? make_experts(GgmlType::kQ8_0, t, false, false, false)
                                 : make_experts(t, GgmlType::kQ8_0, false, false, false);
            const Errors err = relative_errors(ex);
            const std::string name = std::string(format_of(t).name) + (as_down ? " as down" : " as gate/up");
            worst[name] = err;
            EXPECT_LE(err.exact, format_of(t).dot_type == GgmlType::kQ8_K ? 2.5e-2 : 2e-2) << name;
            // q4_1/q5_1 take q8_1, whose min term uses an fp16-rounded sum (ggml's layout), which
            // dequantized values cannot express: about 7e-3.
            const bool q8_1 = format_of(t).dot_type == GgmlType::kQ8_1 && !as_down;
            EXPECT_LE(err.quantized_inputs, q8_1 ? 1e-2 : 1e-3) << name;
        }
    }
    std::printf("  %-20s %-12s %s\n", "type, role", "vs fp64", "vs fp64 with quantized inputs");
    for (const auto& [name, err] : worst) {
        std::printf("  %-20s %-12.2e %.2e\n", name.c_str(), err.exact, err.quantized_inputs);
    }
}

// Float types with float partners: only float rounding and f16/bf16 activation conversion.
TEST(MoeExecutor, FloatTypesAgainstFp64) {
    for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
        const double err = worst_relative_error(make_experts(t, t, false, false, false));
        std::printf("  %-6s worst relative error %.2e\n", format_of(t).name.data(), err);
        const double bound = t == GgmlType::kF32 ? 1e-5 : t == GgmlType::kF16 ? 1e-3 : 5e-3;
        EXPECT_LE(err, bound) << format_of(t).name;
    }
}

TEST(MoeExecutor, MixedPairs) {
    struct Pair {
        GgmlType gate_up, down;
    };
    for (Pair p : {Pair{GgmlType::kIQ3_S, GgmlType::kQ4_K}, Pair{GgmlType::kF16, GgmlType::kQ8_0},
                   Pair{GgmlType::kQ4_K, GgmlType::kF32}, Pair{GgmlType::kBF16, GgmlType::kMXFP4},
                   Pair{GgmlType::kQ2_K, GgmlType::kQ6_K}}) {
        const double err = worst_relative_error(make_experts(p.gate_up, p.down, false, false, false));
        EXPECT_LE(err, 2e-2) << format_of(p.gate_up).name << "/" << format_of(p.down).name;
    }
}

TEST(MoeExecutor, FusedGateUpAndBiases) {
    EXPECT_LE(worst_relative_error(make_experts(GgmlType::kQ8_0, GgmlType::kQ4_K, true, false, false)), 2e-2);
    EXPECT_LE(worst_relative_error(make_experts(GgmlType::kF32, GgmlType::kF32, true, false, true)), 1e-5);
    EXPECT_LE(worst_relative_error(make_experts(GgmlType::kQ5_K, GgmlType::kQ8_0, false, false, true)), 2e-2);
}

// NVFP4 experts with per-expert second-level scales on gate, up and down.
TEST(MoeExecutor, Nvfp4WithScales) {
    const Errors errors = relative_errors(make_experts(GgmlType::kNVFP4, GgmlType::kNVFP4, false, true, false));
    const double err = errors.exact;
    std::printf("  nvfp4 with scales: worst relative error %.2e\n", err);
    EXPECT_LE(err, 2e-2);  // q8_0 inputs, as above
    const double exact = errors.quantized_inputs;
    std::printf("  nvfp4 with scales, quantized-input reference: %.2e\n", exact);
    EXPECT_LE(exact, 1e-3);
}

// Routes of -1 are skipped exactly: the output equals the reference without those routes, and a
// token with every route skipped gets zeros.
TEST(MoeExecutor, SkippedRoutes) {
    Experts ex = make_experts(GgmlType::kF32, GgmlType::kF32, false, false, false);
    EXPECT_LE(worst_relative_error(ex, 0.4), 1e-5);
    MoeExecutor executor({ex.layer()}, 4, kTopK, pool());
    std::vector<float> x(2 * kEmbd, 1.0f);
    std::vector<Route> routes(2 * kTopK, Route{-1, 1.0f});
    routes[kTopK] = {5, 0.5f};
    executor.submit(0, x.data(), 2, routes.data());
    const float* out = executor.wait();
    for (int64_t h = 0; h < kEmbd; ++h) ASSERT_EQ(out[h], 0.0f);
    std::vector<double> ref = reference(ex, x, routes, 2);
    for (int64_t h = 0; h < kEmbd; ++h) EXPECT_NEAR(out[kEmbd + h], ref[kEmbd + h], 1e-4);
}

TEST(MoeExecutor, ResultsDoNotDependOnThreads) {
    Experts ex = make_experts(GgmlType::kQ4_K, GgmlType::kQ6_K, false, false, false);
    std::vector<float> x(8 * kEmbd);
    std::mt19937_64 rng(9);
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(rng);
    std::vector<Route> routes = random_routes(8, 5);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
        ThreadPool p(threads);
        MoeExecutor executor({ex.layer()}, 8, kTopK, p);
        executor.submit(0, x.data(), 8, routes.data());
        const float* out = executor.wait();
        std::vector<float> got(out, out + 8 * kEmbd);
        if (first.empty()) {
            first = got;
        } else {
            EXPECT_EQ(got, first) << threads << " threads";
        }
    }
}

TEST(MoeExecutor, RefusesBadCalls) {
    Experts ex = make_experts(GgmlType::kF32, GgmlType::kF32, false, false, false);
    MoeExecutor executor({ex.layer()}, 4, kTopK, pool());
    std::vector<float> x(8 * kEmbd);
    std::vector<Route> routes(8 * kTopK, Route{40, 1.0f});
    EXPECT_THROW(executor.submit(0, x.data(), 1, routes.data()), Error);
    EXPECT_THROW(executor.submit(0, x.data(), 5, routes.data()), Error);
    EXPECT_THROW(executor.submit(1, x.data(), 1, routes.data()), Error);
    EXPECT_THROW(executor.wait(), Error);
}

}  // namespace
}  // namespace tandem
