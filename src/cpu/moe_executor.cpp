// The CPU MoE executor.
#include "cpu/moe_executor.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

void spin_until(const std::atomic<int64_t>& counter, int64_t target) {
    while (counter.load(std::memory_order_acquire) < target) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Calls the tile kernel over up to kMaxTileCols activation rows at a time.
void tile(DotTileFn dot, const WeightMatrix& w, int64_t r0, int64_t r1, const uint8_t* act,
          size_t act_bytes, int n_act, float* out, size_t out_stride) {
    for (int c0 = 0; c0 < n_act; c0 += kMaxTileCols) {
        int n = std::min(kMaxTileCols, n_act - c0);
        dot(w.cols, w.row(r0), w.row_bytes, static_cast<int>(r1 - r0), act + c0 * act_bytes,
            act_bytes, n, out + c0 * out_stride + r0, out_stride);
    }
}

}  // namespace

struct MoeExecutor::Plan {
    // The call.
    const MoeLayer* layer = nullptr;
    const float* hidden = nullptr;
    const Route* routes = nullptr;
    int n_tokens = 0;
    // Activation formats of this layer's dot products and their row sizes.
    GgmlType gate_format{}, up_format{}, down_format{};
    size_t gate_bytes = 0, up_bytes = 0, down_bytes = 0;
    bool separate_up_input = false;
    ActQuantizeFn quantize_gate = nullptr, quantize_up = nullptr, quantize_down = nullptr;
    DotTileFn dot_gate = nullptr, dot_up = nullptr, dot_down = nullptr;

    // Routes grouped by expert: slots [first[a], first[a] + count[a]) belong to active[a].
    std::vector<int> expert_count;   // per expert id
    std::vector<int> active, first, count;
    std::vector<int> slot_token;     // slot -> token
    std::vector<int> route_slot;     // token * top_k + j -> slot, or -1
    int n_slots = 0;
    int n_active = 0;

    // Tiles.
    int64_t ff_chunk = 0;
    int chunks_per_expert = 0;
    int64_t embd_chunk = 0;
    int64_t n_gate_up_items = 0, n_down_items = 0;

    // Buffers, sized at start-up.
    std::vector<uint8_t> in_gate, in_up;  // slots × activation row (gathered per expert)
    std::vector<float> mid_gate, mid_up;  // slots × n_ff; mid_gate ends up holding the activation
    std::vector<uint8_t> mid_q;           // slots × down activation row
    std::vector<float> y;                 // slots × n_embd
    std::vector<float> out;               // tokens × n_embd

    // Work counters.
    std::atomic<int64_t> next_input{0}, inputs_done{0};
    std::atomic<int64_t> next_gate_up{0};
    std::unique_ptr<std::atomic<int>[]> chunks_done;  // per active expert
    std::atomic<int64_t> experts_ready{0};
    std::atomic<int64_t> next_down{0};
};

MoeExecutor::MoeExecutor(std::vector<MoeLayer> layers, int max_tokens, int top_k, ThreadPool& pool)
    : layers_(std::move(layers)), max_tokens_(max_tokens), top_k_(top_k), pool_(pool), plan_(std::make_unique<Plan>()) {
    if (layers_.empty() || max_tokens <= 0 || top_k <= 0) fail("moe executor: nothing to execute");
    int max_expert = 0;
    int64_t max_embd = 0, max_ff = 0;
    size_t max_in = 0, max_mid = 0;
    for (const MoeLayer& l : layers_) {
        max_expert = std::max(max_expert, l.n_expert);
        max_embd = std::max(max_embd, l.n_embd);
        max_ff = std::max(max_ff, l.n_ff);
        max_in = std::max({max_in, row_bytes(l.gate.matrix.format->dot_type, l.n_embd),
                           row_bytes(l.up.matrix.format->dot_type, l.n_embd)});
        max_mid = std::max(max_mid, row_bytes(l.down.matrix.format->dot_type, l.n_ff));
    }
    Plan& p = *plan_;
    const size_t slots = static_cast<size_t>(max_tokens) * top_k;
    p.expert_count.assign(max_expert, 0);
    p.active.resize(max_expert);
    p.first.resize(max_expert);
    p.count.resize(max_expert);
    p.chunks_done = std::make_unique<std::atomic<int>[]>(max_expert);
    p.slot_token.resize(slots);
    p.route_slot.resize(slots);
    p.in_gate.resize(slots * max_in);
    p.in_up.resize(slots * max_in);
    p.mid_gate.resize(slots * max_ff);
    p.mid_up.resize(slots * max_ff);
    p.mid_q.resize(slots * max_mid);
    p.y.resize(slots * max_embd);
    p.out.resize(static_cast<size_t>(max_tokens) * max_embd);
}

