// Rotary position embedding on the device.
#include "cuda/rope.h"

#include <algorithm>
#include <cmath>

#include <cuda_fp16.h>

#include "cuda/check.h"
#include "cuda/early_launch.cuh"
#include "cuda/row_norm.cuh"

namespace tandem::cuda {
namespace {

float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(base));
}

struct RopeArgs {
    float theta_scale;
    float freq_scale;
    float mscale;
    int n_dims;
    int neox;
    int n_heads;
    int head_dim;
    int imrope;        // RopeTable::imrope
    int sections[3];   // ... its temporal, height and width sections
    int sector_count;
};

// The cosine and sine (times mscale) of pair i's angle, theta_extrap being the position times
// theta_scale^i as the CPU makes it: multiplied by theta_scale i times, each product rounded.
__device__ __forceinline__ void rope_angle(float theta_extrap, int i, const float* factor,
                                           const float* ramp, const RopeArgs& a, float& c,
                                           float& s) {
    const float theta_base = theta_extrap / factor[i];
    // Plain (unfused) products and sums, in the CPU's order, so the angles match it.
    const float theta_interp = __fmul_rn(a.freq_scale, theta_base);
    const float mix = ramp[i];
    const float theta =
        mix != 0.0f ? __fadd_rn(__fmul_rn(theta_interp, 1.0f - mix), __fmul_rn(theta_base, mix))
                    : theta_interp;
    sincosf(theta, &s, &c);
    c *= a.mscale;
    s *= a.mscale;
}

// The position pair i turns by: imrope's pairs outside the first three sections by 0.
__device__ __forceinline__ int rope_position(int pos, int i, const RopeArgs& a) {
    if (!a.imrope) return pos;
    // Positions (pos, pos, pos, 0): a pair outside the first three sections turns by 0.
    const int sector = i % a.sector_count, axis = sector % 3;
    const int section = axis == 0 ? a.sections[0] : axis == 1 ? a.sections[1] : a.sections[2];
    return sector >= 3 * section ? 0 : pos;
}

// Rotates pair i of one head (head_dim values at `head`) of a token at position pos.
__device__ __forceinline__ void rope_pair(float* head, int i, int pos, const float* factor,
                                          const float* ramp, const RopeArgs& a) {
    float theta_extrap = static_cast<float>(rope_position(pos, i, a));
    for (int j = 0; j < i; ++j) theta_extrap = __fmul_rn(theta_extrap, a.theta_scale);
    float s, c;
    rope_angle(theta_extrap, i, factor, ramp, a, c, s);
    const int half = a.n_dims / 2;
    const int i0 = 2 * i;
    const int ia = a.neox ? i : i0;
    const int ib = a.neox ? i + half : i0 + 1;
    const float x0 = head[ia], x1 = head[ib];
    head[ia] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    head[ib] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// One thread per rotated pair of every head of every row.
__global__ void rope_kernel(DeviceRows x, const TokenPlace* places, const float* factor,
                            const float* ramp, RopeArgs a) {
    const int half = a.n_dims / 2;
    const int64_t n = static_cast<int64_t>(x.rows) * a.n_heads * half;
    for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(idx % half);
        const int64_t th = idx / half;
        const int h = static_cast<int>(th % a.n_heads);
        const int t = static_cast<int>(th / a.n_heads);
        rope_pair(x.data + t * x.stride + static_cast<int64_t>(h) * a.head_dim, i, places[t].pos,
                  factor, ramp, a);
    }
}

// One head's RMS norm (as rms_norm's warp per group computes it), then its rotation, the normed
// values read back by the lanes that rotate them; the calling warp's lanes all take part.
__device__ __forceinline__ void norm_rope_head(float* head, const float* w, float eps, int pos,
                                               const float* factor, const float* ramp,
                                               const RopeArgs& a, int lane) {
    double sum = 0.0;
    for (int i = lane; i < a.head_dim; i += 32) sum += static_cast<double>(head[i] * head[i]);
    rms_norm_apply(head, w, a.head_dim, rms_scale(warp_sum_f64(sum), a.head_dim, eps), head, lane,
                   32);
    __syncwarp();
    for (int i = lane; i < a.n_dims / 2; i += 32) rope_pair(head, i, pos, factor, ramp, a);
}

