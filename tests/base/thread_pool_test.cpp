// The thread pool: every index of a parallel_for is visited exactly once, every worker runs a
// job, barriers separate phases, start()/wait() overlap the caller's own work.
#include "base/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "base/error.h"

// ASan's shadow memory needs more address space than FailsCleanlyWhenThreadsCannotStart allows.
#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_TEST_ASAN 1
#endif
#endif

namespace tandem {
namespace {

TEST(ThreadPool, ParallelForVisitsEveryIndexOnce) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        ASSERT_EQ(pool.size(), threads);
        for (int64_t n : {0, 1, 7, 64, 1000}) {
            for (int64_t grain : {1, 3, 64}) {
                std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
                pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int worker) {
                    ASSERT_LE(e - b, grain);
                    ASSERT_GE(worker, 0);
                    ASSERT_LT(worker, threads);
                    for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
                });
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1)
                        << "index " << i << " of " << n << ", grain " << grain << ", " << threads
                        << " threads";
                }
            }
        }
    }
}

TEST(ThreadPool, RunCallsEveryWorkerOnce) {
    ThreadPool pool(4);
    for (int round = 0; round < 100; ++round) {
        std::vector<std::atomic<int>> calls(4);
        pool.run([&](int worker) { calls[static_cast<size_t>(worker)]++; });
        for (int w = 0; w < 4; ++w) ASSERT_EQ(calls[static_cast<size_t>(w)].load(), 1);
    }
}

TEST(ThreadPool, BarrierSeparatesPhases) {
    ThreadPool pool(3);
    std::atomic<int> arrived{0};
    std::atomic<int> wrong{0};
    pool.run([&](int) {
        for (int phase = 1; phase <= 50; ++phase) {
            arrived++;
            pool.barrier();
            // Everyone has arrived for this phase and nobody has started the next.
            if (arrived.load() != 3 * phase) wrong++;
            pool.barrier();
        }
    });
    EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadPool, StartAndWaitOverlapTheCaller) {
    ThreadPool pool(2);
    std::atomic<int> sum{0};
    pool.start([&](int worker) { sum += worker + 1; });
    EXPECT_TRUE(pool.busy());
    pool.wait();  // runs worker 0 on this thread
    EXPECT_FALSE(pool.busy());
    EXPECT_EQ(sum.load(), 1 + 2);
}

// spin_until returns once its condition holds, and keeps asking through the yielding steps (a
// condition that turns true only long after kSpinsBeforeYield asks).
TEST(ThreadPool, SpinUntilWaitsThroughItsYields) {
    std::atomic<int> asked{0};
    std::atomic<bool> set{false}, returned{false};
    std::thread setter([&] {
        while (asked.load() < 4 * kSpinsBeforeYield && !returned.load()) std::this_thread::yield();
        set = true;
    });
    spin_until([&] {
        asked++;
        return set.load();
    });
    const bool was_set = set.load();
    returned = true;
    setter.join();
    EXPECT_TRUE(was_set) << "spin_until returned after " << asked.load() << " asks, before its "
                         << "condition held";
    EXPECT_GE(asked.load(), 4 * kSpinsBeforeYield + 1);
}

// More threads than cores (the CUDA runtime's host-function thread beside a full pool): jobs
// and barriers still complete in order.
TEST(ThreadPool, OversubscribedPoolKeepsPhases) {
    const int threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ThreadPool pool(threads);
    for (int round = 0; round < 3; ++round) {
        std::atomic<int> arrived{0}, wrong{0};
        pool.run([&](int) {
            for (int phase = 1; phase <= 10; ++phase) {
                arrived++;
                pool.barrier();
                if (arrived.load() != threads * phase) wrong++;
                pool.barrier();
            }
        });
        EXPECT_EQ(wrong.load(), 0) << "round " << round;
    }
}

#if !defined(TANDEM_TEST_ASAN)
// In a child process: limits the address space to 64 MiB more than now (a few 8 MiB thread
// stacks, not 256), starts 256 threads and exits 0 when that fails with the expected Error.
[[noreturn]] void start_pool_beyond_the_address_space() {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const auto limit = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (64 << 20);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    try {
        ThreadPool pool(256);
    } catch (const Error& e) {
        _exit(std::strstr(e.what(), "cannot start 256 threads") != nullptr ? 0 : 1);
    }
    _exit(2);
}
#endif

// A pool the system cannot start fails with an Error naming the count, after joining the
// threads it did start (no std::terminate).
TEST(ThreadPool, FailsCleanlyWhenThreadsCannotStart) {
#if defined(TANDEM_TEST_ASAN)
    GTEST_SKIP() << "ASan reserves more address space than the limit allows";
#else
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) start_pool_beyond_the_address_space();
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
    // (qemu-user maps the threads' stacks inside its own reservation: the limit does not bind)
    if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "the address-space limit does not bind here";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: another error; 3: setrlimit failed";
#endif
}

}  // namespace
}  // namespace tandem
