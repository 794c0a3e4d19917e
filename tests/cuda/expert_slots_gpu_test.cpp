// The expert slot cache's device kernels (the offload strategy): which slot each routed expert
// gets (hits keep theirs, misses take the least recently used one), the routes rewritten to name
// slots, the hit and miss counts, and the copies of missed experts from mapped host memory.
#include "cuda/expert_slots.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/memory.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"

namespace tandem {
namespace {

using testing::DeviceArray;

// One table of n_slots slots over n_layer layers of n_expert experts, on the device.
struct TestTable {
    TestTable(int n_layer, int n_expert, int n_slots)
        : slot_of(std::vector<int32_t>(n_layer * n_expert, -1)),
          owner(std::vector<int32_t>(n_slots, -1)),
          last_used(std::vector<uint32_t>(n_slots, 0)),
          clock(std::vector<uint32_t>(1, 0)),
          fill_slot(cuda::kMaxSlotRoutes),
          fill_expert(cuda::kMaxSlotRoutes),
          n_fills(std::vector<int32_t>(1, 0)),
          counts(std::vector<uint64_t>(2, 0)) {
        t.slot_of = slot_of.get();
        t.owner = owner.get();
        t.last_used = last_used.get();
        t.clock = clock.get();
        t.fill_slot = fill_slot.get();
        t.fill_expert = fill_expert.get();
        t.n_fills = n_fills.get();
        t.counts = counts.get();
        t.n_slots = n_slots;
        t.n_expert = n_expert;
    }
    DeviceArray<int32_t> slot_of, owner;
    DeviceArray<uint32_t> last_used, clock;
    DeviceArray<int32_t> fill_slot, fill_expert, n_fills;
    DeviceArray<uint64_t> counts;
    cuda::SlotTable t;
};

// Assigns slots to `experts` (routes of weight 1) of `layer`; returns the slots the routes name.
std::vector<int32_t> assign(TestTable& table, int layer, const std::vector<int32_t>& experts,
                            cudaStream_t stream) {
    std::vector<Route> routes;
    for (int32_t e : experts) routes.push_back({e, 1.0f});
    DeviceArray<Route> in(routes), out(routes.size());
    cuda::assign_slots(in.get(), static_cast<int>(routes.size()), layer, table.t, out.get(), stream);
    std::vector<int32_t> slots;
    for (const Route& r : out.download()) {
        EXPECT_EQ(r.weight, 1.0f);
        slots.push_back(r.expert);
    }
    return slots;
}

TEST(GpuExpertSlots, LeastRecentlyUsedSlotGivesWay) {
    TANDEM_REQUIRE_GPU();
    cuda::Stream stream;
    TestTable table(/*n_layer=*/2, /*n_expert=*/5, /*n_slots=*/3);
    const cudaStream_t st = stream.get();
    // Misses fill the empty slots in index order; a repeated expert is one slot.
    EXPECT_EQ(assign(table, 0, {0, 1, 0}, st), (std::vector<int32_t>{0, 1, 0}));
    EXPECT_EQ(table.n_fills.download()[0], 2);
    EXPECT_EQ(assign(table, 0, {2}, st), (std::vector<int32_t>{2}));
    EXPECT_EQ(assign(table, 0, {0}, st), (std::vector<int32_t>{0}));  // a hit
    EXPECT_EQ(table.n_fills.download()[0], 0);
    // Expert 1 (slot 1) is the least recently used: layer 1's expert 3 takes its slot.
    EXPECT_EQ(assign(table, 1, {3}, st), (std::vector<int32_t>{1}));
    EXPECT_EQ(table.fill_slot.download()[0], 1);
    EXPECT_EQ(table.fill_expert.download()[0], 3);
    // Layer 0's expert 1 misses again and takes slot 2 (expert 2, used before expert 0); expert 4
    // then takes slot 0, since slot 2 is used by this call and slot 1 more recently.
    EXPECT_EQ(assign(table, 0, {1, 4}, st), (std::vector<int32_t>{2, 0}));
    const std::vector<int32_t> owner = table.owner.download();
    EXPECT_EQ(owner, (std::vector<int32_t>{0 * 5 + 4, 1 * 5 + 3, 0 * 5 + 1}));
    const std::vector<int32_t> slot_of = table.slot_of.download();
    EXPECT_EQ(slot_of[0], -1);  // evicted
    EXPECT_EQ(slot_of[2], -1);
    EXPECT_EQ(slot_of[1 * 5 + 3], 1);
    // Distinct experts per call: hits 1 (expert 0 once), misses 0,1 + 2 + 3 + 1,4 = 6.
    EXPECT_EQ(table.counts.download(), (std::vector<uint64_t>{1, 6}));
}

// hybrid: hits name their slots, misses go to the CPU, and up to max_fetch missed experts take
// slots for later calls (not this one); with one slot, the fetched expert waits for the next call.
TEST(GpuExpertSlots, HybridSplitsHitsFromMissesAndFetchesForLater) {
    TANDEM_REQUIRE_GPU();
    cuda::Stream stream;
    const cudaStream_t st = stream.get();
    TestTable table(1, 8, 3);
    auto split = [&](const std::vector<int32_t>& experts, int max_fetch) {
        std::vector<Route> routes;
        for (int32_t e : experts) routes.push_back({e, 0.25f});
        DeviceArray<Route> in(routes), slot_routes(routes.size()), cpu_routes(routes.size());
        cuda::split_slot_routes(in.get(), static_cast<int>(routes.size()), 0, table.t, max_fetch,
                                slot_routes.get(), cpu_routes.get(), st);
        std::vector<int32_t> slots, cpu;
        for (const Route& r : slot_routes.download()) slots.push_back(r.expert);
        for (const Route& r : cpu_routes.download()) {
            EXPECT_EQ(r.weight, 0.25f);
            cpu.push_back(r.expert);
        }
        return std::pair{slots, cpu};
    };
    using V = std::vector<int32_t>;
    // Nothing cached: all to the CPU; experts 5 and 1 (the first two misses) fetched.
    EXPECT_EQ(split({5, 1, 6, 5}, 2), std::pair(V{-1, -1, -1, -1}, V{5, 1, 6, 5}));
    EXPECT_EQ(table.n_fills.download()[0], 2);
    EXPECT_EQ(table.fill_expert.download()[1], 1);
    // 5 and 1 hit now; 6 misses and takes the last free slot.
    EXPECT_EQ(split({6, 5, 1}, 2), std::pair(V{-1, 0, 1}, V{6, -1, -1}));
    EXPECT_EQ(table.fill_slot.download()[0], 2);
    // Every slot is in use by this call: 7 misses and nothing is fetched.
    EXPECT_EQ(split({7, 6, 5, 1}, 2), std::pair(V{-1, 2, 0, 1}, V{7, -1, -1, -1}));
    EXPECT_EQ(table.n_fills.download()[0], 0);
    // max_fetch 0: nothing fetched; then 7 replaces the least recently used (all tied: slot 0).
    EXPECT_EQ(split({7}, 0), std::pair(V{-1}, V{7}));
    EXPECT_EQ(split({7}, 1), std::pair(V{-1}, V{7}));
    EXPECT_EQ(table.fill_slot.download()[0], 0);
    EXPECT_EQ(split({7, 5}, 1), std::pair(V{0, -1}, V{-1, 5}));
    // Distinct experts: hits 0 + 2 + 3 + 0 + 0 + 1, misses 3 + 1 + 1 + 1 + 1 + 1.
    EXPECT_EQ(table.counts.download(), (std::vector<uint64_t>{6, 8}));

    TestTable one(1, 4, 1);  // a budget of one slot
    std::swap(table.t, one.t);
    EXPECT_EQ(split({2, 3}, 2), std::pair(V{-1, -1}, V{2, 3}));
    EXPECT_EQ(one.n_fills.download()[0], 1);  // only 2: the one slot is then in use
    EXPECT_EQ(split({3, 2}, 2), std::pair(V{-1, 0}, V{3, -1}));
    EXPECT_EQ(one.n_fills.download()[0], 0);
    std::swap(table.t, one.t);
}

TEST(GpuExpertSlots, NegativeRoutesNameNoSlot) {
    TANDEM_REQUIRE_GPU();
    cuda::Stream stream;
    TestTable table(1, 4, 2);
    EXPECT_EQ(assign(table, 0, {-1, 3}, stream.get()), (std::vector<int32_t>{-1, 0}));
}

// Fills copy each missed expert's gate, up and down bytes (and scales and biases) from mapped host
// memory into their place in its slot; hits copy nothing.
TEST(GpuExpertSlots, FillsCopyMissedExpertsFromHostMemory) {
    TANDEM_REQUIRE_GPU();
    cuda::Stream stream;
    const cudaStream_t st = stream.get();
    constexpr int kExperts = 6, kSlots = 4;
    const int64_t bytes[3] = {4096, 4096 + 16, 1000};  // wide copies and byte copies
    const int64_t stride[3] = {4096, 4096 + 16, 1024};
    const int64_t offset[3] = {0, 4096, 8448};
    const int64_t slot_bytes = 9472;
    std::vector<uint8_t*> host(3);
    cuda::SlotLayer layer;
    std::vector<float> scales(kExperts);
    for (int e = 0; e < kExperts; ++e) scales[e] = 0.5f + e;
    DeviceArray<float> device_scales(scales);
    for (int p = 0; p < 3; ++p) {
        cuda::check(cudaHostAlloc(reinterpret_cast<void**>(&host[p]), stride[p] * kExperts,
                                  cudaHostAllocMapped),
                    "test host experts");
        for (int64_t i = 0; i < stride[p] * kExperts; ++i)
            host[p][i] = static_cast<uint8_t>((i / stride[p]) * 37 + i * 11 + p);
        void* device = nullptr;
        cuda::check(cudaHostGetDevicePointer(&device, host[p], 0), "test host experts");
        layer.source[p] = static_cast<const uint8_t*>(device);
        layer.stride[p] = stride[p];
        layer.bytes[p] = bytes[p];
        layer.offset[p] = offset[p];
    }
    layer.scales[2] = device_scales.get();
    // The up projection's biases (gpt-oss): 40 floats an expert, 48 apart; 40 a slot.
    constexpr int kBiasRows = 40, kBiasStride = 48;
    const std::vector<float> biases = testing::random_floats(kExperts * kBiasStride, 7);
    DeviceArray<float> device_biases(biases);
    layer.biases[1] = device_biases.get();
    layer.bias_stride[1] = kBiasStride;
    layer.bias_rows[1] = kBiasRows;
    DeviceArray<uint8_t> memory(static_cast<size_t>(slot_bytes) * kSlots);
    DeviceArray<float> slot_scales(std::vector<float>(kSlots, 0.0f));
    DeviceArray<float> slot_biases(std::vector<float>(kSlots * kBiasRows, 0.0f));
    cuda::SlotMemory m;
    m.base = memory.get();
    m.slot_bytes = slot_bytes;
    m.scales[2] = slot_scales.get();
    m.biases[1] = slot_biases.get();
    m.bias_stride[1] = kBiasRows;
    TestTable table(1, kExperts, kSlots);
    const std::vector<int32_t> first = {5, 2};
    const std::vector<int32_t> second = {2, 3, 1};  // expert 2 hits
    for (const auto& experts : {first, second}) {
        const std::vector<int32_t> slots = assign(table, 0, experts, st);
        cuda::fill_slots(layer, table.t, m, static_cast<int>(experts.size()), st);
        const std::vector<uint8_t> got = memory.download();
        const std::vector<float> got_scales = slot_scales.download();
        const std::vector<float> got_biases = slot_biases.download();
        for (size_t j = 0; j < experts.size(); ++j) {
            const int e = experts[j], s = slots[j];
            for (int p = 0; p < 3; ++p) {
                const std::vector<uint8_t> want(host[p] + e * stride[p],
                                                host[p] + e * stride[p] + bytes[p]);
                const std::vector<uint8_t> have(got.begin() + s * slot_bytes + offset[p],
                                                got.begin() + s * slot_bytes + offset[p] + bytes[p]);
                EXPECT_EQ(have, want) << "expert " << e << " part " << p;
            }
            EXPECT_EQ(got_scales[s], scales[e]) << "expert " << e;
            EXPECT_EQ(std::vector<float>(got_biases.begin() + s * kBiasRows,
                                         got_biases.begin() + (s + 1) * kBiasRows),
                      std::vector<float>(biases.begin() + e * kBiasStride,
                                         biases.begin() + e * kBiasStride + kBiasRows))
                << "expert " << e << " biases";
        }
    }
    EXPECT_EQ(table.counts.download(), (std::vector<uint64_t>{1, 4}));
    for (uint8_t* p : host) cudaFreeHost(p);
}

// Two backends on one model register the same host ranges: the second shares the first's
// registration, which stays until both are gone.
TEST(GpuHostRegistration, HoldersOfOneRangeShareIt) {
    TANDEM_REQUIRE_GPU();
    std::vector<uint8_t> host(1 << 20, 7);
    auto registered = [&] {
        void* device = nullptr;
        // An address inside the registered range (its first page may start before host + 5000).
        const bool ok = cudaHostGetDevicePointer(&device, host.data() + 6000, 0) == cudaSuccess;
        cudaGetLastError();
        return ok;
    };
    std::string why;
    auto first = std::make_unique<cuda::HostRegistration>();
    first->add(host.data() + 5000, 300000);
    ASSERT_TRUE(first->register_all(&why)) << why;
    cuda::HostRegistration second;
    second.add(host.data() + 5000, 300000);
    ASSERT_TRUE(second.register_all(&why)) << why;
    EXPECT_EQ(second.bytes(), first->bytes());
    EXPECT_TRUE(registered());
    first.reset();
    EXPECT_TRUE(registered());
    cuda::HostRegistration overlapping;  // a different range over the same pages: refused
    overlapping.add(host.data() + 100000, 500000);
    EXPECT_FALSE(overlapping.register_all(&why));
    EXPECT_NE(why.find("cudaHostRegister"), std::string::npos) << why;
    EXPECT_EQ(overlapping.bytes(), 0u);
}

}  // namespace
}  // namespace tandem
