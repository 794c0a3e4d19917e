// Prefill attention on tensor cores, for f16 caches of heads of 64, 128 or 256 (keys and values
// alike): flash attention with mma.sync m16n8k16 (f16 × f16, f32 sums; sm_80 and later). A block
// takes 64 queries of one head, 16 a warp, against tiles of keys and values staged in shared
// memory as f16: S = Q·Kᵀ by the tensor cores, the online softmax on S's fragments in registers
// (a row's values are spread over the four lanes of a quad), and P·V from the same registers
// rounded to f16, V's fragments read transposed by ldmatrix. The queries and the softmax weights
// are rounded to f16 as the CPU backend does for f16 caches (and llama.cpp's flash attention);
// the scalar kernel of attention_kernels.cuh keeps f32 caches and the other head sizes.
#include <cuda_fp16.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "cuda/async_copy.cuh"
#include "cuda/attention_kernels.cuh"
#include "cuda/check.h"
#include "cuda/mma_f16.cuh"

namespace tandem::cuda::attention_kernels {
namespace {

constexpr int kMmaWarps = kThreads / 32;
constexpr int kMmaQueries = 16 * kMmaWarps;  // a block's queries: 16 rows of an mma a warp

// Keys a staged tile holds: 64, or 32 for heads of 256 (so that the block's shared memory stays
// within what every GPU since Ampere gives it); rows padded by 8 halves, so that the eight rows an
// mma fragment or ldmatrix reads at once fall in distinct banks. Heads of up to 128 stage two
// tiles, the copies of the next flying while the block computes on this one; heads of 256 one
// (two would pass the shared memory of sm_86 and sm_89).
template <int kDim>
constexpr int mma_tile_keys() {
    return kDim <= 128 ? 64 : 32;
}
template <int kDim>
constexpr int mma_stages() {
    return kDim <= 128 ? 2 : 1;
}
constexpr int mma_row(int dim) {
    return dim + 8;
}
template <int kDim>
constexpr size_t mma_shared_bytes() {
    return sizeof(__half) * (kMmaQueries + 2 * mma_stages<kDim>() * mma_tile_keys<kDim>()) *
           mma_row(kDim);
}
// The kernel's static arrays: its queries' places, and the sequence it takes.
constexpr size_t kMmaStaticBytes = sizeof(int) * (3 * kMmaQueries + 3);

// Four 8 × 8 matrices of halves from shared memory, lanes 8 i .. 8 i + 7 naming the rows of
// matrix i; each lane receives row lane / 4, columns 2 (lane % 4) and + 1 of each (with .trans,
// of the transposed matrices).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&m)[4], const __half* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&m)[4], const __half* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(shared_address(row)));
}

// Issues the copies of positions j0 .. j0 + n - 1 of one kv head (row j at `first` + slot(j) ·
// row_stride halves) into a tile of kKeys rows; rows past n are zeros (their weights are zero,
// and 0 · 0 stays 0).
template <int kDim, int kKeys>
__device__ __forceinline__ void issue_rows(const __half* base, int64_t first, int64_t row_stride,
                                           int j0, int n, int positions, __half* tile) {
    constexpr int kPerRow = kDim / 8;
    for (int job = threadIdx.x; job < kKeys * kPerRow; job += kThreads) {
        const int r = job / kPerRow, c = 8 * (job % kPerRow);
        const bool real = r < n;
        const __half* src =
            real ? base + first + ring_slot(j0 + r, positions) * row_stride + c : base;
        copy_async<16>(tile + r * mma_row(kDim) + c, src, !real);
    }
}

template <int kDim>
__global__ void __launch_bounds__(kThreads)
    attention_mma_kernel(const __grid_constant__ TiledArgs a) {
    constexpr int kKeys = mma_tile_keys<kDim>(), kLd = mma_row(kDim);
    constexpr int kStages = mma_stages<kDim>();
    constexpr int kKeyTiles = kKeys / 8, kDimTiles = kDim / 8;
    extern __shared__ uint4 shared_words[];
    __half* Qs = reinterpret_cast<__half*>(shared_words);  // [kMmaQueries][kLd]
    __half* Ks = Qs + kMmaQueries * kLd;                    // [kStages][kKeys][kLd]
    __half* Vs = Ks + kStages * kKeys * kLd;                // [kStages][kKeys][kLd]
    __shared__ int q_pos[kMmaQueries], q_seq[kMmaQueries], q_first[kMmaQueries];
    __shared__ int next_seq, seq_begin, seq_end;
    const int h = blockIdx.y, t0 = blockIdx.x * kMmaQueries, kvh = h / a.group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quad = lane / 4, pair = lane % 4;
    for (int i = threadIdx.x; i < kMmaQueries; i += kThreads) {
        const int t = t0 + i;
        const bool real = t < a.n_tokens;
        q_pos[i] = real ? a.places[t].pos : -1;
        q_seq[i] = real ? a.places[t].seq : INT_MAX;
        q_first[i] = real ? first_seen(q_pos[i], a.window) : 0;
    }
    for (int job = threadIdx.x; job < kMmaQueries * kDim / 2; job += kThreads) {
        const int i = job / (kDim / 2), d = 2 * (job % (kDim / 2)), t = t0 + i;
        float2 v = make_float2(0.0f, 0.0f);
        if (t < a.n_tokens)
            v = *reinterpret_cast<const float2*>(a.q + t * a.q_stride +
                                                 static_cast<int64_t>(h) * kDim + d);
        *reinterpret_cast<__half2*>(Qs + i * kLd + d) = __floats2half2_rn(v.x, v.y);
    }
    // Scores in log2 units: exp2 of the difference below is exp of the scaled one.
    const float scale = a.scale * 1.4426950408889634f;
    // The thread's two rows of its warp's 16: `quad` and `quad` + 8; a quad's four lanes hold a
    // row's scores of keys 2 · pair, + 1 in each tile of 8, and its outputs of dims 2 · pair, + 1
    // in each tile of 8.
    const int rows[2] = {warp * 16 + quad, warp * 16 + quad + 8};
    // The rows and columns this lane names to ldmatrix: Q's a fragments (rows 0-7 and 8-15 of
    // the warp's 16, columns 0-7 and 8-15), two key tiles' b fragments (keys of the tile and the
    // next, dims 0-7 and 8-15), two dim tiles' transposed V fragments (keys 0-7 and 8-15, dims of
    // the tile and the next).
    const int q_lane_row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, q_lane_col = (lane >> 4) * 8;
    const int k_lane_row = (lane >> 4) * 8 + (lane & 7), k_lane_col = ((lane >> 3) & 1) * 8;
    const int v_lane_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_lane_col = (lane >> 4) * 8;
    float o[kDimTiles][4];
#pragma unroll
    for (int dt = 0; dt < kDimTiles; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const __half* K = static_cast<const __half*>(a.k);
    const __half* V = static_cast<const __half*>(a.v);
    const int64_t k_row = static_cast<int64_t>(a.n_kv) * a.dk;
    int done_seq = -1;
    for (;;) {
        // The tile's queries a sequence at a time (the others masked), as the scalar kernel.
        __syncthreads();
        if (threadIdx.x == 0) {
            next_tile_sequence(q_seq, q_pos, kMmaQueries, a.window, done_seq, next_seq, seq_begin,
                               seq_end);
        }
        __syncthreads();
        const int seq = next_seq, first_key = seq_begin, n_keys = seq_end;
        if (seq == INT_MAX) break;
        done_seq = seq;
        bool mine[2];
        int pos[2], first[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mine[r] = q_seq[rows[r]] == seq;
            pos[r] = q_pos[rows[r]];
            first[r] = q_first[rows[r]];
        }
        const int64_t seq_base = static_cast<int64_t>(seq) * a.positions;
        const int64_t k_first = seq_base * k_row + static_cast<int64_t>(kvh) * a.dk;
        const int64_t v_first =
            seq_base * a.v_pos_stride + static_cast<int64_t>(kvh) * a.v_head_stride;
        const int n_tiles = (n_keys - first_key + kKeys - 1) / kKeys;
        const auto issue = [&](int i) {
            const int j0 = first_key + i * kKeys, n = min(kKeys, n_keys - j0);
            const int buf = i % kStages;
            issue_rows<kDim, kKeys>(K, k_first, k_row, j0, n, a.positions, Ks + buf * kKeys * kLd);
            issue_rows<kDim, kKeys>(V, v_first, a.v_pos_stride, j0, n, a.positions,
                                    Vs + buf * kKeys * kLd);
            commit_copies();
        };
        for (int i = 0; i < n_tiles; ++i) {
            // Two stages: tile i + 1's copies fly while tile i is computed (its buffer was last
            // read by tile i - 1, before the barrier that closed it).
            if constexpr (kStages == 2) {
                if (i == 0) issue(0);
                if (i + 1 < n_tiles) {
                    issue(i + 1);
                    wait_copies<1>();
                } else {
                    wait_copies<0>();
                }
            } else {
                issue(i);
                wait_copies<0>();
            }
            __syncthreads();
            const int j0 = first_key + i * kKeys, n = min(kKeys, n_keys - j0);
            const __half* Kt = Ks + (i % kStages) * kKeys * kLd;
            const __half* Vt = Vs + (i % kStages) * kKeys * kLd;
            // A warp none of whose rows sees a key of this tile skips it (causal tiles past its
            // queries, windows before them); one all of whose rows see all its keys needs no
            // masks.
            bool sees = false, sees_all = n == kKeys;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                sees = sees || (mine[r] && first[r] < j0 + n && pos[r] >= j0);
                sees_all = sees_all && mine[r] && first[r] <= j0 && pos[r] >= j0 + kKeys - 1;
            }
            if (__any_sync(0xffffffffu, sees)) {
                const bool full = __all_sync(0xffffffffu, sees_all);
                float s[kKeyTiles][4];
#pragma unroll
                for (int kt = 0; kt < kKeyTiles; ++kt)
                    s[kt][0] = s[kt][1] = s[kt][2] = s[kt][3] = 0.0f;
#pragma unroll 4
                for (int d0 = 0; d0 < kDim; d0 += 16) {
                    uint32_t qf[4];
                    ldmatrix_x4(qf, Qs + q_lane_row * kLd + d0 + q_lane_col);
#pragma unroll
                    for (int kt = 0; kt < kKeyTiles; kt += 2) {
                        uint32_t kf[4];
                        ldmatrix_x4(kf, Kt + (kt * 8 + k_lane_row) * kLd + d0 + k_lane_col);
                        mma_f16(s[kt], qf, kf[0], kf[1]);
                        mma_f16(s[kt + 1], qf, kf[2], kf[3]);
                    }
                }
                // Masks (unless the warp sees the whole tile), then the online softmax of each
                // row over its quad.
                float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int r = e / 2, c = kt * 8 + 2 * pair + e % 2, j = j0 + c;
                        const bool seen =
                            full || (mine[r] && c < n && j >= first[r] && j <= pos[r]);
                        s[kt][e] = seen ? s[kt][e] * scale : -INFINITY;
                        tile_max[r] = fmaxf(tile_max[r], s[kt][e]);
                    }
                }
                float rescale[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
                    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
                    const float m_new = fmaxf(m[r], tile_max[r]);
                    rescale[r] = m_new == -INFINITY ? 1.0f : exp2f(m[r] - m_new);
                    m[r] = m_new;
                }
#pragma unroll
                for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int r = e / 2;
                        s[kt][e] = s[kt][e] == -INFINITY ? 0.0f : exp2f(s[kt][e] - m[r]);
                        sum[r] += s[kt][e];
                    }
                }
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
                    sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
                    l[r] = l[r] * rescale[r] + sum[r];
                }
