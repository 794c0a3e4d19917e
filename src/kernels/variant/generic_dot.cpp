// Plain C++ dot-product tiles for every weight type: the baseline variant (any x86-64 or
// aarch64 CPU) and the fallback of the SIMD variants for types they do not implement. Each
// weight block is decoded once into a layout-neutral form (int8 values and scales), then dotted
// with every activation column; integer sums per block are scaled in float as ggml does.
#include <cstddef>
#include <cstring>

#include "formats/float16.h"
#include "formats/iq_tables.h"
#include "formats/quants_iq.h"
#include "formats/quants_lowbit.h"
#include "kernels/variant/blocks.h"
#include "kernels/variant/kernel_decls.h"

namespace tandem::kernels_baseline {
namespace {

namespace kb = kernel_blocks;

template <typename Block>
Block load(const uint8_t* p) {
    Block b;
    std::memcpy(&b, p, sizeof(Block));
    return b;
}

int nibble(const uint8_t* qs, int j) {
    return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}
uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// ---------------------------------------------------------------- 32-value pieces

// The weights facing one q8_0 / q8_1 activation block: value j = d[j / 16] * q[j] + m.
// (d differs between the halves only for nvfp4, whose scales cover 16 values.)
struct Piece {
    int8_t q[32];
    float d[2];
    float m;
};

struct DecodeQ4_0 {
    static constexpr int kBlock = 32, kBytes = 18;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Q4_0>(row + i * kBytes);
        for (int j = 0; j < 32; ++j) p.q[j] = static_cast<int8_t>(nibble(b.qs, j) - 8);
        p.d[0] = p.d[1] = fp16_to_f32(b.d);
        p.m = 0;
    }
};
struct DecodeQ4_1 {
    static constexpr int kBlock = 32, kBytes = 20;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Q4_1>(row + i * kBytes);
        for (int j = 0; j < 32; ++j) p.q[j] = static_cast<int8_t>(nibble(b.qs, j));
        p.d[0] = p.d[1] = fp16_to_f32(b.d);
        p.m = fp16_to_f32(b.m);
    }
};
struct DecodeQ5_0 {
    static constexpr int kBlock = 32, kBytes = 22;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Q5_0>(row + i * kBytes);
        const uint32_t qh = load_u32(b.qh);
        for (int j = 0; j < 32; ++j) {
            p.q[j] = static_cast<int8_t>((nibble(b.qs, j) | ((qh >> j) & 1) << 4) - 16);
        }
        p.d[0] = p.d[1] = fp16_to_f32(b.d);
        p.m = 0;
    }
};
struct DecodeQ5_1 {
    static constexpr int kBlock = 32, kBytes = 24;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Q5_1>(row + i * kBytes);
        const uint32_t qh = load_u32(b.qh);
        for (int j = 0; j < 32; ++j) {
            p.q[j] = static_cast<int8_t>(nibble(b.qs, j) | ((qh >> j) & 1) << 4);
        }
        p.d[0] = p.d[1] = fp16_to_f32(b.d);
        p.m = fp16_to_f32(b.m);
    }
};
struct DecodeQ8_0 {
    static constexpr int kBlock = 32, kBytes = 34;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Q8_0>(row + i * kBytes);
        std::memcpy(p.q, b.qs, 32);
        p.d[0] = p.d[1] = fp16_to_f32(b.d);
        p.m = 0;
    }
};
struct DecodeIq4Nl {
    static constexpr int kBlock = 32, kBytes = 18;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Iq4Nl>(row + i * kBytes);
        for (int j = 0; j < 32; ++j) p.q[j] = kIq4nlValues[nibble(b.qs, j)];
        p.d[0] = p.d[1] = fp16_to_f32(b.d);
        p.m = 0;
    }
};
struct DecodeMxfp4 {
    static constexpr int kBlock = 32, kBytes = 17;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Mxfp4>(row + i * kBytes);
        for (int j = 0; j < 32; ++j) p.q[j] = kE2m1DoubledValues[nibble(b.qs, j)];
        p.d[0] = p.d[1] = e8m0_to_f32_half(b.e);
        p.m = 0;
    }
};
// One nvfp4 block faces two q8_0 blocks: piece i is half i % 2 of block i / 2, i.e. its
// sub-blocks 2h and 2h + 1.
struct DecodeNvfp4 {
    static constexpr int kBlock = 64, kBytes = 36;
    static void piece(const uint8_t* row, int64_t i, Piece& p) {
        const auto b = load<kb::Nvfp4>(row + (i / 2) * kBytes);
        const int h = static_cast<int>(i % 2);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* qs = b.qs + 8 * (2 * h + half);
            for (int j = 0; j < 16; ++j) {
                const int code = j < 8 ? qs[j] & 15 : qs[j - 8] >> 4;
                p.q[16 * half + j] = kE2m1DoubledValues[code];
            }
            p.d[half] = ue4m3_to_f32_half(b.d[2 * h + half]);
        }
        p.m = 0;
    }
};

