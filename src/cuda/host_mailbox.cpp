// The host mailbox: its pinned buffers, the checks of a request's size, the host side's polling.
#include "cuda/host_mailbox.h"

#include <algorithm>
#include <atomic>
#include <new>

#include "base/error.h"
#include "cuda/check.h"

namespace tandem::cuda {
namespace {

template <typename T>
T* device_view(const PinnedBuffer& b) {
    return static_cast<T*>(
        mapped_device_address(b.get(), "cudaHostGetDevicePointer (host mailbox)"));
}

}  // namespace

HostMailbox::HostMailbox(int rows, int64_t cols, size_t extra_bytes, int64_t answer_cols)
    : flags_(sizeof(MailboxFlags), "host mailbox flags"),
      rows_(sizeof(float) * static_cast<size_t>(rows) * cols, "host mailbox requests"),
      extra_(std::max<size_t>(extra_bytes, 1), "host mailbox requests' extra bytes"),
      answer_(sizeof(float) * static_cast<size_t>(rows) * answer_cols, "host mailbox answers"),
      counters_(3 * sizeof(uint32_t), "host mailbox counters"),
      max_rows_(rows),
      cols_(cols),
      answer_cols_(answer_cols),
      max_extra_(extra_bytes) {
    new (flags_.get()) MailboxFlags{};
    check(cudaMemset(counters_.get(), 0, counters_.bytes()), "cudaMemset (host mailbox)");
    device_flags_ = device_view<MailboxFlags>(flags_);
    device_rows_ = device_view<float>(rows_);
    device_extra_ = device_view<void>(extra_);
    device_answer_ = device_view<float>(answer_);
}

void HostMailbox::post(DeviceRows in, const void* extra, size_t extra_bytes, int key_stride,
                       int tag, cudaStream_t stream) {
    if (in.rows > max_rows_ || in.cols != cols_ || extra_bytes > max_extra_)
        fail("host mailbox: a request of {} rows of {} and {} bytes (room for {} of {} and {})",
             in.rows, in.cols, extra_bytes, max_rows_, cols_, max_extra_);
    launch_mailbox_post(in, device_rows_, extra, device_extra_, extra_bytes, key_stride, tag,
                        device_flags_, counters_.as<uint32_t>(), stream);
}

void HostMailbox::await(DeviceRows out, cudaStream_t stream) {
    if (out.rows > max_rows_ || out.cols != answer_cols_)
        fail("host mailbox: an answer of {} rows of {} (room for {} of {})", out.rows, out.cols,
             max_rows_, answer_cols_);
    launch_mailbox_await(out, device_answer_, device_flags_, counters_.as<uint32_t>(), stream);
}

bool HostMailbox::pending(Request* r) const {
    MailboxFlags* f = flags_.as<MailboxFlags>();
    const uint32_t number = std::atomic_ref<uint32_t>(f->request).load(std::memory_order_acquire);
    if (number == std::atomic_ref<uint32_t>(f->answer).load(std::memory_order_relaxed))
        return false;
    *r = Request{number, f->tag, f->rows};
    return true;
}

void HostMailbox::answer(uint32_t number) {
    std::atomic_ref<uint32_t>(flags_.as<MailboxFlags>()->answer)
        .store(number, std::memory_order_release);
}

}  // namespace tandem::cuda
