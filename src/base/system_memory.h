// How much memory this machine (or the memory cgroup the process runs in) has, and how much of
// it is available, to tell whether a model fits before loading it.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

struct SystemMemory {
    uint64_t total = 0;      // bytes of RAM this process may use
    uint64_t available = 0;  // bytes it can take now without swapping or being killed
    std::string source;      // where `available` came from, for logs
};

// /proc/meminfo's MemTotal and MemAvailable (which counts reclaimable page cache as available),
// lowered to a memory cgroup's limit less its unreclaimable usage where one applies (v2 or v1).
// TANDEM_MEMORY_AVAILABLE (bytes, or a number with a K, M, G or T suffix) overrides
// `available`: to see what happens on a smaller machine, or where detection is wrong.
SystemMemory system_memory();

// "12.34 GiB", "512.00 MiB", "17 B".
std::string format_bytes(uint64_t bytes);

}  // namespace tandem
