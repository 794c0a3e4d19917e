// The CPU MoE executor.
//
// One job per layer over the thread pool, with a single queue of work items claimed from one
// counter:
//   pass 1, per (expert, block of FFN rows): gate and up tiles and the activation; the thread
//     that finishes an expert's last block quantizes its intermediate rows for the down format
//     and marks the expert ready;
//   pass 2, per (block of output rows, expert), block-major: down tiles into per-slot rows; the
//     thread that finishes a block's last expert sums that block for every token in route order.
// Pass-2 items wait only for their own expert, so threads flow from pass 1 into pass 2 without a
// barrier (the tail of pass 1 hides behind down work of ready experts), and every item streams
// one long run of weight rows (few restarts for the hardware prefetchers).
#include "cpu/moe_executor.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

// Work items per thread and pass: enough that threads finish together (the last item of a
// pass is the only imbalance), few enough that each item streams a long run of rows.
constexpr int64_t kItemsPerThread = 8;
// Row blocks are multiples of 16 values: 64-byte lines of f32 outputs are never shared by two
// threads.
constexpr int64_t kRowAlign = 16;
// Multiply-adds of one block's weighted sum (done by one thread): bounds that serial step in
// large batches.
constexpr int64_t kSumWork = 1 << 16;
// Weight bytes a tile with many columns keeps in L2 while it runs through the column groups.
constexpr size_t kTileBlockBytes = 64 << 10;

int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}
int64_t ceil_div(int64_t x, int64_t m) {
    return (x + m - 1) / m;
}

// Rows [r0, r1) of w times n_act activation rows. Up to kMaxTileCols columns go to the kernel in
// one call (the weights are read once); with more, rows go in blocks that stay in L2 while the
// column groups run over them.
void tile(DotTileFn dot, const WeightMatrix& w, int64_t r0, int64_t r1, const uint8_t* act,
          size_t act_bytes, int n_act, float* out, size_t out_stride) {
    const int64_t block =
        n_act <= kMaxTileCols
            ? r1 - r0
            : std::max<int64_t>(kRowAlign, static_cast<int64_t>(kTileBlockBytes / w.row_bytes));
    for (int64_t b0 = r0; b0 < r1; b0 += block) {
        const int64_t b1 = std::min(r1, b0 + block);
        for (int c0 = 0; c0 < n_act; c0 += kMaxTileCols) {
            const int n = std::min(kMaxTileCols, n_act - c0);
            dot(w.cols, w.row(b0), w.row_bytes, static_cast<int>(b1 - b0), act + c0 * act_bytes,
                act_bytes, n, out + c0 * out_stride + b0, out_stride);
        }
    }
}

// A counter alone on its cache line: the claim counter is written by every thread on every
// item and must not share a line with flags other threads spin on.
struct alignas(64) PaddedCounter {
    std::atomic<int64_t> value{0};
};

}  // namespace

struct MoeExecutor::Plan {
    // The call.
    const MoeLayer* layer = nullptr;
    const float* hidden = nullptr;
    const Route* routes = nullptr;
    int n_tokens = 0;
    // Activation formats of this layer's dot products and their row sizes.
    size_t gate_bytes = 0, up_bytes = 0, down_bytes = 0;
    bool separate_up_input = false;
    ActQuantizeFn quantize_gate = nullptr, quantize_up = nullptr, quantize_down = nullptr;
    DotTileFn dot_gate = nullptr, dot_up = nullptr, dot_down = nullptr;

    // Routes grouped by expert: slots [first[a], first[a] + count[a]) belong to active[a].
    std::vector<int> expert_count;  // per expert id
    std::vector<int> active, first, count;
    std::vector<int> slot_token;  // slot -> token
    std::vector<int> route_slot;  // token * top_k + j -> slot, or -1
    int n_slots = 0;
    int n_active = 0;

    // Work items: [0, n_pass1) pass 1, then n_blocks * n_active pass-2 items.
    int64_t ff_block = 0;    // FFN rows per pass-1 item
    int ff_blocks = 0;       // pass-1 items per expert
    int64_t embd_block = 0;  // output rows per pass-2 block
    int n_blocks = 0;
    int64_t n_pass1 = 0, n_items = 0;
    bool parallel_inputs = false;  // phase 0 in the job (large batches) or in submit()

