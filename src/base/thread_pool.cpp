// A persistent pool of worker threads.
#include "base/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <system_error>

#include "base/cpu_features.h"
#include "base/error.h"

namespace tandem {

ThreadPool::ThreadPool(int n_threads, bool pin) {
    n_threads_ = n_threads > 0 ? n_threads : cpu_features().physical_cores;
    n_threads_ = std::max(1, n_threads_);
    threads_.reserve(n_threads_ - 1);
    for (int worker = 1; worker < n_threads_; ++worker) {
        try {
            threads_.emplace_back([this, worker] { worker_loop(worker); });
        } catch (const std::system_error& e) {
            stop_workers();
            fail("cannot start {} threads: thread {} failed ({})", n_threads_, worker, e.what());
        }
        if (pin) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(worker % std::max(1, cpu_features().logical_cores), &set);
            pthread_setaffinity_np(threads_.back().native_handle(), sizeof(set), &set);
        }
    }
    if (pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
}

ThreadPool::~ThreadPool() {
    if (job_active_) wait();
    stop_workers();
}

void ThreadPool::stop_workers() {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

void ThreadPool::worker_loop(int worker) {
    uint64_t seen = 0;
    for (;;) {
        spin_then_wait(generation_, seen);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_acquire)) return;
        run_job_as(worker);
    }
}

void ThreadPool::run_job_as(int worker) {
    job_(worker);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
}

void ThreadPool::start(std::function<void(int worker)> job) {
    if (job_active_) fail("thread pool: a job is already running");
    job_ = std::move(job);
    job_active_ = true;
    pending_.store(n_threads_, std::memory_order_release);
    barrier_count_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
}

void ThreadPool::wait() {
    if (!job_active_) return;
    run_job_as(0);
    for (int left = pending_.load(std::memory_order_acquire); left != 0;
         left = pending_.load(std::memory_order_acquire)) {
        spin_then_wait(pending_, left);
    }
    job_active_ = false;
}

void ThreadPool::run(const std::function<void(int worker)>& job) {
    if (n_threads_ == 1) {
        job(0);
        return;
    }
    start(job);
    wait();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& body) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (n_threads_ == 1 || n <= grain) {
        for (int64_t begin = 0; begin < n; begin += grain) body(begin, std::min(n, begin + grain), 0);
        return;
    }
    std::atomic<int64_t> next{0};
    run([&](int worker) {
        for (;;) {
            int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
            if (begin >= n) break;
            body(begin, std::min(n, begin + grain), worker);
        }
    });
}

void ThreadPool::barrier() {
    if (n_threads_ == 1) return;
    uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_acq_rel);
        barrier_phase_.notify_all();
        return;
    }
    spin_then_wait(barrier_phase_, phase);
}

}  // namespace tandem
