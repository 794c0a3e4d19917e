// Keeping weights in RAM: page-in and mlock.
#include "base/resident_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/log.h"
#include "base/system_memory.h"

// Linux 5.14; older headers lack the name, older kernels answer EINVAL.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace tandem {
namespace {

size_t page_size() {
    static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

// Work in chunks this large, so progress moves and nothing waits long on one call.
constexpr size_t kChunk = size_t{64} << 20;

std::string limit_text(rlim_t v) {
    return v == RLIM_INFINITY ? "unlimited" : format_bytes(v);
}

}  // namespace

void page_in(const uint8_t* data, size_t size, const ByteCallback& on_bytes) {
    if (data == nullptr || size == 0) return;
    const size_t page = page_size();
    const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
    bool populate = true;
    for (uintptr_t at = start; at < end; at += kChunk) {
        const size_t len = static_cast<size_t>(std::min<uintptr_t>(kChunk, end - at));
        if (populate && ::madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_READ) != 0) {
            populate = false;  // an older kernel: touch the pages instead
        }
        if (!populate) {
            ::madvise(reinterpret_cast<void*>(at), len, MADV_WILLNEED);
            uint8_t sum = 0;
            for (uintptr_t p = at; p < at + len; p += page)
                sum ^= *reinterpret_cast<const volatile uint8_t*>(p);
            asm volatile("" : : "r"(sum));
        }
        if (on_bytes) {
            const uintptr_t from = std::max<uintptr_t>(at, reinterpret_cast<uintptr_t>(data));
            on_bytes(at + len > from ? at + len - from : 0);
        }
    }
}

MemoryLock::~MemoryLock() {
    unlock_all();
}

uint64_t MemoryLock::locked_bytes() const {
    uint64_t n = 0;
    for (const auto& r : locked_) n += r.size();
    return n;
}

void MemoryLock::unlock_all() {
    for (const auto& r : locked_) ::munlock(r.data(), r.size());
    locked_.clear();
}

std::string MemoryLock::lock(const std::vector<std::span<const uint8_t>>& ranges,
                             const ByteCallback& on_bytes) {
    const size_t page = page_size();
    uint64_t wanted = locked_bytes();
    for (const auto& r : ranges) wanted += r.size() + page;  // page rounding at both ends

    // The soft limit may be raised up to the hard one without privileges.
    rlimit limit{};
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < wanted && limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? RLIM_INFINITY : limit.rlim_max;
        if (::setrlimit(RLIMIT_MEMLOCK, &raised) == 0) {
            log_info("mlock: raised the soft memory-lock limit from {} to {}",
                     limit_text(limit.rlim_cur), limit_text(raised.rlim_cur));
            limit = raised;
        }
    }

    uint64_t requested = 0;
    for (const auto& r : ranges) requested += r.size();
    for (const auto& r : ranges) {
        const uintptr_t start = reinterpret_cast<uintptr_t>(r.data()) & ~(page - 1);
        const uintptr_t end = reinterpret_cast<uintptr_t>(r.data()) + r.size();
        for (uintptr_t at = start; at < end; at += kChunk) {
            const size_t len = static_cast<size_t>(std::min<uintptr_t>(kChunk, end - at));
            if (::mlock(reinterpret_cast<const void*>(at), len) != 0) {
                const int err = errno;
                const uint64_t done = locked_bytes() + (at - start);
                // Unlock the part of this range already locked, then the earlier ranges.
                if (at > start) ::munlock(reinterpret_cast<const void*>(start), at - start);
                unlock_all();
                std::string why =
                    fmt::format("cannot lock {} of weights in memory: {} (after {})",
                                format_bytes(requested), std::strerror(err), format_bytes(done));
                const bool limited = limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted;
                if (err == EPERM || ((err == ENOMEM || err == EAGAIN) && limited)) {
                    why += fmt::format(
                        "; the memory-lock limit (RLIMIT_MEMLOCK) is {} (hard limit {}): raise it "
                        "with 'ulimit -l unlimited' in the shell that starts tandem (above the "
                        "hard "
                        "limit: 'memlock' in /etc/security/limits.conf, LimitMEMLOCK=infinity for "
                        "a "
                        "systemd service, --ulimit memlock=-1 for docker), or run as a user with "
                        "CAP_IPC_LOCK",
                        limit_text(limit.rlim_cur), limit_text(limit.rlim_max));
                } else if (err == ENOMEM || err == EAGAIN) {
                    why += fmt::format("; {} of memory is available",
                                       format_bytes(system_memory().available));
                }
                return why;
            }
            if (on_bytes) {
                const uintptr_t from =
                    std::max<uintptr_t>(at, reinterpret_cast<uintptr_t>(r.data()));
                on_bytes(at + len > from ? at + len - from : 0);
            }
        }
        locked_.emplace_back(reinterpret_cast<const uint8_t*>(start), end - start);
    }
    return {};
}

}  // namespace tandem
