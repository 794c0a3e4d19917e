// A CUDA stream, and the CUDA graphs recorded on it: a forward pass of a given shape is captured
// once and replayed, so a decode step costs one launch instead of hundreds (DESIGN.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <unordered_map>

namespace tandem::cuda {

class Stream {
  public:
    Stream();
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    cudaStream_t get() const { return stream_; }
    // Waits for everything queued; throws Error naming `what` if a kernel failed. Asleep by
    // default (a spinning host thread takes a core from the CPU executor's workers); polling
    // (yielding the core between polls) once set_spin_wait(true): where no host workers compete,
    // waking from the blocking wait costs a decode step more than the poll.
    void synchronize(const char* what) const;
    void set_spin_wait(bool spin) { spin_wait_ = spin; }

  private:
    cudaStream_t stream_ = nullptr;
    cudaEvent_t done_ = nullptr;  // blocking-sync event that synchronize() waits on
    bool spin_wait_ = false;
};

// A CUDA event, owned: for ordering between streams, or (timed) for measuring device time.
class Event {
  public:
    explicit Event(bool timed = false);
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    cudaEvent_t get() const { return event_; }
    void record(cudaStream_t stream) const;
    // Makes `stream` wait for the work recorded before this event.
    void wait_on(cudaStream_t stream) const;
    // Waits for this event and returns the device milliseconds since `start` (both timed).
    float milliseconds_since(const Event& start) const;

  private:
    cudaEvent_t event_ = nullptr;
};

// Graphs by key: run(key, work) captures `work` (which must only queue work on the stream) the
// first time a key is seen and replays the graph after that.
class GraphCache {
  public:
    explicit GraphCache(const Stream& stream) : stream_(stream) {}
    ~GraphCache();
    GraphCache(const GraphCache&) = delete;
    GraphCache& operator=(const GraphCache&) = delete;

    void run(uint64_t key, const std::function<void()>& work);
    size_t size() const { return graphs_.size(); }
    void clear();

  private:
    const Stream& stream_;
    std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
};

}  // namespace tandem::cuda