// Multiplies a position's running theta_extrap by theta_scale n times (rope_pair's loop, resumed).
__device__ __forceinline__ float advance_theta(float theta_extrap, int n, const RopeArgs& a) {
    for (int j = 0; j < n; ++j) theta_extrap = __fmul_rn(theta_extrap, a.theta_scale);
    return theta_extrap;
}

// norm_rope_head with the head in registers: lane holds values lane + 32·j (j < kPer, the head
// kPer · 32 values), so the head is read and written once where norm_rope_head's steps each go
// through memory. The same operations in the same order: the same bits. Normal rope's pairs are
// neighbours (lanes l and l ^ 1 hold them); neox's, values i and i + head_dim / 2, are both the
// lane's when every value rotates (rope_in_registers()).
template <int kPer>
__device__ __forceinline__ void norm_rope_registers(float (&x)[kPer], const float* w, float eps,
                                                    int pos, const float* factor, const float* ramp,
                                                    const RopeArgs& a, int lane) {
    double sum = 0.0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) sum += static_cast<double>(x[j] * x[j]);
    const float scale = rms_scale(warp_sum_f64(sum), kPer * 32, eps);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const float v = x[j] * scale;
        x[j] = w != nullptr ? v * w[lane + 32 * j] : v;
    }
    float c, s;
    if (a.neox) {
        // Pair i = lane + 32·j, j < kPer / 2: values x[j] and x[j + kPer / 2].
        float running = advance_theta(static_cast<float>(pos), lane, a);
#pragma unroll
        for (int j = 0; j < kPer / 2; ++j) {
            const int i = lane + 32 * j;
            if (j > 0) running = advance_theta(running, 32, a);
            rope_angle(rope_position(pos, i, a) != 0 ? running : 0.0f, i, factor, ramp, a, c, s);
            const float x0 = x[j], x1 = x[j + kPer / 2];
            x[j] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
            x[j + kPer / 2] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
        }
        return;
    }
    // Value lane + 32·j belongs to pair i = lane / 2 + 16·j, the even lane holding its first.
    const bool first = lane % 2 == 0;
    float running = advance_theta(static_cast<float>(pos), lane / 2, a);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = lane / 2 + 16 * j;
        if (j > 0) running = advance_theta(running, 16, a);
        const float other = __shfl_xor_sync(0xffffffffu, x[j], 1);
        if (2 * i >= a.n_dims) continue;  // (both lanes of the pair alike)
        rope_angle(rope_position(pos, i, a) != 0 ? running : 0.0f, i, factor, ramp, a, c, s);
        const float x0 = first ? x[j] : other, x1 = first ? other : x[j];
        x[j] = first ? __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s))
                     : __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    }
}

// One warp per head of every row.
__global__ void norm_rope_kernel(DeviceRows x, const float* w, float eps, const TokenPlace* places,
                                 const float* factor, const float* ramp, RopeArgs a) {
    const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (g >= static_cast<int64_t>(x.rows) * a.n_heads) return;
    const int lane = threadIdx.x % 32;
    const int t = static_cast<int>(g / a.n_heads), h = static_cast<int>(g % a.n_heads);
    norm_rope_head(x.data + t * x.stride + static_cast<int64_t>(h) * a.head_dim, w, eps,
                   places[t].pos, factor, ramp, a, lane);
}

// A value as the cache holds it (store_kv's conversion).
template <bool kF16>
__device__ __forceinline__ void store_value(void* cache, int64_t at, float v) {
    if constexpr (kF16) {
        static_cast<__half*>(cache)[at] = __float2half_rn(v);
    } else {
        static_cast<float*>(cache)[at] = v;
    }
}

// n values of a head into the cache, as store_kv converts them.
template <bool kF16>
__device__ __forceinline__ void store_head(void* cache, int64_t at, const float* head, int n,
                                           int lane) {
    for (int i = lane; i < n; i += 32) store_value<kF16>(cache, at + i, head[i]);
}