MoeExecutor::~MoeExecutor() {
    if (pending_) pool_.wait();
}

void MoeExecutor::submit(int il, const float* hidden, int n_tokens, const Route* routes) {
    if (pending_) fail("moe executor: submit() while a layer is still running");
    if (il < 0 || il >= static_cast<int>(layers_.size())) fail("moe executor: no layer {}", il);
    if (n_tokens <= 0 || n_tokens > max_tokens_) {
        fail("moe executor: {} tokens, the executor was sized for 1..{}", n_tokens, max_tokens_);
    }
    Plan& p = *plan_;
    const MoeLayer& L = layers_[il];
    p.layer = &L;
    p.hidden = hidden;
    p.routes = routes;
    p.n_tokens = n_tokens;
    const KernelTable& k = kernels();
    p.gate_format = L.gate.matrix.format->dot_type;
    p.up_format = L.up.matrix.format->dot_type;
    p.down_format = L.down.matrix.format->dot_type;
    p.gate_bytes = row_bytes(p.gate_format, L.n_embd);
    p.up_bytes = row_bytes(p.up_format, L.n_embd);
    p.down_bytes = row_bytes(p.down_format, L.n_ff);
    p.separate_up_input = p.up_format != p.gate_format;
    p.quantize_gate = k.quantize[type_id(p.gate_format)];
    p.quantize_up = k.quantize[type_id(p.up_format)];
    p.quantize_down = k.quantize[type_id(p.down_format)];
    p.dot_gate = k.dot[type_id(L.gate.matrix.format->type)];
    p.dot_up = k.dot[type_id(L.up.matrix.format->type)];
    p.dot_down = k.dot[type_id(L.down.matrix.format->type)];
    if (!p.quantize_gate || !p.quantize_up || !p.quantize_down || !p.dot_gate || !p.dot_up || !p.dot_down) {
        fail("moe executor: layer {}: no {} kernel for experts of types {}/{}/{}", il, k.name,
             L.gate.matrix.format->name, L.up.matrix.format->name, L.down.matrix.format->name);
    }

    // Group routes by expert (a counting sort): slots of one expert are contiguous.
    std::fill(p.expert_count.begin(), p.expert_count.begin() + L.n_expert, 0);
    const int n_routes = n_tokens * top_k_;
    for (int r = 0; r < n_routes; ++r) {
        int e = routes[r].expert;
        if (e < -1 || e >= L.n_expert) fail("moe executor: layer {}: route to expert {} of {}", il, e, L.n_expert);
        if (e >= 0) ++p.expert_count[e];
    }
    // expert_count becomes expert -> active index once the expert's slots are placed.
    int n_active = 0, n_slots = 0;
    for (int e = 0; e < L.n_expert; ++e) {
        const int c = p.expert_count[e];
        if (c == 0) continue;
        p.active[n_active] = e;
        p.first[n_active] = n_slots;
        p.count[n_active] = 0;
        p.expert_count[e] = n_active++;
        n_slots += c;
    }
    p.n_slots = n_slots;
    p.n_active = n_active;
    for (int r = 0; r < n_routes; ++r) {
        const int e = routes[r].expert;
        if (e < 0) {
            p.route_slot[r] = -1;
            continue;
        }
        const int a = p.expert_count[e];
        const int sl = p.first[a] + p.count[a]++;
        p.route_slot[r] = sl;
        p.slot_token[sl] = r / top_k_;
    }

    // Tile sizes: several work items per thread so threads finish together.
    const int threads = pool_.size();
    if (n_active > 0) {
        const int64_t want = 8 * static_cast<int64_t>(threads);
        p.chunks_per_expert = static_cast<int>(std::clamp<int64_t>((want + n_active - 1) / n_active, 1,
                                                                   std::max<int64_t>(1, L.n_ff / 16)));
        p.ff_chunk = round_up((L.n_ff + p.chunks_per_expert - 1) / p.chunks_per_expert, 8);
        p.chunks_per_expert = static_cast<int>((L.n_ff + p.ff_chunk - 1) / p.ff_chunk);
        for (int a = 0; a < n_active; ++a) p.chunks_done[a].store(0, std::memory_order_relaxed);
    }
    p.n_gate_up_items = static_cast<int64_t>(n_active) * p.chunks_per_expert;
    p.embd_chunk = round_up(std::clamp<int64_t>(L.n_embd / (8 * threads), 8, 256), 8);
    p.n_down_items = (L.n_embd + p.embd_chunk - 1) / p.embd_chunk;

    p.next_input.store(0, std::memory_order_relaxed);
    p.inputs_done.store(0, std::memory_order_relaxed);
    p.next_gate_up.store(0, std::memory_order_relaxed);
    p.experts_ready.store(0, std::memory_order_relaxed);
    p.next_down.store(0, std::memory_order_relaxed);
    pending_ = true;
    pool_.start([this](int worker) { run_job(worker); });
}

