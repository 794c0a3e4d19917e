// The prefill expert stream (model/gpu_expert_stream.h): host layers' experts copied whole into
// VRAM (the first after the last, for the next batch), only the routed ones for a layer whose last
// batch routed to few of its experts, and those that sit in expert slots from there; and the slots
// filled before the first step.
#include "model/gpu_expert_stream.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "model/gpu_expert_slots.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::DeviceArray;

const ExpertMatrix& part(const MoeLayer& m, int p) {
    return p == 0 ? m.gate : p == 1 ? m.up : m.down;
}

// Part p (gate, up, down) of expert e in the device view `got`.
std::vector<uint8_t> device_part(const MoeLayer& got, int e, int p) {
    const ExpertMatrix& d = part(got, p);
    std::vector<uint8_t> have(static_cast<size_t>(d.matrix.rows) * d.matrix.row_bytes);
    cuda::check(cudaMemcpy(have.data(), d.matrix.data + e * d.expert_stride, have.size(),
                           cudaMemcpyDeviceToHost),
                "test download");
    return have;
}

// Whether part p of expert e in the device view `got` holds the bytes of `host`'s.
bool holds_part(const MoeLayer& got, const MoeLayer& host, int e, int p) {
    const ExpertMatrix& h = part(host, p);
    return std::memcmp(device_part(got, e, p).data(), h.matrix.data + e * h.expert_stride,
                       static_cast<size_t>(h.matrix.rows) * h.matrix.row_bytes) == 0;
}

// Whether expert e's gate, up and down in the device view `got` hold the bytes of `host`'s.
bool holds_expert(const MoeLayer& got, const MoeLayer& host, int e) {
    return holds_part(got, host, e, 0) && holds_part(got, host, e, 1) &&
           holds_part(got, host, e, 2);
}

// A synthetic model's layers of n_expert experts (q4_K gate and up, `down` down), as they sit in
// host memory.
struct HostExperts {
    HostExperts(int n_layer, int n_expert, GgmlType down) {
        SynthSpec s;
        s.n_layer = n_layer;
        s.n_expert = n_expert;
        s.n_expert_used = 2;
        s.exp_gate_type = s.exp_up_type = GgmlType::kQ4_K;
        s.exp_down_type = down;
        model = Model::load(testing::write_model(s, dir.file("experts.gguf")));
        for (int il = 0; il < n_layer; ++il) layers.push_back(model->weights().layers[il].experts);
    }
    testing::TempDir dir;
    std::unique_ptr<Model> model;
    std::vector<MoeLayer> layers;
};

// The stream over HostExperts' layers and a stream to compute on: where the stream's tests start.
struct StreamedExperts {
    StreamedExperts(int n_layer, int n_expert, GgmlType down)
        : experts(n_layer, n_expert, down), host(experts.layers), stream(host) {}
    // Layer `layer`'s experts as acquire() gives them for `routes`, released and copied.
    MoeLayer acquire(int layer, const DeviceArray<Route>& routes) {
        const MoeLayer v =
            stream.acquire(layer, routes.get(), static_cast<int>(routes.size()), compute.get());
        stream.release(layer, compute.get());
        cuda::check(cudaStreamSynchronize(compute.get()), "test stream");
        return v;
    }
    HostExperts experts;
    std::vector<MoeLayer>& host;
    GpuExpertStream stream;
    cuda::Stream compute;
};

TEST(GpuExpertStream, CopiesOnlyTheRoutedExpertsWhereFewWereRouted) {
    TANDEM_REQUIRE_GPU();
    constexpr int kLayers = 4, kExperts = 16;
    StreamedExperts s(kLayers, kExperts, GgmlType::kQ6_K);
    if (!s.stream.pinned()) GTEST_SKIP() << s.stream.host_memory();
    const std::vector<MoeLayer>& host = s.host;
    const auto acquire = [&](int layer, const DeviceArray<Route>& r) { return s.acquire(layer, r); };
    // Two tokens routed to experts 3 and 9.
    const DeviceArray<Route> few({{3, 0.5f}, {9, 0.5f}, {9, 0.7f}, {3, 0.3f}});
    // The first batch: whole layers (nothing counted yet).
    for (int il = 0; il < kLayers; ++il) {
        const MoeLayer v = acquire(il, few);
        for (int e = 0; e < kExperts; ++e)
            EXPECT_TRUE(holds_expert(v, host[il], e)) << "layer " << il << " expert " << e;
    }
    // Layers 0 and 2 share a buffer, which holds layer 2's experts now; the next batch's layer 0
    // copies only experts 3 and 9 into it (2 of 16 routed last time).
    const MoeLayer v0 = acquire(0, few);
    EXPECT_TRUE(holds_expert(v0, host[0], 3));
    EXPECT_TRUE(holds_expert(v0, host[0], 9));
    for (int e : {0, 4, 15}) {
        EXPECT_FALSE(holds_expert(v0, host[0], e)) << "copied expert " << e;
        EXPECT_TRUE(holds_expert(v0, host[2], e)) << "expert " << e << " overwritten";
    }
    // 16 times the routes are expected to reach 32 experts: layer 1 (whose buffer holds layer 3)
    // copies whole again.
    std::vector<Route> many;
    for (int j = 0; j < 16 * 4; ++j) many.push_back({3 + (j % 2) * 6, 0.5f});
    const MoeLayer v1 = acquire(1, DeviceArray<Route>(many));
    for (int e = 0; e < kExperts; ++e) EXPECT_TRUE(holds_expert(v1, host[1], e)) << e;
}

