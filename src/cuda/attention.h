// Attention on the device: the KV cache in device memory (f16 or f32) and causal multi-head
// attention with grouped-query heads over it. Decode splits the context of each query into
// chunks of positions computed in parallel (flash-decoding: each chunk keeps its max, sum and
// weighted values; the last chunk block to finish, or a second kernel, combines them), so one
// decoded token spreads over the whole GPU however long its sequence; with f16 caches of heads
// of 64 or 128 a block takes a chunk for all the query heads of a kv head (up to 16) on tensor
// cores, so each key and value is read once for them. Prefill takes tiles of queries that share each tile of keys
// and values staged in shared memory. Both take sliding windows (over a layer's ring of
// positions) and attention sinks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

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
// Head sizes of the kernels' common path (keys and values up to 256: every model but those
// below), instantiated with a thread's share of a value in registers for 256 dims.
constexpr int kMaxHeadDim = 256;
// The wide path, the same kernels instantiated for values of up to 512 dims (twice the output
// registers a thread, and more shared memory per prefill block) in attention_wide.cu: Gemma 4's
// global layers (512 / 512) and multi-head latent attention's 576-wide keys over 512-wide values
// (DeepSeek-V3's 512 + 64 latent). Keys are never held in registers, so only the shared memory
// bounds their width.
constexpr int kMaxWideKeyDim = 576;
constexpr int kMaxWideValueDim = 512;
// Whether the kernels take heads of dk keys and dv values (multiples of 8, within the limits).
bool attention_takes(int dk, int dv);

// One layer's cache: position p of sequence s in slot p mod `positions` (the whole context for
// full attention; a sliding layer's ring of kv_cache_positions(), as the CPU's KvCache), its keys
// at k + (s · positions + slot) · n_kv · dk, its values at v + (s · positions + slot) · n_kv · dv;
// with values_in_keys (multi-head latent attention) no values are stored: a head's values are
// the first dv of its key, and v == k.
struct KvLayer {
    void* k = nullptr;
    void* v = nullptr;
    int n_seq = 0;
    int positions = 0;
    int n_kv = 0;
    int dk = 0;
    int dv = 0;
    bool f16 = true;
    bool values_in_keys = false;
};

// A layer's heads in the cache, where layers differ (Gemma 4's sliding and global layers), and
// the layer whose cache it reads (itself, or an earlier layer's that it shares: it holds none);
// values_in_keys as KvLayer's.
struct KvLayerShape {
    int n_kv = 0;
    int dk = 0;
    int dv = 0;
    int source = 0;
    bool values_in_keys = false;
};

// The caches of every layer, one after the other in one allocation for the keys and one for the
// values: layer l's positions[l] slots per sequence (empty positions: shape.n_ctx for every layer)
// of its heads (empty per_layer: shape's heads, every layer its own cache). A layer that reads
// another's cache takes no memory; layer() gives it the other's. A layer whose values are in its
// keys takes no value memory (with every layer so, value_bytes() is 0 and v may be null); a layer
// of no positions (qwen3.5's recurrent layers: kv_cache_positions() is 0) takes none at all.
struct DeviceKv {
    void* k = nullptr;
    void* v = nullptr;
    KvShape shape;
    bool f16 = true;
    std::vector<int> positions;
    std::vector<KvLayerShape> per_layer;

    int layer_positions(int layer) const;
    KvLayerShape layer_shape(int layer) const;
    // Whether the layer holds a cache of its own.
    bool owns(int layer) const { return layer_shape(layer).source == layer; }
    KvLayer layer(int layer) const;
    // Bytes of one slot (one position of one sequence) of the layer's keys or values: its own
    // heads' (0 for values kept in the keys).
    size_t slot_bytes(int layer, bool keys) const;
    size_t key_bytes() const;
    size_t value_bytes() const;
    size_t bytes() const { return key_bytes() + value_bytes(); }
};

// Stores row t of k and v at places[t] (a device array), position p in slot p mod kv.positions
// (v is not read when the values are in the keys).
void store_kv(const KvLayer& kv, DeviceRows k, DeviceRows v, const TokenPlace* places,
              cudaStream_t stream);

// Scratch for the chunks' partial results: `capacity` (query head, chunk) pairs.
struct AttentionScratch {
    float* values = nullptr;  // [capacity][head_dim_v]
    float* stats = nullptr;   // [capacity][2]: max and sum
    int64_t capacity = 0;
    // [capacity] counters, zero before the first launch (and left zero by each): with them the
    // last chunk block of a query head to finish combines the chunks, without a second launch;
    // without them a combine kernel follows.
    int* done = nullptr;
};

// Where attention() may also write its output rounded for the product that reads it next, as
// round_activations() rounds it through dot_type (into `rounded`, with the codes into q8 when
// given), saving that product its rounding launch.
struct OutputRounding {
    GgmlType dot_type = GgmlType::kF32;
    DeviceRows rounded;
    const Q8Rows* q8 = nullptr;
};

// out[t][h] = softmax(q[t][h] · K · p.scale) · V over the positions the token at places[t] sees
// (j <= pos of its sequence, and pos - p.window < j with a window), K and V from kv head
// h / (p.n_head / n_kv); with p.sinks (a device array of p.n_head values) exp(sink[h] - max)
// joins head h's denominator (cpu/attention.h). n_chunks chunks of `chunk` positions of every
// query are computed from the first it sees (those past the query's position cost a block that
// returns at once), or with chunk 0 each query's positions split evenly over its n_chunks blocks;
// either way the launch is the same for every position: what a replayed CUDA graph needs. Queries
// are processed in slices that fit the scratch, which must hold p.n_head · n_chunks pairs at least.
// The chunks combine in chunk order either way (the same sums with or without scratch.done).
// Returns whether the combine also wrote `rounding` (where each warp of it holds whole blocks of
// the rounding; otherwise the caller rounds).
bool attention(const KvLayer& kv, DeviceRows q, const TokenPlace* places,
               const Attention::Params& p, int chunk, int n_chunks, const AttentionScratch& scratch,
               DeviceRows out, cudaStream_t stream, const OutputRounding& rounding = {});

// The same for prefill batches, in tiles of queries that share each staged tile of keys and
// values (online softmax; no scratch, one launch). Any mix of sequences and positions; a tile
// reads only the positions its queries see.
void attention_tiled(const KvLayer& kv, DeviceRows q, const TokenPlace* places,
                     const Attention::Params& p, DeviceRows out, cudaStream_t stream);
// Whether this GPU gives a block of the tiled kernel the shared memory of heads of dk / dv (the
// wide heads need more than some GPUs give: attention() then takes prefill batches too).
bool tiled_attention_fits(int dk, int dv);

}  // namespace tandem::cuda
