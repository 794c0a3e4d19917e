// The expert slot cache's kernels.
#include "cuda/expert_slots.h"

#include "cuda/check.h"

namespace tandem::cuda {
namespace {

constexpr int kAssignThreads = 256;
constexpr int kFillThreads = 256;
constexpr int kFillBlocksPerExpert = 64;

// One block: the routes' distinct experts in route order (thread 0: a deterministic order), the
// hits marked used in parallel, then each miss in turn (up to max_fetch of them) takes the slot of
// smallest (last_used, index) among those not used now, found by a block-wide minimum.
// cpu_routes == nullptr (offload): every miss takes a slot and the routes name slots. Otherwise
// (hybrid) the slots taken are for later calls: slot_routes names the hits' slots only and
// cpu_routes the misses' experts.
__global__ void assign_slots_kernel(const Route* routes, int n_routes, int layer, SlotTable t,
                                    int max_fetch, Route* slot_routes, Route* cpu_routes) {
    __shared__ int32_t distinct[kMaxSlotRoutes];
    __shared__ int32_t slot_for[kMaxSlotRoutes];
    __shared__ int n_distinct;
    __shared__ uint32_t now;
    __shared__ unsigned long long best;
    const int tid = threadIdx.x;
    if (tid == 0) {
        now = ++*t.clock;
        int n = 0;
        for (int j = 0; j < n_routes; ++j) {
            const int e = routes[j].expert;
            if (e < 0) continue;
            bool seen = false;
            for (int i = 0; i < n && !seen; ++i) seen = distinct[i] == e;
            if (!seen) distinct[n++] = e;
        }
        n_distinct = n;
        *t.n_fills = 0;
    }
    __syncthreads();
    const int64_t base = static_cast<int64_t>(layer) * t.n_expert;
    for (int i = tid; i < n_distinct; i += blockDim.x) {
        const int slot = t.slot_of[base + distinct[i]];
        slot_for[i] = slot;
        if (slot >= 0) t.last_used[slot] = now;
    }
    __syncthreads();
    int hits = 0;
    for (int i = 0; i < n_distinct; ++i) hits += slot_for[i] >= 0;
    int fetched = 0;
    for (int i = 0; i < n_distinct && fetched < max_fetch; ++i) {
        if (slot_for[i] >= 0) continue;
        ++fetched;
        if (tid == 0) best = ~0ull;
        __syncthreads();
        unsigned long long mine = ~0ull;
        for (int s = tid; s < t.n_slots; s += blockDim.x) {
            const uint32_t used = t.last_used[s];
            if (used == now) continue;
            const unsigned long long key = (static_cast<unsigned long long>(used) << 32) | s;
            mine = key < mine ? key : mine;
        }
        atomicMin(&best, mine);
        __syncthreads();
        if (best == ~0ull) break;  // every slot is in use by this call (hybrid's few slots)
        if (tid == 0) {
            const int victim = static_cast<int>(best & 0xffffffffu);
            const int old = t.owner[victim];
            if (old >= 0) t.slot_of[old] = -1;
            t.owner[victim] = static_cast<int32_t>(base + distinct[i]);
            t.slot_of[base + distinct[i]] = victim;
            t.last_used[victim] = now;
            // offload computes this miss in the slot now; hybrid on the CPU, the slot is for later.
            slot_for[i] = cpu_routes == nullptr ? victim : -2;
            const int f = (*t.n_fills)++;
            t.fill_slot[f] = victim;
            t.fill_expert[f] = distinct[i];
        }
        __syncthreads();
    }
    if (tid == 0) {
        t.counts[0] += hits;
        t.counts[1] += n_distinct - hits;
    }
    for (int j = tid; j < n_routes; j += blockDim.x) {
        const Route r = routes[j];
        int slot = -1;
        for (int i = 0; i < n_distinct && r.expert >= 0; ++i) {
            if (distinct[i] == r.expert) slot = slot_for[i];
        }
        slot_routes[j] = {slot >= 0 ? slot : -1, r.weight};
        if (cpu_routes != nullptr) cpu_routes[j] = {slot >= 0 ? -1 : r.expert, r.weight};
    }
}

// Blocks (x, f): fill f's parts, each split over kFillBlocksPerExpert blocks; 16-byte words where
// both ends allow, bytes otherwise.
__global__ void fill_slots_kernel(SlotLayer l, SlotTable t, SlotMemory m) {
    const int f = blockIdx.y;
    if (f >= *t.n_fills) return;
    const int slot = t.fill_slot[f], e = t.fill_expert[f];
    for (int p = 0; p < 3; ++p) {
        if (l.bytes[p] == 0) continue;
        const uint8_t* src = l.source[p] + e * l.stride[p];
        const int64_t slot_stride = m.part_stride[p] != 0 ? m.part_stride[p] : m.slot_bytes;
        uint8_t* dst = m.base + slot * slot_stride + l.offset[p];
        const int64_t n = l.bytes[p];
        const bool wide = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                            static_cast<uintptr_t>(n)) & 15) == 0;
        const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
        const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
        if (wide) {
            const uint4* s = reinterpret_cast<const uint4*>(src);
            uint4* d = reinterpret_cast<uint4*>(dst);
            for (int64_t i = first; i < n / 16; i += step) d[i] = s[i];
        } else {
            for (int64_t i = first; i < n; i += step) dst[i] = src[i];
        }
        if (blockIdx.x == 0 && threadIdx.x == 0 && l.scales[p] != nullptr)
            m.scales[p][slot] = l.scales[p][e];
        if (l.biases[p] != nullptr) {
            const float* b = l.biases[p] + e * l.bias_stride[p];
            float* d = m.biases[p] + slot * m.bias_stride[p];
            for (int64_t i = first; i < l.bias_rows[p]; i += step) d[i] = b[i];
        }
    }
}

