// Host ranges uploaded to the device.
#include "cuda/host_image.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "cuda/check.h"

namespace tandem::cuda {
namespace {

constexpr size_t kStagingBytes = size_t{64} << 20;  // each of the two pinned staging buffers

}  // namespace

void HostImage::add(const void* data, size_t bytes) {
    if (data == nullptr || bytes == 0) return;
    const auto b = reinterpret_cast<uintptr_t>(data);
    pending_.push_back({b, b + bytes, 0});
}

std::vector<HostImage::Range> HostImage::merged() const {
    std::vector<Range> sorted = pending_;
    std::sort(sorted.begin(), sorted.end(),
              [](const Range& a, const Range& b) { return a.begin < b.begin; });
    std::vector<Range> out;
    size_t offset = 0;
    for (const Range& r : sorted) {
        if (!out.empty() && r.begin < out.back().end) {
            if (r.end > out.back().end) {
                offset += r.end - out.back().end;
                out.back().end = r.end;
            }
            continue;
        }
        offset = align_up(offset);
        out.push_back({r.begin, r.end, offset});
        offset += r.end - r.begin;
    }
    return out;
}

size_t HostImage::device_bytes() const {
    const std::vector<Range> m = merged();
    return m.empty() ? 0 : align_up(m.back().offset + (m.back().end - m.back().begin));
}

void HostImage::upload(const std::function<void(size_t, size_t)>& progress) {
    const std::vector<Range> m = merged();
    const size_t total_device = device_bytes();
    device_ = DeviceBuffer(total_device, "the weights");
    size_t total = 0;
    for (const Range& r : m) total += r.end - r.begin;

    PinnedBuffer staging[2] = {PinnedBuffer(kStagingBytes, "weight staging"),
                               PinnedBuffer(kStagingBytes, "weight staging")};
    cudaEvent_t done[2];
    for (cudaEvent_t& e : done)
        check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    size_t copied = 0;
    int slot = 0;
    bool used[2] = {false, false};
    try {
        for (const Range& r : m) {
            for (uintptr_t p = r.begin; p < r.end;) {
                const size_t n = std::min<size_t>(kStagingBytes, r.end - p);
                if (used[slot]) check(cudaEventSynchronize(done[slot]), "weight upload");
                std::memcpy(staging[slot].get(), reinterpret_cast<const void*>(p), n);
                check(cudaMemcpyAsync(device_.as<uint8_t>() + r.offset + (p - r.begin),
                                      staging[slot].get(), n, cudaMemcpyHostToDevice, stream),
                      "weight upload (cudaMemcpyAsync)");
                check(cudaEventRecord(done[slot], stream), "cudaEventRecord");
                used[slot] = true;
                slot ^= 1;
                p += n;
                copied += n;
                progress(copied, total);
            }
        }
        check(cudaStreamSynchronize(stream), "weight upload");
    } catch (...) {
        cudaStreamSynchronize(stream);
        for (cudaEvent_t e : done) cudaEventDestroy(e);
        cudaStreamDestroy(stream);
        throw;
    }
    for (cudaEvent_t e : done) cudaEventDestroy(e);
    cudaStreamDestroy(stream);
    ranges_.clear();
    for (const Range& r : m) ranges_.emplace(r.begin, r);
}

const void* HostImage::device(const void* p) const {
    if (p == nullptr) return nullptr;
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) fail("internal: host address {} was not uploaded", p);
    --it;
    if (a >= it->second.end) fail("internal: host address {} was not uploaded", p);
    return device_.as<const uint8_t>() + it->second.offset + (a - it->second.begin);
}

}  // namespace tandem::cuda
