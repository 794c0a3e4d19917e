// Attention on the device: the KV cache in device memory (f16 or f32) and causal multi-head
// attention with grouped-query heads over it. Decode splits the context of each query into
// chunks of positions computed in parallel (flash-decoding: each chunk keeps its max, sum and
// weighted values; a second kernel combines them), so one decoded token spreads over the whole
// GPU however long its sequence. Prefill takes tiles of queries that share each tile of keys
// and values staged in shared memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cpu/attention.h"
#include "cpu/kv_cache.h"
#include "cuda/elementwise.h"

namespace tandem::cuda {

// Decode splits each query's positions evenly over a fixed number of blocks per head (what a
// replayed CUDA graph needs), all of which work at any length: 32, or more where a context of
// n_ctx would make chunks longer than 2048 positions (their scores live in shared memory).
inline int decode_chunks(int n_ctx) {
    constexpr int kChunks = 32, kMaxChunk = 2048;
    const int needed = (n_ctx + kMaxChunk - 1) / kMaxChunk;
    return needed > kChunks ? needed : kChunks;
}
constexpr int kMaxHeadDim = 256;  // head sizes (keys and values) the kernels take

// The cache of every layer and sequence slot: keys and values of position p of sequence s in
// layer l at ((l · n_seq + s) · n_ctx + p) · n_kv · head_dim (keys head_dim_k, values head_dim_v).
struct DeviceKv {
    void* k = nullptr;
    void* v = nullptr;
    KvShape shape;
    bool f16 = true;

    size_t bytes() const;
};

// Stores row t of k and v at places[t] (a device array) in `layer`.
void store_kv(const DeviceKv& kv, int layer, DeviceRows k, DeviceRows v, const TokenPlace* places,
              cudaStream_t stream);

// Scratch for the chunks' partial results: `capacity` (query head, chunk) pairs.
struct AttentionScratch {
    float* values = nullptr;  // [capacity][head_dim_v]
    float* stats = nullptr;   // [capacity][2]: max and sum
    int64_t capacity = 0;
};

// out[t][h] = softmax(q[t][h] · K · scale) · V over positions 0..places[t].pos of the token's
// sequence, K and V from kv head h / (n_head / n_kv). n_chunks chunks of `chunk` positions of
// every query are computed (those past the query's position cost a block that returns at once),
// or with chunk 0 each query's positions split evenly over its n_chunks blocks; either way the
// launch is the same for every position: what a replayed CUDA graph needs. Queries are
// processed in slices that fit the scratch, which must hold n_head · n_chunks pairs at least.
void attention(const DeviceKv& kv, int layer, DeviceRows q, const TokenPlace* places, int n_head,
               float scale, int chunk, int n_chunks, const AttentionScratch& scratch,
               DeviceRows out, cudaStream_t stream);

// The same for prefill batches, in tiles of queries that share each staged tile of keys and
// values (online softmax; no scratch, one launch). Any mix of sequences and positions.
void attention_tiled(const DeviceKv& kv, int layer, DeviceRows q, const TokenPlace* places,
                     int n_head, float scale, DeviceRows out, cudaStream_t stream);
// Its shared memory per block.
size_t tiled_attention_shared_bytes(int dk, int dv);

}  // namespace tandem::cuda
