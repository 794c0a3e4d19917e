// The operations a decoder's forward pass is written against. The CPU backend implements them
// over host memory; a GPU backend implements the same contract over device memory.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/weight_matrix.h"

namespace tandem {

// rows × cols activations in the backend's memory, rows `stride` floats apart.
struct Act {
    float* data = nullptr;
    int rows = 0;
    int64_t cols = 0;
    int64_t stride = 0;
    float* row(int r) const { return data + r * stride; }
    Act first_rows(int n) const { return {data, n, cols, stride}; }
};

// One matrix of a group that shares an input: out = in · Wᵀ.
struct MatmulTarget {
    const WeightMatrix* weight;
    Act out;
};

class Ops {
public:
    virtual ~Ops() = default;
    // out[t] = row tokens[t] of the embedding table, as f32.
    virtual void embed(const WeightMatrix& table, const int32_t* tokens, Act out) = 0;
    // out = rms_norm(x) · w, row by row.
    virtual void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) = 0;
    // In place, every head_dim slice of every row: x = rms_norm(x) · w.
    virtual void rms_norm_heads(Act x, int head_dim, const std::vector<float>& w, float eps) = 0;
    // Several matrices over the same input; the input is converted once per activation format.
    virtual void matmul(Act in, std::initializer_list<MatmulTarget> targets) = 0;
    virtual void add_bias(Act x, const std::vector<float>& bias) = 0;
    // Rotary embedding of n_heads heads per row, row t at places[t].pos.
    virtual void rope(Act x, int n_heads, int head_dim, const TokenPlace* places) = 0;
    virtual void store_kv(int layer, Act k, Act v, const TokenPlace* places) = 0;
    virtual void attention(int layer, Act q, const TokenPlace* places, Act out) = 0;
    // out = act(gate) · up.
    virtual void glu(GluKind kind, Act gate, Act up, Act out) = 0;
    // y += x.
    virtual void add(Act y, Act x) = 0;
    // The routed experts of an MoE layer: router, top-k routing, experts, weighted sum.
    virtual void moe(int layer, Act in, Act out) = 0;
    // out[i] = x[rows[i]].
    virtual void gather_rows(Act x, const std::vector<int>& rows, Act out) = 0;
};

}  // namespace tandem