// Activation block fields (q8_0 or q8_1; q8_1 carries s = d * sum(q) for the min term).
template <bool kQ8_1>
struct ActBlock {
    static constexpr int kBytes = kQ8_1 ? 36 : 34;
    static float d(const uint8_t* b) {
        return fp16_to_f32(static_cast<uint16_t>(b[0] | b[1] << 8));
    }
    static float s(const uint8_t* b) {
        return fp16_to_f32(static_cast<uint16_t>(b[2] | b[3] << 8));
    }
    static const int8_t* qs(const uint8_t* b) {
        return reinterpret_cast<const int8_t*>(b + (kQ8_1 ? 4 : 2));
    }
};

template <typename Decode, bool kQ8_1>
void dot_pieces(TANDEM_DOT_TILE_PARAMS) {
    using Act = ActBlock<kQ8_1>;
    const int64_t n_pieces = k / 32;
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * w_stride;
        float acc[kMaxTileCols] = {};
        Piece p;
        for (int64_t i = 0; i < n_pieces; ++i) {
            Decode::piece(row, i, p);
            for (int c = 0; c < n_cols; ++c) {
                const uint8_t* ab = a + c * a_stride + i * Act::kBytes;
                const int8_t* y = Act::qs(ab);
                int lo = 0, hi = 0;
                for (int j = 0; j < 16; ++j) lo += p.q[j] * y[j];
                for (int j = 16; j < 32; ++j) hi += p.q[j] * y[j];
                const float da = Act::d(ab);
                float sum = p.d[0] == p.d[1] ? (p.d[0] * da) * static_cast<float>(lo + hi)
                                             : (p.d[0] * da) * static_cast<float>(lo) +
                                                   (p.d[1] * da) * static_cast<float>(hi);
                if constexpr (kQ8_1) sum += p.m * Act::s(ab);
                acc[c] += sum;
            }
        }
        for (int c = 0; c < n_cols; ++c) out[c * out_stride + r] = acc[c];
    }
}

// ---------------------------------------------------------------- 256-value super-blocks

// One super-block facing one q8_K block: value v = d * sc[v / 16] * q[v] - dmin * mn[v / 16].
struct Super {
    int8_t q[256];
    int16_t sc[16];
    int16_t mn[16];
    float d, dmin;
};

