// The operations a decoder's forward pass is written against. The CPU backend implements them
// over host memory; the CUDA backend implements the same contract over device memory. Everything
// an operation reads or writes is the backend's: activations come from allocate(), weights from
// weights(), and the batch's token ids and places are handed over once by set_batch(), so that a
// GPU backend can record a whole forward pass once and replay it (CUDA graphs).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/weight_matrix.h"
#include "model/model_weights.h"

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

    // "cpu" or "cuda", for logs.
    virtual std::string name() const = 0;
    // The model's weights as this backend holds them: views into its memory.
    virtual const ModelWeights& weights() const = 0;
    // rows × cols floats in the backend's memory, kept as long as the backend.
    virtual Act allocate(int rows, int64_t cols) = 0;
    // The inputs of the next forward pass: token t at places[t]; logit_rows lists the batch rows
    // whose logits are wanted, in output order. Checks the places against the KV cache.
    virtual void set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                           std::span<const int32_t> logit_rows) = 0;
    // Runs `pass`, a forward pass over the batch of set_batch(). Passes with the same key issue
    // the same operations on the same buffers, so a backend may record the first and replay it.
    virtual void run(uint64_t key, const std::function<void()>& pass) {
        (void)key;
        pass();
    }
    // Copies x (x.rows × x.cols) to host memory, rows packed.
    virtual void read(Act x, float* host) = 0;
    // host[r] = the column of the largest value of row r of x (the lowest among equals): greedy
    // decoding without copying the logits out.
    virtual void argmax(Act x, int32_t* host) = 0;

    // out[t] = row tokens[t] of the embedding table, as f32.
    virtual void embed(const WeightMatrix& table, Act out) = 0;
    // out = rms_norm(x) · w, row by row.
    virtual void rms_norm(Act x, const WeightVector& w, float eps, Act out) = 0;
    // In place, every head_dim slice of every row: x = rms_norm(x) · w.
    virtual void rms_norm_heads(Act x, int head_dim, const WeightVector& w, float eps) = 0;
    // Several matrices over the same input; the input is converted once per activation format.
    virtual void matmul(Act in, std::initializer_list<MatmulTarget> targets) = 0;
    virtual void add_bias(Act x, const WeightVector& bias) = 0;
    // Rotary embedding of n_heads heads per row, row t at the position of token t.
    virtual void rope(Act x, int n_heads, int head_dim) = 0;
    // Stores row t of k and v at token t's place in the KV cache of `layer`.
    virtual void store_kv(int layer, Act k, Act v) = 0;
    // Causal attention of each token's queries over its sequence's cache up to its position.
    virtual void attention(int layer, Act q, Act out) = 0;
    // out = act(gate) · up.
    virtual void glu(GluKind kind, Act gate, Act up, Act out) = 0;
    // y += x.
    virtual void add(Act y, Act x) = 0;
    // The routed experts of an MoE layer: router, top-k routing, experts, weighted sum.
    virtual void moe(int layer, Act in, Act out) = 0;
    // out[i] = x[logit_rows[i]] for the logit rows of set_batch().
    virtual void gather_logit_rows(Act x, Act out) = 0;
};

}  // namespace tandem