#pragma unroll
                for (int dt = 0; dt < kDimTiles; ++dt) {
                    o[dt][0] *= rescale[0], o[dt][1] *= rescale[0];
                    o[dt][2] *= rescale[1], o[dt][3] *= rescale[1];
                }
                // O += P · V, 16 keys an mma: P's a fragment is two key tiles' score fragments.
#pragma unroll
                for (int kk = 0; kk < kKeys / 16; ++kk) {
                    const uint32_t pf[4] = {half2_bits(s[2 * kk][0], s[2 * kk][1]),
                                            half2_bits(s[2 * kk][2], s[2 * kk][3]),
                                            half2_bits(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                            half2_bits(s[2 * kk + 1][2], s[2 * kk + 1][3])};
                    const __half* vrow = Vt + (kk * 16 + v_lane_row) * kLd + v_lane_col;
#pragma unroll
                    for (int dt = 0; dt < kDimTiles; dt += 2) {
                        uint32_t vf[4];
                        ldmatrix_x4_trans(vf, vrow + dt * 8);
                        mma_f16(o[dt], pf, vf[0], vf[1]);
                        mma_f16(o[dt + 1], pf, vf[2], vf[3]);
                    }
                }
            }
            __syncthreads();  // the tile's buffer is read
        }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int t = t0 + rows[r];
        if (t >= a.n_tokens) continue;
        float norm = 1.0f;
        if (a.sinks != nullptr) {
            // The sink joins the max and the sum (in the scores' log2 units).
            const float sink = a.sinks[h] * 1.4426950408889634f;
            const float m_sink = fmaxf(m[r], sink);
            norm = m[r] == -INFINITY ? 0.0f : exp2f(m[r] - m_sink);
            l[r] = l[r] * norm + exp2f(sink - m_sink);
        }
        norm = l[r] > 0.0f ? norm / l[r] : 0.0f;
        float* dst = a.out + t * a.out_stride + static_cast<int64_t>(h) * kDim + 2 * pair;
