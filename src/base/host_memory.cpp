// Host memory for weights read into memory.
#include "base/host_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "base/error.h"

namespace tandem {
namespace {

// Anonymous pages: page-aligned, untouched until written, and returned to the system at once
// when released. Transparent huge pages are asked for (best effort) because decode reads every
// weight byte each step and fewer TLB misses help.
void* allocate_anonymous(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void release_anonymous(void* data, size_t bytes) {
    ::munmap(data, bytes);
}

constexpr HostAllocator kAnonymous{"anonymous pages", allocate_anonymous, release_anonymous};

std::mutex& allocator_mutex() {
    static std::mutex m;
    return m;
}
HostAllocator& current_allocator() {
    static HostAllocator a = kAnonymous;
    return a;
}

std::string gib(size_t bytes) {
    return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30));
}

}  // namespace

const HostAllocator& host_allocator() {
    std::lock_guard<std::mutex> lock(allocator_mutex());
    return current_allocator();
}

void set_host_allocator(const HostAllocator& allocator) {
    std::lock_guard<std::mutex> lock(allocator_mutex());
    current_allocator() = allocator;
}

HostBuffer::HostBuffer(size_t bytes, const std::string& what) {
    {
        std::lock_guard<std::mutex> lock(allocator_mutex());
        allocator_ = current_allocator();
    }
    if (bytes == 0) return;
    errno = 0;
    void* p = allocator_.allocate(bytes);
    if (p == nullptr) {
        const int err = errno;
        fail("{}: cannot allocate {} ({} bytes) of host memory ({}): {}", what, gib(bytes), bytes,
             allocator_.name, err != 0 ? std::strerror(err) : "refused");
    }
    data_ = static_cast<uint8_t*>(p);
    size_ = bytes;
}

HostBuffer::~HostBuffer() {
    reset();
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      allocator_(other.allocator_) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        allocator_ = other.allocator_;
    }
    return *this;
}

void HostBuffer::reset() {
    if (data_ != nullptr) allocator_.release(data_, size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace tandem