    // Buffers, sized at start-up.
    std::vector<uint8_t> in_gate, in_up;  // slots × activation row (gathered per expert)
    std::vector<float> mid_gate, mid_up;  // slots × n_ff; mid_gate ends up holding the activation
    std::vector<uint8_t> mid_q;           // slots × down activation row
    std::vector<float> y;                 // slots × n_embd
    std::vector<float> out;               // tokens × n_embd

    // Progress.
    PaddedCounter next_item, next_input, inputs_done;
    std::unique_ptr<std::atomic<int>[]> blocks_done;   // per active expert: pass-1 items done
    std::unique_ptr<std::atomic<int>[]> ready;         // per active expert: intermediate quantized
    std::unique_ptr<std::atomic<int>[]> experts_done;  // per pass-2 block: experts done
};

MoeExecutor::MoeExecutor(std::vector<MoeLayer> layers, int max_tokens, int top_k, ThreadPool& pool)
    : layers_(std::move(layers)),
      max_tokens_(max_tokens),
      top_k_(top_k),
      pool_(pool),
      plan_(std::make_unique<Plan>()) {
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
    p.blocks_done = std::make_unique<std::atomic<int>[]>(max_expert);
    p.ready = std::make_unique<std::atomic<int>[]>(max_expert);
    p.experts_done = std::make_unique<std::atomic<int>[]>(ceil_div(max_embd, kRowAlign));
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
    if (pending_ && job_running_) pool_.wait();
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
    const GgmlType gate_format = L.gate.matrix.format->dot_type;
    const GgmlType up_format = L.up.matrix.format->dot_type;
    const GgmlType down_format = L.down.matrix.format->dot_type;
    p.gate_bytes = row_bytes(gate_format, L.n_embd);
    p.up_bytes = row_bytes(up_format, L.n_embd);
    p.down_bytes = row_bytes(down_format, L.n_ff);
    p.separate_up_input = up_format != gate_format;
    p.quantize_gate = k.quantize[type_id(gate_format)];
    p.quantize_up = k.quantize[type_id(up_format)];
    p.quantize_down = k.quantize[type_id(down_format)];
    p.dot_gate = k.dot[type_id(L.gate.matrix.format->type)];
    p.dot_up = k.dot[type_id(L.up.matrix.format->type)];
    p.dot_down = k.dot[type_id(L.down.matrix.format->type)];
    if (!p.quantize_gate || !p.quantize_up || !p.quantize_down || !p.dot_gate || !p.dot_up ||
        !p.dot_down) {
        fail("moe executor: layer {}: no {} kernel for experts of types {}/{}/{}", il, k.name,
             L.gate.matrix.format->name, L.up.matrix.format->name, L.down.matrix.format->name);
    }

    // Group routes by expert (a counting sort): slots of one expert are contiguous.
    std::fill(p.expert_count.begin(), p.expert_count.begin() + L.n_expert, 0);
    const int n_routes = n_tokens * top_k_;
    for (int r = 0; r < n_routes; ++r) {
        int e = routes[r].expert;
        if (e < -1 || e >= L.n_expert)
            fail("moe executor: layer {}: route to expert {} of {}", il, e, L.n_expert);
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
    pending_ = true;
    if (n_active == 0) {
        // Every route is taken elsewhere: the output is zero and there is nothing to run.
        std::fill(p.out.begin(), p.out.begin() + static_cast<int64_t>(n_tokens) * L.n_embd, 0.0f);
        job_running_ = false;
        return;
    }

    // Work items. Pass 1: ff_blocks per expert. Pass 2: n_blocks blocks of output rows, each
    // small enough that its weighted sum (one thread) stays short.
    const int64_t want = kItemsPerThread * pool_.size();
    p.ff_blocks = static_cast<int>(
        std::clamp<int64_t>(ceil_div(want, n_active), 1, std::max<int64_t>(1, L.n_ff / kRowAlign)));
    p.ff_block = round_up(ceil_div(L.n_ff, p.ff_blocks), kRowAlign);
    p.ff_blocks = static_cast<int>(ceil_div(L.n_ff, p.ff_block));
    const int64_t sum_blocks =
        ceil_div(static_cast<int64_t>(n_tokens) * top_k_ * L.n_embd, kSumWork);
    const int64_t blocks = std::clamp<int64_t>(std::max(ceil_div(want, n_active), sum_blocks), 1,
                                               std::max<int64_t>(1, L.n_embd / kRowAlign));
    p.embd_block = round_up(ceil_div(L.n_embd, blocks), kRowAlign);
    p.n_blocks = static_cast<int>(ceil_div(L.n_embd, p.embd_block));
    p.n_pass1 = static_cast<int64_t>(n_active) * p.ff_blocks;
    p.n_items = p.n_pass1 + static_cast<int64_t>(p.n_blocks) * n_active;
    for (int a = 0; a < n_active; ++a) {
        p.blocks_done[a].store(0, std::memory_order_relaxed);
        p.ready[a].store(0, std::memory_order_relaxed);
    }
    for (int b = 0; b < p.n_blocks; ++b) p.experts_done[b].store(0, std::memory_order_relaxed);
    p.next_item.value.store(0, std::memory_order_relaxed);
    p.next_input.value.store(0, std::memory_order_relaxed);
    p.inputs_done.value.store(0, std::memory_order_relaxed);

    // Phase 0 (a few rows): quantized here, so the job starts straight into pass 1.
    p.parallel_inputs = n_tokens > pool_.size();
    if (!p.parallel_inputs) {
        for (int t = 0; t < n_tokens; ++t) prepare_inputs(t);
    }
    job_running_ = true;
    pool_.start([this](int worker) { run_job(worker); });
}

const float* MoeExecutor::wait() {
    if (!pending_) fail("moe executor: wait() without submit()");
    if (job_running_) pool_.wait();
    pending_ = false;
    job_running_ = false;
    return plan_->out.data();
}

void MoeExecutor::run_job(int worker) {
    Plan& p = *plan_;
    if (p.parallel_inputs) {
        // Phase 0: each token's hidden row quantized once per activation format, into its slots.
        for (int64_t t;
             (t = p.next_input.value.fetch_add(1, std::memory_order_relaxed)) < p.n_tokens;) {
            prepare_inputs(t);
            p.inputs_done.value.fetch_add(1, std::memory_order_release);
        }
        spin_until(
            [&] { return p.inputs_done.value.load(std::memory_order_acquire) >= p.n_tokens; });
    }
    for (int64_t i; (i = p.next_item.value.fetch_add(1, std::memory_order_relaxed)) < p.n_items;) {
        if (i < p.n_pass1) {
            gate_up_item(i, worker);
        } else {
            const int64_t j = i - p.n_pass1;
            down_item(static_cast<int>(j / p.n_active), static_cast<int>(j % p.n_active), worker);
        }
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
            if (p.separate_up_input)
                std::memcpy(up_dst, p.in_up.data() + first_slot * p.up_bytes, p.up_bytes);
        }
    }
}