// A head normed and rotated in place (norm_rope_head; kPer > 0: through registers, the head
// kPer · 32 values), then, with a cache, stored at `at` in it.
template <int kPer, bool kF16>
__device__ __forceinline__ void norm_rope_store_head(float* head, const float* w, float eps,
                                                     int pos, const float* factor,
                                                     const float* ramp, const RopeArgs& a,
                                                     void* cache, int64_t at, int lane) {
    if constexpr (kPer > 0) {
        float x[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) x[j] = head[lane + 32 * j];
        norm_rope_registers(x, w, eps, pos, factor, ramp, a, lane);
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            head[lane + 32 * j] = x[j];
            if (cache != nullptr) store_value<kF16>(cache, at + lane + 32 * j, x[j]);
        }
    } else {
        norm_rope_head(head, w, eps, pos, factor, ramp, a, lane);
        if (cache == nullptr) return;
        __syncwarp();
        store_head<kF16>(cache, at, head, a.head_dim, lane);
    }
}

// One warp per head of every row: the row's a.n_heads query heads, then its n_kv key heads
// (normed, rotated and stored), then its n_kv value heads (stored; none when the values are
// in the keys). kPer > 0: the heads, kPer · 32 values, go through registers.
template <bool kF16, int kPer>
__global__ void norm_rope_store_kernel(DeviceRows q, DeviceRows k, DeviceRows v, const float* q_w,
                                       const float* k_w, float eps, const TokenPlace* places,
                                       const float* factor, const float* ramp, RopeArgs a,
                                       KvLayer kv) {
    wait_for_previous_kernel();
    const int per_row = a.n_heads + (kv.values_in_keys ? 1 : 2) * kv.n_kv;
    const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (g >= static_cast<int64_t>(q.rows) * per_row) return;
    const int lane = threadIdx.x % 32;
    const int t = static_cast<int>(g / per_row);
    int h = static_cast<int>(g % per_row);
    const TokenPlace p = places[t];
    if (h < a.n_heads) {
        norm_rope_store_head<kPer, kF16>(
            q.data + t * q.stride + static_cast<int64_t>(h) * a.head_dim, q_w, eps, p.pos, factor,
            ramp, a, nullptr, 0, lane);
        return;
    }
    h -= a.n_heads;
    const int64_t slot = static_cast<int64_t>(p.seq) * kv.positions + p.pos % kv.positions;
    if (h < kv.n_kv) {
        norm_rope_store_head<kPer, kF16>(k.data + t * k.stride + static_cast<int64_t>(h) * kv.dk,
                                         k_w, eps, p.pos, factor, ramp, a, kv.k,
                                         (slot * kv.n_kv + h) * static_cast<int64_t>(kv.dk), lane);
        return;
    }
    h -= kv.n_kv;
    store_head<kF16>(kv.v, (slot * kv.n_kv + h) * static_cast<int64_t>(kv.dv),
                     v.data + t * v.stride + static_cast<int64_t>(h) * kv.dv, kv.dv, lane);
}

// Whether heads of head_dim values rotate in registers (norm_rope_registers): whole warps of
// values, at most 256, and neox's pairs within a lane (every value rotates).
bool rope_in_registers(const RopeTable& table, int head_dim) {
    if (head_dim % 32 != 0 || head_dim > 256 || table.n_dims > head_dim || table.n_dims % 2 != 0)
        return false;
    return !table.neox || table.n_dims == head_dim;
}

template <bool kF16>
decltype(&norm_rope_store_kernel<kF16, 0>) norm_rope_store_for(const RopeTable& table,
                                                               int head_dim) {
    if (!rope_in_registers(table, head_dim)) return norm_rope_store_kernel<kF16, 0>;
    const int per_lane = head_dim / 32;
    return per_lane == 2   ? norm_rope_store_kernel<kF16, 2>
           : per_lane == 4 ? norm_rope_store_kernel<kF16, 4>
           : per_lane == 8 ? norm_rope_store_kernel<kF16, 8>
                           : norm_rope_store_kernel<kF16, 0>;
}

