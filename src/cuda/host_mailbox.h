// A stream's requests to a host thread and the thread's answers, through pinned host memory that
// both sides poll. On the stream, post() copies a request's rows (and a block of bytes beside
// them) into host memory and then raises the request's number; a host thread that sees it
// computes, writes the answer's rows and raises the answer's number; await() holds the stream
// until then and copies the answer to the device. All of it is kernels, so a CUDA graph replays
// it: no host function (whose dispatch through the runtime's callback thread, and the stream's
// release after it, cost tens of µs a call) and no copy-engine operations around it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/elementwise.h"
#include "cuda/memory.h"

namespace tandem::cuda {

// In pinned host memory. The request's fields and the answer's number sit on cache lines of
// their own: each side writes one line and polls the other.
struct alignas(64) MailboxFlags {
    uint32_t request;  // the number of the last request posted (by the device)
    int32_t tag;
    int32_t rows;
    alignas(64) uint32_t answer;  // the number of the last request answered (by the host)
};

// The kernels (host_mailbox.cu), on device views of the pinned buffers. counters (device):
// [0] requests posted, [1] blocks of the current post done, [2] whether it was skipped.
void launch_mailbox_post(DeviceRows in, float* host_rows, const void* extra, void* host_extra,
                         size_t extra_bytes, int key_stride, int tag, MailboxFlags* flags,
                         uint32_t* counters, cudaStream_t stream);
void launch_mailbox_await(DeviceRows out, const float* host_answer, MailboxFlags* flags,
                          const uint32_t* counters, cudaStream_t stream);

class HostMailbox {
  public:
    // Room for requests of up to `rows` rows of `cols` floats and `extra_bytes` more, and answers
    // of as many rows of `answer_cols` floats.
    HostMailbox(int rows, int64_t cols, size_t extra_bytes, int64_t answer_cols);

    // Stream side. post(): the rows of `in` (device; in.rows at most the room's), the
    // `extra_bytes` at `extra` (device) and `tag`, then the request's number. With key_stride >
    // 0 the extra bytes are records whose first int32 is a key, key_stride int32s apart, and a
    // request whose keys are all negative (nothing for the host: a hybrid layer whose routes all
    // hit the slots) is not sent. await(): once the host has answered that request, its in.rows
    // answer rows into `out` (device); zeros at once for a request not sent.
    void post(DeviceRows in, const void* extra, size_t extra_bytes, int key_stride, int tag,
              cudaStream_t stream);
    void await(DeviceRows out, cudaStream_t stream);

    // Host side. A request posted and not yet answered: its number (else false), tag and rows.
    struct Request {
        uint32_t number = 0;
        int tag = 0;
        int rows = 0;
    };
    bool pending(Request* r) const;
    const float* request_rows() const { return rows_.as<const float>(); }  // rows × cols, dense
    const void* request_extra() const { return extra_.get(); }
    float* answer_rows() { return answer_.as<float>(); }  // rows × answer_cols, dense
    // The answer's rows are written: releases the stream waiting for request `number`.
    void answer(uint32_t number);

  private:
    PinnedBuffer flags_;     // MailboxFlags, polled by both sides
    PinnedBuffer rows_;      // the requests' rows
    PinnedBuffer extra_;     // the requests' extra bytes
    PinnedBuffer answer_;    // the answers' rows
    DeviceBuffer counters_;  // launch_mailbox_post's
    // The device's addresses of the pinned buffers (the same under unified addressing).
    MailboxFlags* device_flags_ = nullptr;
    float* device_rows_ = nullptr;
    void* device_extra_ = nullptr;
    const float* device_answer_ = nullptr;
    int max_rows_;
    int64_t cols_, answer_cols_;
    size_t max_extra_;
};

}  // namespace tandem::cuda