#pragma unroll
        for (int dt = 0; dt < kDimTiles; ++dt) {
            *reinterpret_cast<float2*>(dst + dt * 8) =
                make_float2(o[dt][2 * r] * norm, o[dt][2 * r + 1] * norm);
        }
    }
}

template <int kDim>
void launch_mma(const TiledArgs& a, cudaStream_t stream) {
    constexpr size_t kShared = mma_shared_bytes<kDim>();
    static const bool ready = [] {
        check(cudaFuncSetAttribute(attention_mma_kernel<kDim>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kShared)),
              "cudaFuncSetAttribute");
        return true;
    }();
    (void)ready;
    const dim3 grid((a.n_tokens + kMmaQueries - 1) / kMmaQueries, a.group * a.n_kv);
    attention_mma_kernel<kDim><<<grid, kThreads, kShared, stream>>>(a);
    check_launch("attention_mma_kernel");
}

}  // namespace

bool attention_mma_takes(const KvLayer& kv, int64_t q_stride, int64_t out_stride) {
    const bool dim = kv.dk == kv.dv && (kv.dk == 64 || kv.dk == 128 || kv.dk == 256);
    if (!kv.f16 || kv.values_in_keys || !dim || q_stride % 2 != 0 || out_stride % 2 != 0)
        return false;
    const size_t stages = kv.dk == 64    ? mma_shared_bytes<64>()
                          : kv.dk == 128 ? mma_shared_bytes<128>()
                                         : mma_shared_bytes<256>();
    return stages + kMmaStaticBytes <= max_block_shared_bytes();
}

void attention_mma(const TiledArgs& a, cudaStream_t stream) {
    switch (a.dk) {
        case 64: return launch_mma<64>(a, stream);
        case 128: return launch_mma<128>(a, stream);
        default: return launch_mma<256>(a, stream);
    }
}

}  // namespace tandem::cuda::attention_kernels
