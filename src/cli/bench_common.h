// Helpers shared by the `tandem bench` subcommands: run timing, medians, a STREAM-style read
// bandwidth, cache sizes, 64-byte aligned buffers and the oracle kit's paths and processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "base/timer.h"  // median

namespace tandem::cli {

// 64-byte aligned memory, uninitialised.
class AlignedBuffer {
  public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes);
    uint8_t* data() const { return p_.get(); }
    size_t size() const { return size_; }

  private:
    std::unique_ptr<uint8_t, decltype(&std::free)> p_{nullptr, &std::free};
    size_t size_ = 0;
};

// Bytes of the data (or unified) cache of a level (2 or 3) from sysfs, else sysconf; 0 unknown.
size_t cache_bytes(int level);

// How many of `threads` busy workers share one L2 cache, the scheduler spreading them evenly:
// the CPUs per L2 from sysfs (else the SMT siblings of a core), and the threads over the L2s.
int threads_per_l2(int threads);

// STREAM-style read bandwidth in GB/s: every worker of the pool sums its slice of a `bytes`
// buffer; the median (or best) pass over about `seconds`, of passes with and without software
// prefetch, whichever is faster.
double stream_read_gbs(ThreadPool& pool, size_t bytes, double seconds, bool best = false);

// The oracle kit (../shared/oracle): where setup.sh put its tools, libraries and headers, from
// ORACLE_BIN / ORACLE_LIBDIR / ORACLE_SRC, else TANDEM_ORACLE_DIR or ~/.cache/tandem-oracle.
// Empty strings when not found.
struct OracleKit {
    std::string bin;      // holds llama_logits and kern
    std::string libdir;   // the shipped libggml*.so
    std::string include;  // ggml/include of llama.cpp v0.4.0
    bool has_llama_logits() const;
    bool has_ggml() const;  // libraries and headers, for programs built at bench time
};
OracleKit find_oracle_kit();

// Runs a shell command and returns its standard output (stderr goes to /dev/null unless the
// command redirects it); exit_code gets the exit status.
std::string run_command(const std::string& command, int* exit_code = nullptr);

// The directory of the running executable.
std::string executable_dir();

}  // namespace tandem::cli