// The 6-bit scale and min of sub-block j of q4_K / q5_K.
void k4_scale_min(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

struct DecodeQ2K {
    static constexpr int kBytes = 84;
    static void super(const uint8_t* p, Super& s) {
        const auto b = load<kb::Q2K>(p);
        for (int v = 0; v < 256; ++v) {
            s.q[v] =
                static_cast<int8_t>((b.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3);
        }
        for (int j = 0; j < 16; ++j) {
            s.sc[j] = b.scales[j] & 15;
            s.mn[j] = b.scales[j] >> 4;
        }
        s.d = fp16_to_f32(b.d);
        s.dmin = fp16_to_f32(b.dmin);
    }
};
struct DecodeQ3K {
    static constexpr int kBytes = 110;
    static void super(const uint8_t* p, Super& s) {
        const auto b = load<kb::Q3K>(p);
        for (int v = 0; v < 256; ++v) {
            const int n = v / 128, g = (v % 128) / 32, l = v % 32;
            const int low = (b.qs[32 * n + l] >> (2 * g)) & 3;
            const int high = (b.hmask[l] >> (4 * n + g)) & 1;
            s.q[v] = static_cast<int8_t>(low - (high ? 0 : 4));
        }
        for (int j = 0; j < 16; ++j) {
            const int low = j < 8 ? b.scales[j] & 15 : b.scales[j - 8] >> 4;
            const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
            s.sc[j] = static_cast<int16_t>((low | high << 4) - 32);
            s.mn[j] = 0;
        }
        s.d = fp16_to_f32(b.d);
        s.dmin = 0;
    }
};
template <bool kFive>
struct DecodeQ45K {
    static constexpr int kBytes = kFive ? 176 : 144;
    static void super(const uint8_t* p, Super& s) {
        const uint8_t* qs = p + (kFive ? 48 : 16);
        const uint8_t* qh = p + 16;
        for (int v = 0; v < 256; ++v) {
            const uint8_t byte = qs[32 * (v / 64) + v % 32];
            int q = (v % 64) < 32 ? byte & 15 : byte >> 4;
            if constexpr (kFive) q |= ((qh[v % 32] >> (2 * (v / 64) + (v % 64) / 32)) & 1) << 4;
            s.q[v] = static_cast<int8_t>(q);
        }
        for (int j = 0; j < 8; ++j) {
            int sc, m;
            k4_scale_min(p + 4, j, sc, m);
            s.sc[2 * j] = s.sc[2 * j + 1] = static_cast<int16_t>(sc);
            s.mn[2 * j] = s.mn[2 * j + 1] = static_cast<int16_t>(m);
        }
        s.d = fp16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8));
        s.dmin = fp16_to_f32(static_cast<uint16_t>(p[2] | p[3] << 8));
    }
};
struct DecodeQ6K {
    static constexpr int kBytes = 210;
    static void super(const uint8_t* p, Super& s) {
        const auto b = load<kb::Q6K>(p);
        for (int v = 0; v < 256; ++v) {
            const int n = v / 128, g = (v % 128) / 32, l = v % 32;
            const uint8_t low_byte = b.ql[64 * n + 32 * (g % 2) + l];
            const int low = g < 2 ? low_byte & 15 : low_byte >> 4;
            const int high = (b.qh[32 * n + l] >> (2 * g)) & 3;
            s.q[v] = static_cast<int8_t>((low | high << 4) - 32);
        }
        for (int j = 0; j < 16; ++j) {
            s.sc[j] = b.scales[j];
            s.mn[j] = 0;
        }
        s.d = fp16_to_f32(b.d);
        s.dmin = 0;
    }
};
struct DecodeIq4Xs {
    static constexpr int kBytes = 136;
    static void super(const uint8_t* p, Super& s) {
        const auto b = load<kb::Iq4Xs>(p);
        for (int sub = 0; sub < 8; ++sub) {
            for (int j = 0; j < 32; ++j)
                s.q[32 * sub + j] = kIq4nlValues[nibble(b.qs + 16 * sub, j)];
            const int ls = ((b.scales_l[sub / 2] >> (4 * (sub % 2))) & 15) |
                           ((b.scales_h >> (2 * sub)) & 3) << 4;
            s.sc[2 * sub] = s.sc[2 * sub + 1] = static_cast<int16_t>(ls - 32);
            s.mn[2 * sub] = s.mn[2 * sub + 1] = 0;
        }
        s.d = fp16_to_f32(b.d);
        s.dmin = 0;
    }
};

template <typename Decode>
void dot_supers(TANDEM_DOT_TILE_PARAMS) {
    const int64_t nb = k / 256;
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * w_stride;
        float acc[kMaxTileCols] = {};
        Super s;
        for (int64_t i = 0; i < nb; ++i) {
            Decode::super(row + i * Decode::kBytes, s);
            for (int c = 0; c < n_cols; ++c) {
                // q8_K fields by byte offset (rows need not be aligned): d, qs[256], bsums[16]
                const uint8_t* y = a + c * a_stride + i * sizeof(kb::Q8K);
                const auto* qs = reinterpret_cast<const int8_t*>(y + offsetof(kb::Q8K, qs));
                float da;
                int16_t bsums[16];
                std::memcpy(&da, y + offsetof(kb::Q8K, d), 4);
                std::memcpy(bsums, y + offsetof(kb::Q8K, bsums), sizeof(bsums));
                int isum = 0, imin = 0;
                for (int j = 0; j < 16; ++j) {
                    int part = 0;
                    for (int l = 0; l < 16; ++l) part += s.q[16 * j + l] * qs[16 * j + l];
                    isum += s.sc[j] * part;
                    imin += s.mn[j] * bsums[j];
                }
                acc[c] += (s.d * da) * static_cast<float>(isum) -
                          (s.dmin * da) * static_cast<float>(imin);
            }
        }
        for (int c = 0; c < n_cols; ++c) out[c * out_stride + r] = acc[c];
    }
}

// ---------------------------------------------------------------- float weights