const float* MoeExecutor::wait() {
    if (!pending_) fail("moe executor: wait() without submit()");
    pool_.wait();
    pending_ = false;
    return plan_->out.data();
}

void MoeExecutor::run_job(int worker) {
    Plan& p = *plan_;
    // Phase 0: quantize each token's hidden row once per activation format, into its slots.
    for (int64_t t; (t = p.next_input.fetch_add(1, std::memory_order_relaxed)) < p.n_tokens;) {
        prepare_inputs(t);
        p.inputs_done.fetch_add(1, std::memory_order_release);
    }
    spin_until(p.inputs_done, p.n_tokens);
    // Pass 1: gate, up and the activation, per (expert, rows) tile.
    for (int64_t i; (i = p.next_gate_up.fetch_add(1, std::memory_order_relaxed)) < p.n_gate_up_items;) {
        gate_up_tile(i, worker);
    }
    spin_until(p.experts_ready, p.n_active);
    // Pass 2: down and the weighted sum, per tile of output rows across all experts.
    for (int64_t i; (i = p.next_down.fetch_add(1, std::memory_order_relaxed)) < p.n_down_items;) {
        down_tile(i, worker);
    }
}

void MoeExecutor::prepare_inputs(int64_t t) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    const float* x = p.hidden + t * L.n_embd;
    int first_slot = -1;
    for (int j = 0; j < top_k_; ++j) {
        int s = p.route_slot[t * top_k_ + j];
        if (s < 0) continue;
        uint8_t* gate_dst = p.in_gate.data() + s * p.gate_bytes;
        uint8_t* up_dst = p.in_up.data() + s * p.up_bytes;
        if (first_slot < 0) {
            p.quantize_gate(x, gate_dst, L.n_embd);
            if (p.separate_up_input) p.quantize_up(x, up_dst, L.n_embd);
            first_slot = s;
        } else {
            std::memcpy(gate_dst, p.in_gate.data() + first_slot * p.gate_bytes, p.gate_bytes);
            if (p.separate_up_input) std::memcpy(up_dst, p.in_up.data() + first_slot * p.up_bytes, p.up_bytes);
        }
    }
}