RopeArgs rope_args(const RopeTable& table, int n_heads, int head_dim) {
    return {table.theta_scale,
            table.freq_scale,
            table.mscale,
            table.n_dims,
            table.neox ? 1 : 0,
            n_heads,
            head_dim,
            table.imrope ? 1 : 0,
            {table.sections[0], table.sections[1], table.sections[2]},
            table.sector_count};
}

}  // namespace

RopeTable make_rope_table(const RopeParams& p) {
    RopeTable t;
    t.n_dims = p.n_dims;
    t.neox = p.type == RopeType::kNeox;
    t.freq_scale = p.freq_scale;
    t.mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) t.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    t.theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
    t.sector_count = p.sections[0] + p.sections[1] + p.sections[2] + p.sections[3];
    t.imrope = p.imrope && t.sector_count > 0;
    for (int i = 0; i < 3; ++i) t.sections[i] = p.sections[i];
    const int n_ctx_orig = p.n_ctx_orig > 0 ? p.n_ctx_orig : 4096;
    const float low =
        std::max(0.0f, std::floor(yarn_corr_dim(p.n_dims, n_ctx_orig, p.beta_fast, p.freq_base)));
    const float high =
        std::min(static_cast<float>(p.n_dims - 1),
                 std::ceil(yarn_corr_dim(p.n_dims, n_ctx_orig, p.beta_slow, p.freq_base)));
    for (int i0 = 0; i0 < p.n_dims; i0 += 2) {
        t.factor.push_back(p.freq_factors != nullptr ? p.freq_factors[i0 / 2] : 1.0f);
        float mix = 0.0f;
        if (p.ext_factor != 0.0f) {
            const float y = (i0 / 2 - low) / std::max(0.001f, high - low);
            mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
        }
        t.ramp.push_back(mix);
    }
    return t;
}

void rope(DeviceRows x, int n_heads, int head_dim, const TokenPlace* places, const RopeTable& table,
          const float* factor, const float* ramp, cudaStream_t stream) {
    const int64_t n = static_cast<int64_t>(x.rows) * n_heads * (table.n_dims / 2);
    if (n == 0) return;
    const RopeArgs a = rope_args(table, n_heads, head_dim);
    const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535);
    rope_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, places, factor, ramp, a);
    check_launch("rope");
}

void norm_rope(DeviceRows x, int n_heads, int head_dim, const float* w, float eps,
               const TokenPlace* places, const RopeTable& table, const float* factor,
               const float* ramp, cudaStream_t stream) {
    const int64_t heads = static_cast<int64_t>(x.rows) * n_heads;
    if (heads == 0) return;
    constexpr int kWarps = 8;
    norm_rope_kernel<<<static_cast<unsigned>((heads + kWarps - 1) / kWarps), 32 * kWarps, 0,
                       stream>>>(x, w, eps, places, factor, ramp,
                                 rope_args(table, n_heads, head_dim));
    check_launch("norm_rope");
}

void norm_rope_store(DeviceRows q, int n_head, DeviceRows k, DeviceRows v, const float* q_w,
                     const float* k_w, float eps, const TokenPlace* places, const RopeTable& table,
                     const float* factor, const float* ramp, const KvLayer& kv,
                     cudaStream_t stream) {
    const int64_t heads =
        static_cast<int64_t>(q.rows) * (n_head + (kv.values_in_keys ? 1 : 2) * kv.n_kv);
    if (heads == 0) return;
    constexpr int kWarps = 4;
    const unsigned blocks = static_cast<unsigned>((heads + kWarps - 1) / kWarps);
    const RopeArgs a = rope_args(table, n_head, kv.dk);
    launch_early(
        kv.f16 ? norm_rope_store_for<true>(table, kv.dk) : norm_rope_store_for<false>(table, kv.dk),
        blocks, 32 * kWarps, 0, stream, "norm_rope_store", q, k, v, q_w, k_w, eps, places, factor,
        ramp, a, kv);
}

}  // namespace tandem::cuda