TEST(GpuExpertStream, TakesTheExpertsThatSitInSlotsFromThere) {
    TANDEM_REQUIRE_GPU();
    constexpr int kLayers = 4, kExperts = 16;
    StreamedExperts s(kLayers, kExperts, GgmlType::kQ6_K);
    if (!s.stream.pinned()) GTEST_SKIP() << s.stream.host_memory();
    const std::vector<MoeLayer>& host = s.host;
    GpuExpertSlots slots(host, 4);
    const cudaStream_t st = s.compute.get();
    // Layer 1's experts 2, 3 and 11 into slots; then layer 1's gate of the slot that holds
    // expert 3 overwritten, so that a copy taken from there shows.
    const DeviceArray<Route> routes({{3, 0.5f}, {11, 0.5f}, {2, 0.5f}, {3, 0.5f}});
    DeviceArray<Route> slot_routes(std::vector<Route>(4));
    const MoeLayer view = slots.prepare(1, routes.get(), 4, slot_routes.get(), st);
    std::vector<int32_t> map = slots.slot_map(st);
    const int slot3 = map[1 * kExperts + 3];
    ASSERT_GE(slot3, 0);
    for (int e = 0; e < kExperts; ++e) {
        const bool routed = e == 2 || e == 3 || e == 11;
        EXPECT_EQ(map[1 * kExperts + e] >= 0, routed) << "expert " << e;
        EXPECT_LT(map[0 * kExperts + e], 0) << "layer 0 expert " << e;
    }
    const size_t gate_bytes =
        static_cast<size_t>(host[1].gate.matrix.rows) * host[1].gate.matrix.row_bytes;
    cuda::check(cudaMemsetAsync(const_cast<uint8_t*>(view.gate.matrix.data) +
                                    slot3 * view.gate.expert_stride,
                                0x5a, gate_bytes, st),
                "test marking");
    cuda::check(cudaStreamSynchronize(st), "test marking");
    s.stream.take_from_slots(&slots, std::move(map));
    const auto acquire = [&](int layer, const DeviceArray<Route>& r) { return s.acquire(layer, r); };
    // Expert 3 of layer 1 (in a slot) as the mark left it, every other expert from host memory.
    auto expect_slot_3_marked = [&](const MoeLayer& got, const std::string& what) {
        const std::vector<uint8_t> gate = device_part(got, 3, 0);
        EXPECT_EQ(std::count(gate.begin(), gate.end(), uint8_t{0x5a}),
                  static_cast<long>(gate.size()))
            << what << ": expert 3's gate not taken from its slot";
        EXPECT_TRUE(holds_part(got, host[1], 3, 1)) << what;
        EXPECT_TRUE(holds_part(got, host[1], 3, 2)) << what;
    };
    // A whole copy (nothing counted yet): 13 experts over PCIe, 3 out of their slots.
    const DeviceArray<Route> many(std::vector<Route>(64, Route{0, 1.0f}));
    const MoeLayer whole = acquire(1, many);
    double expert_bytes = 0;
    for (int p = 0; p < 3; ++p) {
        const ExpertMatrix& h = part(host[1], p);
        expert_bytes += static_cast<double>(h.matrix.rows) * h.matrix.row_bytes;
    }
    // (Layer 2's copy, into the other buffer, has begun beside it: all 16 from host memory.)
    const GpuExpertStream::Traffic moved = s.stream.traffic();
    EXPECT_EQ(moved.whole_copies, 2);
    EXPECT_EQ(moved.slot_bytes, 3 * expert_bytes);
    EXPECT_EQ(moved.host_bytes, (13 + 16) * expert_bytes);
    for (int e = 0; e < kExperts; ++e) {
        if (e != 3) {
            EXPECT_TRUE(holds_expert(whole, host[1], e)) << "expert " << e;
        }
    }
    expect_slot_3_marked(whole, "whole copy");
    // Layer 0 has nothing in slots: all from host memory.
    const MoeLayer got0 = acquire(0, many);
    for (int e = 0; e < kExperts; ++e) EXPECT_TRUE(holds_expert(got0, host[0], e)) << e;
    // Layer 3 takes layer 1's buffer (the other holds layer 0's); then layer 1's
    // next batch, which routes to experts 3 and 5 (its last batch reached one expert outside the
    // slots), copies only those, into the buffer layer 3 did not take: 5 from host memory, 3 from
    // its slot; the rest of that buffer still holds layer 0's.
    acquire(3, many);
    const MoeLayer few = acquire(1, DeviceArray<Route>({{3, 0.5f}, {5, 0.5f}}));
    expect_slot_3_marked(few, "routed only");
    EXPECT_TRUE(holds_expert(few, host[1], 5));
    for (int e : {0, 2, 11}) EXPECT_TRUE(holds_expert(few, host[0], e)) << "expert " << e;
}

