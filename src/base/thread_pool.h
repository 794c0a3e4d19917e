// A persistent pool of worker threads. A job is a function every participant runs with its
// worker index (for per-worker scratch); the caller is worker 0 and background threads are
// 1..size()-1. Jobs split their work by claiming tiles from a shared counter, so they finish
// together whatever the number of participants.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
public:
    // n_threads <= 0 means one per physical core. `pin` binds thread i to logical cpu i.
    // Fails (tandem::fail) when the system cannot start that many threads.
    explicit ThreadPool(int n_threads = 0, bool pin = false);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs job(worker) on every worker and returns when all are done.
    void run(const std::function<void(int worker)>& job);

    // Starts job on the background workers and returns at once; wait() runs it as worker 0 on
    // the calling thread too and returns when every worker is done. One job at a time.
    void start(std::function<void(int worker)> job);
    void wait();
    bool busy() const { return job_active_; }

    // Calls body(begin, end, worker) over [0, n) in chunks of `grain` claimed dynamically.
    void parallel_for(int64_t n, int64_t grain,
                      const std::function<void(int64_t begin, int64_t end, int worker)>& body);

    // A reusable barrier across all size() workers of the current job.
    void barrier();

private:
    void worker_loop(int worker);
    // Stops and joins the background workers (the destructor; a failed start).
    void stop_workers();
    void run_job_as(int worker);

    int n_threads_;
    std::vector<std::thread> threads_;
    std::function<void(int)> job_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    bool job_active_ = false;
    // barrier state
    std::atomic<int> barrier_count_{0};
    std::atomic<uint64_t> barrier_phase_{0};
};

// One step of a spin-wait: a pause, and now and then (after the first kSpinsBeforeYield) the
// core given up. Where runnable threads outnumber cores (a pool of one thread per core beside the
// CUDA runtime's threads, whose host function runs the MoE executor), the thread being waited for
// may be waiting for this very core: pure spinning then stalls everyone for a scheduler slice.
// `tandem bench moe --type q4_K --hidden 2048 --ffn 768 --experts 128 --batch 1` with 3 threads on
// 2 cores: 1444 µs a layer spinning, 510 yielding (2 threads: 546, 466).
constexpr int kSpinsBeforeYield = 1024;
inline void spin_step(int i) {
    if (i >= kSpinsBeforeYield && i % 64 == 0) {
        std::this_thread::yield();
        return;
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

// Spins until done() holds.
template <typename Done>
void spin_until(const Done& done) {
    for (int i = 0; !done(); ++i) spin_step(i);
}

// Spins briefly, then blocks in the kernel, until `value` differs from `old`.
template <typename T>
void spin_then_wait(const std::atomic<T>& value, T old) {
    for (int i = 0; i < 20000; ++i) {
        if (value.load(std::memory_order_acquire) != old) return;
        spin_step(i);
    }
    while (value.load(std::memory_order_acquire) == old) value.wait(old, std::memory_order_acquire);
}

}  // namespace tandem