struct LoadF32 {
    static float at(const uint8_t* p, int64_t i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        return v;
    }
};
struct LoadF16 {
    static float at(const uint8_t* p, int64_t i) {
        return fp16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    }
};
struct LoadBf16 {
    static float at(const uint8_t* p, int64_t i) {
        return bf16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    }
};

// 16 running sums per (row, column) let the compiler vectorize without reassociating.
template <typename Load>
void dot_floats(TANDEM_DOT_TILE_PARAMS) {
    constexpr int kLanes = 16;
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * w_stride;
        for (int c = 0; c < n_cols; ++c) {
            const uint8_t* col = a + c * a_stride;
            float lanes[kLanes] = {};
            int64_t i = 0;
            for (; i + kLanes <= k; i += kLanes) {
                for (int l = 0; l < kLanes; ++l)
                    lanes[l] += Load::at(row, i + l) * Load::at(col, i + l);
            }
            float sum = 0;
            for (; i < k; ++i) sum += Load::at(row, i) * Load::at(col, i);
            for (float v : lanes) sum += v;
            out[c * out_stride + r] = sum;
        }
    }
}

// ---------------------------------------------------------------- types without a kernel yet

// The format table's scalar reference (exact, slow): keeps every table complete until the
// type gets a kernel of its own.
template <double (*kRefDot)(int64_t, const void*, const void*)>
void dot_reference(TANDEM_DOT_TILE_PARAMS) {
    for (int c = 0; c < n_cols; ++c) {
        for (int r = 0; r < n_rows; ++r) {
            out[c * out_stride + r] =
                static_cast<float>(kRefDot(k, w + r * w_stride, a + c * a_stride));
        }
    }
}

}  // namespace

void dot_f32(TANDEM_DOT_TILE_PARAMS) {
    dot_floats<LoadF32>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_f16(TANDEM_DOT_TILE_PARAMS) {
    dot_floats<LoadF16>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_bf16(TANDEM_DOT_TILE_PARAMS) {
    dot_floats<LoadBf16>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

#define TANDEM_PIECES(name, Decode, q8_1)                                                       \
    void dot_##name(TANDEM_DOT_TILE_PARAMS) {                                                   \
        dot_pieces<Decode, q8_1>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); \
    }
TANDEM_PIECES(q4_0, DecodeQ4_0, false)
TANDEM_PIECES(q4_1, DecodeQ4_1, true)
TANDEM_PIECES(q5_0, DecodeQ5_0, false)
TANDEM_PIECES(q5_1, DecodeQ5_1, true)
TANDEM_PIECES(q8_0, DecodeQ8_0, false)
TANDEM_PIECES(iq4_nl, DecodeIq4Nl, false)
TANDEM_PIECES(mxfp4, DecodeMxfp4, false)
TANDEM_PIECES(nvfp4, DecodeNvfp4, false)
#undef TANDEM_PIECES

#define TANDEM_SUPERS(name, Decode)                                                       \
    void dot_##name(TANDEM_DOT_TILE_PARAMS) {                                             \
        dot_supers<Decode>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); \
    }
TANDEM_SUPERS(q2_K, DecodeQ2K)
TANDEM_SUPERS(q3_K, DecodeQ3K)
TANDEM_SUPERS(q4_K, DecodeQ45K<false>)
TANDEM_SUPERS(q5_K, DecodeQ45K<true>)
TANDEM_SUPERS(q6_K, DecodeQ6K)
TANDEM_SUPERS(iq4_xs, DecodeIq4Xs)
#undef TANDEM_SUPERS

#define TANDEM_REFERENCE(name)                                                           \
    void dot_##name(TANDEM_DOT_TILE_PARAMS) {                                            \
        dot_reference<&ref_dot_##name>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, \
                                       out_stride);                                      \
    }
TANDEM_REFERENCE(iq2_xxs)
TANDEM_REFERENCE(iq2_xs)
TANDEM_REFERENCE(iq2_s)
TANDEM_REFERENCE(iq3_xxs)
TANDEM_REFERENCE(iq3_s)
TANDEM_REFERENCE(iq1_s)
TANDEM_REFERENCE(iq1_m)
TANDEM_REFERENCE(tq1_0)
TANDEM_REFERENCE(tq2_0)
TANDEM_REFERENCE(q1_0)
TANDEM_REFERENCE(q2_0)
#undef TANDEM_REFERENCE

}  // namespace tandem::kernels_baseline