void MoeExecutor::gate_up_item(int64_t item, int) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    const int a = static_cast<int>(item / p.ff_blocks);
    const int64_t r0 = (item % p.ff_blocks) * p.ff_block;
    const int64_t r1 = std::min(L.n_ff, r0 + p.ff_block);
    const int e = p.active[a], s0 = p.first[a], n = p.count[a];
    const WeightMatrix gate = L.gate.expert(e), up = L.up.expert(e);
    const uint8_t* up_in = p.separate_up_input ? p.in_up.data() : p.in_gate.data();
    const size_t up_bytes = p.separate_up_input ? p.up_bytes : p.gate_bytes;
    float* g = p.mid_gate.data() + s0 * L.n_ff;
    float* u = p.mid_up.data() + s0 * L.n_ff;
    tile(p.dot_gate, gate, r0, r1, p.in_gate.data() + s0 * p.gate_bytes, p.gate_bytes, n, g,
         L.n_ff);
    tile(p.dot_up, up, r0, r1, up_in + s0 * up_bytes, up_bytes, n, u, L.n_ff);
    // Second-level scales and biases apply to each projection before the activation.
    const float* gate_bias = L.gate.expert_bias(e);
    const float* up_bias = L.up.expert_bias(e);
    const bool adjust =
        gate.scale != 1.0f || up.scale != 1.0f || gate_bias != nullptr || up_bias != nullptr;
    for (int c = 0; c < n; ++c) {
        float* gc = g + c * L.n_ff;
        float* uc = u + c * L.n_ff;
        if (adjust) {
            for (int64_t r = r0; r < r1; ++r) {
                float gv = gc[r] * gate.scale, uv = uc[r] * up.scale;
                if (gate_bias) gv += gate_bias[r];
                if (up_bias) uv += up_bias[r];
                gc[r] = gv;
                uc[r] = uv;
            }
        }
        glu(L.activation, gc + r0, uc + r0, r1 - r0, gc + r0);
    }
    if (p.blocks_done[a].fetch_add(1, std::memory_order_acq_rel) + 1 == p.ff_blocks)
        finish_expert(a);
}

