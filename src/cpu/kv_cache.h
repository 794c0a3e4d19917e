// The key/value cache: for every layer, sequence slot and position, the keys and values of all
// KV heads, stored as f16 (llama.cpp's default) or f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem {

enum class KvType { kF16, kF32 };

struct KvShape {
    int n_layer = 0;
    int n_seq = 1;     // independent sequences (server slots)
    int n_ctx = 0;     // positions per sequence
    int n_kv_head = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
};

class KvCache {
public:
    KvCache(const KvShape& shape, KvType type);

    const KvShape& shape() const { return shape_; }
    KvType type() const { return type_; }
    size_t bytes() const { return k_.size() + v_.size(); }
    size_t value_bytes() const { return type_ == KvType::kF16 ? 2 : 4; }

    // All KV heads of one position: n_kv_head × head_dim values.
    uint8_t* k(int layer, int seq, int pos) { return k_.data() + offset(layer, seq, pos, shape_.head_dim_k); }
    uint8_t* v(int layer, int seq, int pos) { return v_.data() + offset(layer, seq, pos, shape_.head_dim_v); }
    const uint8_t* k(int layer, int seq, int pos) const { return k_.data() + offset(layer, seq, pos, shape_.head_dim_k); }
    const uint8_t* v(int layer, int seq, int pos) const { return v_.data() + offset(layer, seq, pos, shape_.head_dim_v); }
    size_t k_position_bytes() const { return static_cast<size_t>(shape_.n_kv_head) * shape_.head_dim_k * value_bytes(); }
    size_t v_position_bytes() const { return static_cast<size_t>(shape_.n_kv_head) * shape_.head_dim_v * value_bytes(); }

    // Stores n_kv_head × head_dim f32 values, converted to the cache type.
    void store_k(int layer, int seq, int pos, const float* values);
    void store_v(int layer, int seq, int pos, const float* values);

private:
    size_t offset(int layer, int seq, int pos, int head_dim) const {
        size_t per_pos = static_cast<size_t>(shape_.n_kv_head) * head_dim * value_bytes();
        return ((static_cast<size_t>(layer) * shape_.n_seq + seq) * shape_.n_ctx + pos) * per_pos;
    }
    KvShape shape_;
    KvType type_;
    std::vector<uint8_t> k_, v_;
};

}  // namespace tandem
