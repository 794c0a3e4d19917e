// Rotary position embedding on the device, as cpu/rope.h computes it (NORMAL and NEOX, linear
// and YaRN scaling, llama-3 frequency factors, qwen3.5's interleaved multimodal sections): the
// per-pair frequencies and YaRN ramps are worked out once on the host (make_rope_table), the
// angles per token on the device.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "cpu/attention.h"
#include "cpu/rope.h"
#include "cuda/attention.h"
#include "cuda/elementwise.h"

namespace tandem::cuda {

// Per rotated pair i (n_dims / 2 of them): theta_base = (pos · theta_scale^i) / factor[i], the
// power built by i repeated float multiplications as the CPU does; ramp[i] is YaRN's
// extrapolation mix (times ext_factor). mscale multiplies cos and sin.
struct RopeTable {
    std::vector<float> factor;  // llama-3 frequency factors, or 1
    std::vector<float> ramp;
    float theta_scale = 1.0f;
    float freq_scale = 1.0f;
    float mscale = 1.0f;
    bool neox = false;
    int n_dims = 0;
    // Interleaved multimodal rope over text (RopeParams::imrope): pair i of sector
    // i mod Σsections rotates by the position only in the temporal, height and width sectors
    // (sector % 3 == 0, 1, 2 and below 3 · its section), else by position 0.
    bool imrope = false;
    int sections[3] = {0, 0, 0};
    int sector_count = 0;  // Σ of the four sections
};
RopeTable make_rope_table(const RopeParams& params);

// Rotates n_heads heads of head_dim values in every row of x, row t at places[t].pos (places:
// a device array). factor and ramp: device copies of the table's vectors.
void rope(DeviceRows x, int n_heads, int head_dim, const TokenPlace* places, const RopeTable& table,
          const float* factor, const float* ramp, cudaStream_t stream);
// Per-head RMS norm (weights w of head_dim values, or nullptr) then rope(), one warp per head.
void norm_rope(DeviceRows x, int n_heads, int head_dim, const float* w, float eps,
               const TokenPlace* places, const RopeTable& table, const float* factor,
               const float* ramp, cudaStream_t stream);

// The attention block's per-head work in one launch: norm_rope() of q's n_head heads (norm
// weights q_w) and of k's heads (k_w), then k and v stored at places[t] in the layer's cache kv,
// as store_kv() stores them. Heads of kv's sizes (keys dk, values dv).
void norm_rope_store(DeviceRows q, int n_head, DeviceRows k, DeviceRows v, const float* q_w,
                     const float* k_w, float eps, const TokenPlace* places, const RopeTable& table,
                     const float* factor, const float* ramp, const KvLayer& kv,
                     cudaStream_t stream);

}  // namespace tandem::cuda
