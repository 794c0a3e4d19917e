// The prefill expert stream (model/gpu_expert_stream.h): host layers' experts copied whole into
// VRAM, and only the routed ones for a layer whose last batch routed to few of its experts.
#include "model/gpu_expert_stream.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
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

// Whether expert e's gate, up and down in the device view `got` hold the bytes of `host`'s.
bool holds_expert(const MoeLayer& got, const MoeLayer& host, int e) {
    for (int p = 0; p < 3; ++p) {
        const ExpertMatrix& d = part(got, p);
        const ExpertMatrix& h = part(host, p);
        const size_t bytes = static_cast<size_t>(h.matrix.rows) * h.matrix.row_bytes;
        std::vector<uint8_t> have(bytes);
        cuda::check(cudaMemcpy(have.data(), d.matrix.data + e * d.expert_stride, bytes,
                               cudaMemcpyDeviceToHost),
                    "test download");
        if (std::memcmp(have.data(), h.matrix.data + e * h.expert_stride, bytes) != 0)
            return false;
    }
    return true;
}

TEST(GpuExpertStream, CopiesOnlyTheRoutedExpertsWhereFewWereRouted) {
    TANDEM_REQUIRE_GPU();
    testing::TempDir dir;
    SynthSpec s;
    s.n_layer = 4;
    s.n_expert = 16;
    s.n_expert_used = 2;
    s.exp_gate_type = s.exp_up_type = GgmlType::kQ4_K;
    s.exp_down_type = GgmlType::kQ6_K;
    auto model = Model::load(testing::write_model(s, dir.file("stream.gguf")));
    std::vector<MoeLayer> host;
    for (int il = 0; il < s.n_layer; ++il) host.push_back(model->weights().layers[il].experts);
    GpuExpertStream stream(host);
    if (!stream.pinned()) GTEST_SKIP() << stream.host_memory();
    cuda::Stream compute;
    const cudaStream_t st = compute.get();
    // Two tokens routed to experts 3 and 9.
    const DeviceArray<Route> few({{3, 0.5f}, {9, 0.5f}, {9, 0.7f}, {3, 0.3f}});
    auto acquire = [&](int layer, const DeviceArray<Route>& routes) {
        const MoeLayer v = stream.acquire(layer, routes.get(), static_cast<int>(routes.size()), st);
        stream.release(layer, st);
        cuda::check(cudaStreamSynchronize(st), "test stream");
        return v;
    };
    // The first batch: whole layers (nothing counted yet).
    for (int il = 0; il < s.n_layer; ++il) {
        const MoeLayer v = acquire(il, few);
        for (int e = 0; e < s.n_expert; ++e)
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
    for (int e = 0; e < s.n_expert; ++e) EXPECT_TRUE(holds_expert(v1, host[1], e)) << e;
}

}  // namespace
}  // namespace tandem