// One block: each routed expert flagged, then listed in expert order by thread 0 (those with a
// slot in `slotted` where slot_of is given).
__global__ void list_routed_experts_kernel(const Route* routes, int n_routes, int n_expert,
                                           SlotTable t, const int32_t* slot_of,
                                           SlotTable slotted) {
    extern __shared__ int32_t routed[];  // [n_expert]
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) routed[e] = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < n_routes; j += blockDim.x) {
        const int e = routes[j].expert;
        if (e >= 0 && e < n_expert) routed[e] = 1;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    int n = 0, n_slotted = 0;
    for (int e = 0; e < n_expert; ++e) {
        if (!routed[e]) continue;
        const int slot = slot_of != nullptr ? slot_of[e] : -1;
        if (slot >= 0) {
            slotted.fill_slot[n_slotted] = e;
            slotted.fill_expert[n_slotted] = slot;
            ++n_slotted;
            continue;
        }
        t.fill_slot[n] = e;
        t.fill_expert[n] = e;
        ++n;
    }
    *t.n_fills = n;
    if (slot_of != nullptr) *slotted.n_fills = n_slotted;
}

}  // namespace

void list_routed_experts(const Route* routes, int n_routes, int n_expert, const SlotTable& list,
                         cudaStream_t stream, const int32_t* slot_of, const SlotTable* slotted) {
    list_routed_experts_kernel<<<1, kAssignThreads, sizeof(int32_t) * n_expert, stream>>>(
        routes, n_routes, n_expert, list, slotted != nullptr ? slot_of : nullptr,
        slotted != nullptr ? *slotted : SlotTable{});
    check_launch("list_routed_experts");
}

void assign_slots(const Route* routes, int n_routes, int layer, const SlotTable& table,
                  Route* slot_routes, cudaStream_t stream) {
    assign_slots_kernel<<<1, kAssignThreads, 0, stream>>>(routes, n_routes, layer, table,
                                                          kMaxSlotRoutes, slot_routes, nullptr);
    check_launch("assign_slots");
}

void split_slot_routes(const Route* routes, int n_routes, int layer, const SlotTable& table,
                       int max_fetch, Route* slot_routes, Route* cpu_routes, cudaStream_t stream) {
    assign_slots_kernel<<<1, kAssignThreads, 0, stream>>>(routes, n_routes, layer, table,
                                                          max_fetch, slot_routes, cpu_routes);
    check_launch("split_slot_routes");
}

void fill_slots(const SlotLayer& layer, const SlotTable& table, const SlotMemory& memory,
                int max_fills, cudaStream_t stream) {
    if (max_fills <= 0) return;
    const dim3 grid(kFillBlocksPerExpert, max_fills);
    fill_slots_kernel<<<grid, kFillThreads, 0, stream>>>(layer, table, memory);
    check_launch("fill_slots");
}

}  // namespace tandem::cuda
