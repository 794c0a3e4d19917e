// Holding a file's bytes: mapped or read (through the one host allocator) they are the same;
// paging in and locking cover every byte; the available memory can be overridden.
#include "base/file_image.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>

#include "base/error.h"
#include "base/host_memory.h"
#include "base/resident_memory.h"
#include "base/system_memory.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

std::string write_bytes(const testing::TempDir& dir, size_t n) {
    const std::string path = dir.file("bytes.bin");
    std::string bytes;
    for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(i * 7 + i / 251));
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

TEST(FileImage, ReadAndMappedHoldTheSameBytes) {
    testing::TempDir dir;
    const std::string path = write_bytes(dir, (size_t{33} << 20) + 4097);  // more than one read chunk
    auto mapped = FileImage::map(path);
    uint64_t reported = 0;
    auto read = FileImage::read(path, [&](uint64_t n) { reported += n; });
    EXPECT_TRUE(mapped->mapped());
    EXPECT_FALSE(read->mapped());
    ASSERT_EQ(read->size(), mapped->size());
    EXPECT_EQ(reported, read->size());
    EXPECT_EQ(std::memcmp(read->data(), mapped->data(), read->size()), 0);
    EXPECT_EQ(read->path(), path);
}

TEST(FileImage, ReadRefusesWhatIsNotAFile) {
    testing::TempDir dir;
    try {
        FileImage::read(dir.file("absent.gguf"));
        FAIL() << "read a file that does not exist";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(dir.file("absent.gguf") + ": cannot open"), std::string::npos) << e.what();
    }
    EXPECT_THROW(FileImage::read(dir.path()), Error);
    std::ofstream(dir.file("empty")).close();
    EXPECT_EQ(FileImage::read(dir.file("empty"))->size(), 0u);
}

// Counts what goes through an installed allocator, as the CUDA backend's pinned one would.
size_t g_allocated = 0, g_released = 0;
void* counting_allocate(size_t bytes) {
    g_allocated += bytes;
    return std::malloc(bytes);
}
void counting_release(void* p, size_t bytes) {
    g_released += bytes;
    std::free(p);
}

TEST(HostMemory, ReadsGoThroughTheInstalledAllocator) {
    testing::TempDir dir;
    const std::string path = write_bytes(dir, 10000);
    const HostAllocator before = host_allocator();
    EXPECT_STREQ(before.name, "anonymous pages");
    set_host_allocator({"counting", counting_allocate, counting_release});
    {
        auto image = FileImage::read(path);
        EXPECT_EQ(g_allocated, 10000u);
        EXPECT_EQ(g_released, 0u);
        // A buffer keeps the allocator it came from.
        set_host_allocator(before);
    }
    EXPECT_EQ(g_released, 10000u);
    HostBuffer moved = HostBuffer(4096, "test");
    EXPECT_STREQ(moved.kind(), "anonymous pages");
    HostBuffer other = std::move(moved);
    EXPECT_EQ(moved.data(), nullptr);
    EXPECT_EQ(other.size(), 4096u);
}

TEST(HostMemory, RefusalNamesWhatAndHowMuch) {
    const HostAllocator before = host_allocator();
    set_host_allocator({"refusing", [](size_t) -> void* { return nullptr; }, [](void*, size_t) {}});
    try {
        HostBuffer b(size_t{3} << 30, "model.gguf");
        FAIL() << "allocated";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("model.gguf: cannot allocate 3.00 GiB"), std::string::npos) << e.what();
    }
    set_host_allocator(before);
}

TEST(ResidentMemory, PageInAndLockCoverEveryByte) {
    testing::TempDir dir;
    const size_t n = (size_t{70} << 20) + 123;
    const std::string path = write_bytes(dir, n);
    auto image = FileImage::map(path);
    uint64_t paged = 0;
    page_in(image->data(), image->size(), [&](uint64_t b) { paged += b; });
    EXPECT_EQ(paged, n);
    MemoryLock lock;
    uint64_t locked = 0;
    const std::string why = lock.lock({{image->data(), image->size()}}, [&](uint64_t b) { locked += b; });
    if (!why.empty()) {
        // Where the memory-lock limit is small (not root), the reason names it.
        EXPECT_NE(why.find("RLIMIT_MEMLOCK"), std::string::npos) << why;
        EXPECT_EQ(lock.locked_bytes(), 0u);
        return;
    }
    EXPECT_EQ(locked, n);
    EXPECT_GE(lock.locked_bytes(), n);
}

TEST(SystemMemory, AvailableCanBeOverridden) {
    const SystemMemory real = system_memory();
    EXPECT_GT(real.total, 0u);
    EXPECT_GT(real.available, 0u);
    EXPECT_LE(real.available, real.total + (uint64_t{1} << 30));
    for (const auto& [text, bytes] : std::vector<std::pair<const char*, uint64_t>>{
             {"12345", 12345}, {"4K", 4096}, {"3M", 3u << 20}, {"2G", uint64_t{2} << 30}, {"1TiB", uint64_t{1} << 40}}) {
        ::setenv("TANDEM_MEMORY_AVAILABLE", text, 1);
        const SystemMemory m = system_memory();
        EXPECT_EQ(m.available, bytes) << text;
        EXPECT_EQ(m.source, "TANDEM_MEMORY_AVAILABLE");
    }
    ::setenv("TANDEM_MEMORY_AVAILABLE", "lots", 1);
    EXPECT_THROW(system_memory(), Error);
    ::unsetenv("TANDEM_MEMORY_AVAILABLE");
    EXPECT_EQ(format_bytes(17), "17 B");
    EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.50 GiB");
}

}  // namespace
}  // namespace tandem