// The last host layer's compute hides the copy of the first's, for the next batch: an odd number
// of host layers too, whose first and last took the same buffer had the buffers gone by parity.
TEST(GpuExpertStream, CopiesTheFirstLayerAfterTheLast) {
    TANDEM_REQUIRE_GPU();
    constexpr int kLayers = 3, kExperts = 8;
    StreamedExperts s(kLayers, kExperts, GgmlType::kQ8_0);
    if (!s.stream.pinned()) GTEST_SKIP() << s.stream.host_memory();
    const std::vector<MoeLayer>& host = s.host;
    GpuExpertStream& stream = s.stream;
    const cudaStream_t st = s.compute.get();
    std::vector<Route> spread;
    for (int j = 0; j < 64; ++j) spread.push_back({j % kExperts, 0.5f});
    const DeviceArray<Route> routes(spread);
    const auto acquire = [&](int layer) { return s.acquire(layer, routes); };
    // Layer 0, then 1 (copied beside 0), 2 (beside 1) and 0 again (beside 2).
    for (int il = 0; il < kLayers; ++il) acquire(il);
    EXPECT_EQ(stream.traffic().whole_copies, 4);
    // The next batch finds layer 0 copied, and copies layer 1 beside it.
    const MoeLayer v0 = acquire(0);
    EXPECT_EQ(stream.traffic().whole_copies, 5);
    for (int e = 0; e < kExperts; ++e) EXPECT_TRUE(holds_expert(v0, host[0], e)) << e;
    const MoeLayer v1 = acquire(1);
    EXPECT_EQ(stream.traffic().whole_copies, 6);  // layer 2 beside it
    for (int e = 0; e < kExperts; ++e) EXPECT_TRUE(holds_expert(v1, host[1], e)) << e;
    // Releasing another layer than the one acquired is a caller's error.
    stream.acquire(2, routes.get(), 64, st);
    EXPECT_THROW(stream.release(1, st), Error);
    stream.release(2, st);
    cuda::check(cudaStreamSynchronize(st), "test stream");
}

// The slots filled before the first step: experts 0, 1, ... of each host layer in turn, each
// slot holding its expert's bytes, which a later prepare() finds as hits.
TEST(GpuExpertSlots, PreloadTakesTheLayersInTurn) {
    TANDEM_REQUIRE_GPU();
    constexpr int kLayers = 3, kExperts = 8;
    HostExperts experts(kLayers, kExperts, GgmlType::kQ8_0);
    std::vector<MoeLayer>& host = experts.layers;
    host[1] = MoeLayer{};  // a layer whose experts stay in VRAM: no slots for it
    GpuExpertStream stream(host);  // registers the host experts
    if (!stream.pinned()) GTEST_SKIP() << stream.host_memory();
    GpuExpertSlots slots(host, 5);
    cuda::Stream compute;
    const cudaStream_t st = compute.get();
    EXPECT_EQ(slots.preload(st), 5);
    const std::vector<int32_t> map = slots.slot_map(st);
    // Layers 0 and 2 in turn: (0, e0) (2, e0) (0, e1) (2, e1) (0, e2).
    const int want[3][8] = {{0, 2, 4, -1, -1, -1, -1, -1},
                            {-1, -1, -1, -1, -1, -1, -1, -1},
                            {1, 3, -1, -1, -1, -1, -1, -1}};
    for (int il = 0; il < kLayers; ++il) {
        for (int e = 0; e < kExperts; ++e)
            EXPECT_EQ(map[il * kExperts + e], want[il][e]) << "layer " << il << " expert " << e;
    }
    // Expert 1 of layer 2 is a hit, in slot 3, holding its bytes; expert 5 a miss.
    const DeviceArray<Route> routes({{1, 1.0f}, {5, 1.0f}});
    DeviceArray<Route> slot_routes(std::vector<Route>(2));
    const MoeLayer view = slots.prepare(2, routes.get(), 2, slot_routes.get(), st);
    const std::vector<Route> named = slot_routes.download();
    EXPECT_EQ(named[0].expert, 3);
    EXPECT_EQ(slots.counts(), (std::pair<uint64_t, uint64_t>{1, 1}));
    for (int p = 0; p < 3; ++p) {
        const ExpertMatrix& h = part(host[2], p);
        const std::vector<uint8_t> got = device_part(view, 3, p);
        EXPECT_EQ(std::memcmp(got.data(), h.matrix.data + 1 * h.expert_stride, got.size()), 0)
            << "part " << p;
    }
}

}  // namespace
}  // namespace tandem