void MoeExecutor::gate_up_tile(int64_t item, int) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    const int a = static_cast<int>(item / p.chunks_per_expert);
    const int64_t r0 = (item % p.chunks_per_expert) * p.ff_chunk;
    const int64_t r1 = std::min(L.n_ff, r0 + p.ff_chunk);
    const int e = p.active[a], s0 = p.first[a], n = p.count[a];
    const WeightMatrix gate = L.gate.expert(e), up = L.up.expert(e);
    const uint8_t* up_in = p.separate_up_input ? p.in_up.data() : p.in_gate.data();
    const size_t up_bytes = p.separate_up_input ? p.up_bytes : p.gate_bytes;
    float* g = p.mid_gate.data() + s0 * L.n_ff;
    float* u = p.mid_up.data() + s0 * L.n_ff;
    tile(p.dot_gate, gate, r0, r1, p.in_gate.data() + s0 * p.gate_bytes, p.gate_bytes, n, g, L.n_ff);
    tile(p.dot_up, up, r0, r1, up_in + s0 * up_bytes, up_bytes, n, u, L.n_ff);
    // Second-level scales and biases apply to each projection before the activation.
    const float* gate_bias = L.gate.expert_bias(e);
    const float* up_bias = L.up.expert_bias(e);
    for (int c = 0; c < n; ++c) {
        float* gc = g + c * L.n_ff;
        float* uc = u + c * L.n_ff;
        for (int64_t r = r0; r < r1; ++r) {
            float gv = gc[r] * gate.scale, uv = uc[r] * up.scale;
            if (gate_bias) gv += gate_bias[r];
            if (up_bias) uv += up_bias[r];
            gc[r] = gv;
            uc[r] = uv;
        }
        glu(L.activation, gc + r0, uc + r0, r1 - r0, gc + r0);
    }
    if (p.chunks_done[a].fetch_add(1, std::memory_order_acq_rel) + 1 == p.chunks_per_expert) finish_expert(a);
}

void MoeExecutor::finish_expert(int a) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    for (int c = 0; c < p.count[a]; ++c) {
        const int s = p.first[a] + c;
        p.quantize_down(p.mid_gate.data() + s * L.n_ff, p.mid_q.data() + s * p.down_bytes, L.n_ff);
    }
    p.experts_ready.fetch_add(1, std::memory_order_release);
}

void MoeExecutor::down_tile(int64_t item, int) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    const int64_t h0 = item * p.embd_chunk, h1 = std::min(L.n_embd, h0 + p.embd_chunk);
    for (int a = 0; a < p.n_active; ++a) {
        const int e = p.active[a], s0 = p.first[a], n = p.count[a];
        const WeightMatrix down = L.down.expert(e);
        float* y = p.y.data() + s0 * L.n_embd;
        tile(p.dot_down, down, h0, h1, p.mid_q.data() + s0 * p.down_bytes, p.down_bytes, n, y, L.n_embd);
        const float* bias = L.down.expert_bias(e);
        if (down.scale != 1.0f || bias != nullptr) {
            for (int c = 0; c < n; ++c) {
                float* yc = y + c * L.n_embd;
                for (int64_t h = h0; h < h1; ++h) yc[h] = yc[h] * down.scale + (bias ? bias[h] : 0.0f);
            }
        }
    }
    // out[t] = y[slot(t,0)]·w0 + y[slot(t,1)]·w1 + ..., summed in route order as llama.cpp does.
    for (int t = 0; t < p.n_tokens; ++t) {
        float* o = p.out.data() + static_cast<int64_t>(t) * L.n_embd;
        bool first = true;
        for (int j = 0; j < top_k_; ++j) {
            const int s = p.route_slot[t * top_k_ + j];
            if (s < 0) continue;
            const float w = p.routes[t * top_k_ + j].weight;
            const float* y = p.y.data() + static_cast<int64_t>(s) * L.n_embd;
            if (first) {
                for (int64_t h = h0; h < h1; ++h) o[h] = y[h] * w;
                first = false;
            } else {
                for (int64_t h = h0; h < h1; ++h) o[h] += y[h] * w;
            }
        }
        if (first) std::fill(o + h0, o + h1, 0.0f);
    }
}

}  // namespace tandem