void MoeExecutor::finish_expert(int a) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    for (int c = 0; c < p.count[a]; ++c) {
        const int s = p.first[a] + c;
        p.quantize_down(p.mid_gate.data() + s * L.n_ff, p.mid_q.data() + s * p.down_bytes, L.n_ff);
    }
    p.ready[a].store(1, std::memory_order_release);
}

void MoeExecutor::down_item(int block, int a, int) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
    const int64_t h0 = block * p.embd_block, h1 = std::min(L.n_embd, h0 + p.embd_block);
    // Items are claimed in order, so every pass-1 item of this expert is already running.
    spin_until([&] { return p.ready[a].load(std::memory_order_acquire) != 0; });
    const int e = p.active[a], s0 = p.first[a], n = p.count[a];
    const WeightMatrix down = L.down.expert(e);
    float* y = p.y.data() + s0 * L.n_embd;
    tile(p.dot_down, down, h0, h1, p.mid_q.data() + s0 * p.down_bytes, p.down_bytes, n, y,
         L.n_embd);
    const float* bias = L.down.expert_bias(e);
    if (down.scale != 1.0f || bias != nullptr) {
        for (int c = 0; c < n; ++c) {
            float* yc = y + c * L.n_embd;
            for (int64_t h = h0; h < h1; ++h) yc[h] = yc[h] * down.scale + (bias ? bias[h] : 0.0f);
        }
    }
    if (p.experts_done[block].fetch_add(1, std::memory_order_acq_rel) + 1 == p.n_active)
        weighted_sum(h0, h1);
}

namespace {

// o[h] = y[h] · w (kAdd: o[h] += y[h] · w) for h in [h0, h1), four at a time in the compiler's
// vector type (the -O2 this is built with leaves loops of a run-time length scalar); each value
// gets the same two operations either way.
template <bool kAdd>
void scaled_rows(float* __restrict o, const float* __restrict y, float w, int64_t h0, int64_t h1) {
    typedef float Vec4 __attribute__((vector_size(16)));
    int64_t h = h0;
    for (; h + 4 <= h1; h += 4) {
        Vec4 a, b;
        __builtin_memcpy(&b, y + h, sizeof b);
        if constexpr (kAdd) {
            __builtin_memcpy(&a, o + h, sizeof a);
            a += b * w;
        } else {
            a = b * w;
        }
        __builtin_memcpy(o + h, &a, sizeof a);
    }
    for (; h < h1; ++h) o[h] = kAdd ? o[h] + y[h] * w : y[h] * w;
}

}  // namespace

void MoeExecutor::weighted_sum(int64_t h0, int64_t h1) {
    Plan& p = *plan_;
    const MoeLayer& L = *p.layer;
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
                scaled_rows<false>(o, y, w, h0, h1);
                first = false;
            } else {
                scaled_rows<true>(o, y, w, h0, h1);
            }
        }
        if (first) std::fill(o + h0, o + h1, 0.0f);
    }
}

}  // namespace tandem
