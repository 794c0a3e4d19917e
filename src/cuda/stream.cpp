// Streams and graph replay.
#include "cuda/stream.h"

#include <thread>

#include "cuda/check.h"

namespace tandem::cuda {

Stream::Stream() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming | cudaEventBlockingSync),
          "cudaEventCreate");
}

Stream::~Stream() {
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize(const char* what) const {
    check(cudaEventRecord(done_, stream_), what);
    if (!spin_wait_) {
        check(cudaEventSynchronize(done_), what);
        return;
    }
    cudaError_t e;
    while ((e = cudaEventQuery(done_)) == cudaErrorNotReady) std::this_thread::yield();
    check(e, what);
}

Event::Event(bool timed) {
    check(cudaEventCreateWithFlags(&event_, timed ? cudaEventDefault : cudaEventDisableTiming),
          "cudaEventCreate");
}

Event::~Event() {
    if (event_ != nullptr) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) const {
    check(cudaEventRecord(event_, stream), "cudaEventRecord");
}

void Event::wait_on(cudaStream_t stream) const {
    check(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

float Event::milliseconds_since(const Event& start) const {
    check(cudaEventSynchronize(event_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start.event_, event_), "cudaEventElapsedTime");
    return ms;
}

GraphCache::~GraphCache() {
    clear();
}

void GraphCache::clear() {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
}

void GraphCache::run(uint64_t key, const std::function<void()>& work) {
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
        check(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture");
        try {
            work();
        } catch (...) {
            cudaGraph_t broken = nullptr;
            cudaStreamEndCapture(stream_.get(), &broken);
            if (broken != nullptr) cudaGraphDestroy(broken);
            cudaGetLastError();
            throw;
        }
        cudaGraph_t graph = nullptr;
        check(cudaStreamEndCapture(stream_.get(), &graph), "cudaStreamEndCapture");
        cudaGraphExec_t exec = nullptr;
        const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        check(e, "cudaGraphInstantiate");
        it = graphs_.emplace(key, exec).first;
    }
    check(cudaGraphLaunch(it->second, stream_.get()), "cudaGraphLaunch");
}

}  // namespace tandem::cuda
