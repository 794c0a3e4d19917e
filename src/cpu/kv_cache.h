// The key/value cache: for every layer, sequence slot and position, the keys and values of all
// KV heads, stored as f16 (llama.cpp's default) or f32. Keys are stored by position (a key is
// a row of the q·K dot products); values transposed, per KV head one row of positions per
// dimension (a row of the softmax·V dot products), as llama.cpp's cache without flash attention.
// A cache of n_ctx positions per sequence keeps position p in slot p mod n_ctx: the identity when
// the whole context fits, a ring that keeps the last n_ctx positions for a sliding window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem {

enum class KvType { kF16, kF32 };

struct KvShape {
    int n_layer = 0;
    int n_seq = 1;  // independent sequences (server slots)
    int n_ctx = 0;  // positions (slots) per sequence
    int n_kv_head = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    // The values are the first head_dim_v values of each key (multi-head latent attention): no
    // value cache is kept.
    bool values_in_keys = false;
};

class KvCache {
  public:
    KvCache(const KvShape& shape, KvType type);

    const KvShape& shape() const { return shape_; }
    KvType type() const { return type_; }
    size_t bytes() const { return k_.size() + v_.size(); }
    size_t value_bytes() const { return type_ == KvType::kF16 ? 2 : 4; }

    // The slot of position pos.
    int slot(int pos) const { return pos % shape_.n_ctx; }
    // All KV heads of one slot: n_kv_head × head_dim_k values.
    uint8_t* k(int layer, int seq, int slot) { return k_.data() + k_offset(layer, seq, slot); }
    const uint8_t* k(int layer, int seq, int slot) const {
        return k_.data() + k_offset(layer, seq, slot);
    }
    // The keys of one KV head: slot j at k_head(...) + j * k_position_bytes().
    const uint8_t* k_head(int layer, int seq, int kv_head) const {
        return k(layer, seq, 0) + static_cast<size_t>(kv_head) * shape_.head_dim_k * value_bytes();
    }
    size_t k_position_bytes() const {
        return static_cast<size_t>(shape_.n_kv_head) * shape_.head_dim_k * value_bytes();
    }
    // The values of one KV head, transposed: dimension d of slot j at
    // v_head(...) + d * v_row_bytes() + j * value_bytes().
    const uint8_t* v_head(int layer, int seq, int kv_head) const {
        return v_.data() + v_offset(layer, seq, kv_head);
    }
    size_t v_row_bytes() const { return static_cast<size_t>(shape_.n_ctx) * value_bytes(); }
    // Stores n_kv_head × head_dim f32 values of position pos (in its slot), converted to the
    // cache type (store_v does nothing when the values are in the keys).
    void store_k(int layer, int seq, int pos, const float* values);
    void store_v(int layer, int seq, int pos, const float* values);

    // A copy of one sequence's first n slots, every layer, keys then values (the prefix cache
    // keeps finished sequences in host memory): sequence_bytes(n) bytes, which load_sequence()
    // writes back into any sequence of a cache of the same shape and type.
    size_t sequence_bytes(int n_slots) const;
    void save_sequence(int seq, int n_slots, uint8_t* out) const;
    void load_sequence(int seq, int n_slots, const uint8_t* in);

  private:
    size_t k_offset(int layer, int seq, int pos) const {
        return ((static_cast<size_t>(layer) * shape_.n_seq + seq) * shape_.n_ctx + pos) *
               k_position_bytes();
    }
    size_t v_offset(int layer, int seq, int kv_head) const {
        return ((static_cast<size_t>(layer) * shape_.n_seq + seq) * shape_.n_kv_head + kv_head) *
               shape_.head_dim_v * v_row_bytes();
    }
    KvShape shape_;
    KvType type_;
    std::vector<uint8_t> k_, v_;
};

}  // namespace tandem
