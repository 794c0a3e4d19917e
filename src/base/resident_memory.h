// Keeping weights in RAM: paging a mapping in at load (so the first tokens do not wait on the
// disk) and locking memory with mlock (--mlock), with the memory-lock limit explained when it
// stands in the way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/progress.h"

namespace tandem {

// Reads the pages of [data, data + size) into memory now, in order, calling `on_bytes` as it
// goes (MADV_POPULATE_READ where the kernel has it, else one read per page).
void page_in(const uint8_t* data, size_t size, const ByteCallback& on_bytes = {});

// Locks ranges of memory in RAM (mlock) until destroyed.
class MemoryLock {
  public:
    MemoryLock() = default;
    ~MemoryLock();
    MemoryLock(const MemoryLock&) = delete;
    MemoryLock& operator=(const MemoryLock&) = delete;

    // Locks every range, first raising the soft RLIMIT_MEMLOCK towards the hard one when it is
    // too low. Returns "" on success; on failure unlocks what it had locked and returns one line
    // saying why and, where the limit is the cause, how to raise it.
    std::string lock(const std::vector<std::span<const uint8_t>>& ranges,
                     const ByteCallback& on_bytes = {});
    uint64_t locked_bytes() const;

  private:
    void unlock_all();
    std::vector<std::span<const uint8_t>> locked_;
};

}  // namespace tandem
