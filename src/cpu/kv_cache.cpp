// The key/value cache.
#include "cpu/kv_cache.h"

#include <cstring>

#include "base/error.h"
#include "formats/float16.h"

namespace tandem {

KvCache::KvCache(const KvShape& shape, KvType type) : shape_(shape), type_(type) {
    if (shape.n_layer <= 0 || shape.n_seq <= 0 || shape.n_ctx <= 0 || shape.n_kv_head <= 0 ||
        shape.head_dim_k <= 0 || shape.head_dim_v <= 0) {
        fail("kv cache: invalid shape");
    }
    const size_t positions = static_cast<size_t>(shape.n_layer) * shape.n_seq * shape.n_ctx;
    try {
        k_.resize(positions * k_position_bytes());
        if (!shape.values_in_keys) {
            v_.resize(positions * static_cast<size_t>(shape.n_kv_head) * shape.head_dim_v * value_bytes());
        }
    } catch (const std::bad_alloc&) {
        fail("kv cache: cannot allocate {} MiB for {} positions x {} sequences (lower --ctx)",
             (positions * static_cast<size_t>(shape.n_kv_head) *
              (shape.head_dim_k + shape.head_dim_v) * value_bytes()) >>
                 20,
             shape.n_ctx, shape.n_seq);
    }
}

namespace {
void store(uint8_t* dst, const float* values, size_t n, KvType type) {
    if (type == KvType::kF32) {
        std::memcpy(dst, values, n * 4);
        return;
    }
    uint16_t* h = reinterpret_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) h[i] = f32_to_fp16(values[i]);
}
}  // namespace

void KvCache::store_k(int layer, int seq, int pos, const float* values) {
    store(k(layer, seq, slot(pos)), values, static_cast<size_t>(shape_.n_kv_head) * shape_.head_dim_k,
          type_);
}

void KvCache::store_v(int layer, int seq, int pos, const float* values) {
    if (shape_.values_in_keys) return;
    // Transposed: value d of a head goes to row d of that head, column pos.
    for (int h = 0; h < shape_.n_kv_head; ++h) {
        uint8_t* base =
            v_.data() + v_offset(layer, seq, h) + static_cast<size_t>(slot(pos)) * value_bytes();
        const float* x = values + static_cast<size_t>(h) * shape_.head_dim_v;
        for (int d = 0; d < shape_.head_dim_v; ++d)
            store(base + d * v_row_bytes(), x + d, 1, type_);
    }
}

size_t KvCache::sequence_bytes(int n_slots) const {
    const size_t v_position = shape_.values_in_keys ? 0
                                                    : static_cast<size_t>(shape_.n_kv_head) *
                                                          shape_.head_dim_v * value_bytes();
    return static_cast<size_t>(shape_.n_layer) * n_slots * (k_position_bytes() + v_position);
}

// Keys are stored by slot, so a sequence's first n slots are one run per layer; values are
// transposed, so they are n values at the start of every (head, dimension) row.
void KvCache::save_sequence(int seq, int n_slots, uint8_t* out) const {
    const size_t k_run = static_cast<size_t>(n_slots) * k_position_bytes();
    const size_t v_run = static_cast<size_t>(n_slots) * value_bytes();
    for (int layer = 0; layer < shape_.n_layer; ++layer) {
        std::memcpy(out, k(layer, seq, 0), k_run);
        out += k_run;
        if (shape_.values_in_keys) continue;
        for (int h = 0; h < shape_.n_kv_head; ++h) {
            const uint8_t* rows = v_head(layer, seq, h);
            for (int d = 0; d < shape_.head_dim_v; ++d, out += v_run)
                std::memcpy(out, rows + d * v_row_bytes(), v_run);
        }
    }
}

void KvCache::load_sequence(int seq, int n_slots, const uint8_t* in) {
    const size_t k_run = static_cast<size_t>(n_slots) * k_position_bytes();
    const size_t v_run = static_cast<size_t>(n_slots) * value_bytes();
    for (int layer = 0; layer < shape_.n_layer; ++layer) {
        std::memcpy(k(layer, seq, 0), in, k_run);
        in += k_run;
        if (shape_.values_in_keys) continue;
        for (int h = 0; h < shape_.n_kv_head; ++h) {
            uint8_t* rows = v_.data() + v_offset(layer, seq, h);
            for (int d = 0; d < shape_.head_dim_v; ++d, in += v_run)
                std::memcpy(rows + d * v_row_bytes(), in, v_run);
        }
    }
}

}  // namespace tandem
