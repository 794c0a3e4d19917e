// Helpers shared by the `tandem bench` subcommands.
#include "cli/bench_common.h"

#include <sys/wait.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/timer.h"
#include "kernels/kernel_table.h"

namespace tandem::cli {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
    p_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    if (!p_) fail("cannot allocate {} MiB", bytes >> 20);
}

size_t cache_bytes(int level) {
    // sysfs first: sysconf is wrong in some VMs.
    for (int i = 0; i < 8; ++i) {
        const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
        std::ifstream lv(dir + "level");
        int l = 0;
        if (!(lv >> l)) break;
        if (l != level) continue;
        std::ifstream type(dir + "type");
        std::string t;
        if (type >> t && t == "Instruction") continue;
        std::ifstream size(dir + "size");
        long v = 0;
        char unit = 0;
        if (size >> v) {
            size >> unit;
            return static_cast<size_t>(v) * (unit == 'K' ? 1024 : unit == 'M' ? 1048576 : 1);
        }
    }
    const long v = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? static_cast<size_t>(v) : 0;
}

int threads_per_l2(int threads) {
    const CpuFeatures& cpu = cpu_features();
    const int logical = std::max(1, cpu.logical_cores);
    // CPUs on one L2: CPU 0's from sysfs (a list such as "0-1" or "0,8"), else its SMT siblings.
    int ways = 0;
    std::ifstream list("/sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_list");
    std::string text;
    if (list >> text) {
        std::istringstream ranges(text);
        std::string range;
        while (std::getline(ranges, range, ',')) {
            int first = 0, last = 0;
            const int n = std::sscanf(range.c_str(), "%d-%d", &first, &last);
            if (n >= 1) ways += n == 1 ? 1 : std::max(0, last - first + 1);
        }
    }
    if (ways < 1 || ways > logical) ways = std::max(1, logical / std::max(1, cpu.physical_cores));
    // The scheduler spreads the workers over the L2s.
    const int n_l2 = std::max(1, logical / ways);
    return std::max(1, (threads + n_l2 - 1) / n_l2);
}

namespace {

// Sums n bytes with 16-byte loads into independent sums (SSE2 is part of x86-64, so this stays
// baseline code): the loads are the limit, as in STREAM's read kernels. With kPrefetch each
// line is prefetched (into L2) kStreamAhead bytes ahead, as the kernels' matvecs do: with many
// cores reading, the hardware prefetchers alone can stay well short of the machine's bandwidth
// (Sapphire Rapids, 16 threads, 1200 MiB: 51-77 GB/s without, 84-89 with; the q8_0 matvec
// reads 82-90).
template <bool kPrefetch>
uint64_t sum_bytes(const uint8_t* p, size_t n) {
#if defined(__SSE2__)
    __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        if constexpr (kPrefetch) {
            __builtin_prefetch(p + i + kStreamAhead, 0, 2);
            __builtin_prefetch(p + i + kStreamAhead + 64, 0, 2);
        }
        const auto* q = reinterpret_cast<const __m128i*>(p + i);
        s0 = _mm_add_epi64(s0, _mm_load_si128(q + 0));
        s1 = _mm_add_epi64(s1, _mm_load_si128(q + 1));
        s2 = _mm_add_epi64(s2, _mm_load_si128(q + 2));
        s3 = _mm_add_epi64(s3, _mm_load_si128(q + 3));
        s0 = _mm_add_epi64(s0, _mm_load_si128(q + 4));
        s1 = _mm_add_epi64(s1, _mm_load_si128(q + 5));
        s2 = _mm_add_epi64(s2, _mm_load_si128(q + 6));
        s3 = _mm_add_epi64(s3, _mm_load_si128(q + 7));
    }
    const __m128i s = _mm_add_epi64(_mm_add_epi64(s0, s1), _mm_add_epi64(s2, s3));
    return static_cast<uint64_t>(_mm_cvtsi128_si64(s)) +
           static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s)));
#else
    uint64_t s[8] = {};
    for (size_t i = 0; i + 64 <= n; i += 64) {
        if constexpr (kPrefetch) __builtin_prefetch(p + i + kStreamAhead, 0, 2);
        for (int j = 0; j < 8; ++j) {
            uint64_t v;
            std::memcpy(&v, p + i + 8 * j, 8);
            s[j] += v;
        }
    }
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
#endif
}

}  // namespace

double stream_read_gbs(ThreadPool& pool, size_t bytes, double seconds, bool best) {
    AlignedBuffer buf(bytes);
    std::memset(buf.data(), 1, bytes);
    const size_t lines = bytes / 128;
    std::vector<uint64_t> sinks(pool.size() * 8);  // 64 bytes apart: no false sharing
    auto pass = [&](bool prefetch) {
        const double t0 = now_seconds();
        pool.run([&](int worker) {
            const size_t b = lines * worker / pool.size(), e = lines * (worker + 1) / pool.size();
            const uint8_t* p = buf.data() + 128 * b;
            sinks[worker * 8] = prefetch ? sum_bytes<true>(p, 128 * (e - b))
                                         : sum_bytes<false>(p, 128 * (e - b));
        });
        return now_seconds() - t0;
    };
    pass(false);
    // The passes with and without software prefetch alternate; the faster way counts (some
    // machines need it, on others it costs a little).
    std::vector<double> runs[2];
    const double start = now_seconds();
    while (now_seconds() - start < seconds || runs[1].size() < 5) {
        runs[0].push_back(pass(false));
        runs[1].push_back(pass(true));
    }
    const auto pick = [&](std::vector<double>& r) {
        return best ? *std::min_element(r.begin(), r.end()) : median(r);
    };
    return static_cast<double>(bytes) / std::min(pick(runs[0]), pick(runs[1])) / 1e9;
}

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

OracleKit find_oracle_kit() {
    namespace fs = std::filesystem;
    std::string dir = env_or_empty("TANDEM_ORACLE_DIR");
    if (dir.empty() && !env_or_empty("HOME").empty())
        dir = env_or_empty("HOME") + "/.cache/tandem-oracle";
    OracleKit kit;
    kit.bin = env_or_empty("ORACLE_BIN");
    if (kit.bin.empty() && !dir.empty()) kit.bin = dir + "/bin";
    kit.libdir = env_or_empty("ORACLE_LIBDIR");
    if (kit.libdir.empty() && !dir.empty())
        kit.libdir = dir + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64";
    std::string src = env_or_empty("ORACLE_SRC");
    if (src.empty() && !dir.empty()) src = dir + "/llama-src";
    kit.include = src.empty() ? "" : src + "/ggml/include";
    std::error_code ec;
    if (!fs::exists(kit.bin, ec)) kit.bin.clear();
    if (!fs::exists(kit.libdir + "/libggml-base.so", ec)) kit.libdir.clear();
    if (!fs::exists(kit.include + "/ggml-backend.h", ec)) kit.include.clear();
    return kit;
}

bool OracleKit::has_llama_logits() const {
    return !bin.empty() && access((bin + "/llama_logits").c_str(), X_OK) == 0;
}

bool OracleKit::has_ggml() const {
    return !libdir.empty() && !include.empty();
}

std::string run_command(const std::string& command, int* exit_code) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    if (p == nullptr) fail("cannot run: {}", command);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    if (exit_code != nullptr) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

std::string executable_dir() {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : self.parent_path().string();
}

}  // namespace tandem::cli
