// BackgroundPageIn: every range comes into memory on its thread (the page cache holds the pages
// afterwards, where it did not before), and destroying it mid-way stops after one chunk instead of
// reading on through memory about to be unmapped.
#include "base/background_page_in.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "base/mapped_file.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

// A sparse file: nothing of it is in the page cache until read.
std::string sparse_file(const testing::TempDir& dir, const std::string& name, uint64_t size) {
    const std::string path = dir.path() + "/" + name;
    { std::ofstream(path, std::ios::binary); }
    std::filesystem::resize_file(path, size);
    return path;
}

// Pages of the mapping in the page cache.
size_t resident_pages(const MappedFile& file) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in_core((file.size() + page - 1) / page);
    EXPECT_EQ(::mincore(const_cast<uint8_t*>(file.data()), file.size(), in_core.data()), 0);
    size_t n = 0;
    for (unsigned char c : in_core) n += c & 1;
    return n;
}

TEST(BackgroundPageIn, PagesEveryRangeIn) {
    testing::TempDir dir;
    // qemu-user accepts madvise() and does nothing (tools/test-aarch64.sh sets this).
    if (std::getenv("TANDEM_UNDER_QEMU") != nullptr) GTEST_SKIP() << "qemu-user ignores madvise()";
    const MappedFile a(sparse_file(dir, "a.bin", uint64_t{40} << 20));
    const MappedFile b(sparse_file(dir, "b.bin", (uint64_t{3} << 20) + 123));
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    ASSERT_LT(resident_pages(a), a.size() / page / 2);
    BackgroundPageIn page_in({{a.data(), a.size()}, {b.data(), b.size()}});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!page_in.done() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(page_in.done());
    EXPECT_EQ(page_in.bytes_done(), a.size() + b.size());
    EXPECT_EQ(resident_pages(a), (a.size() + page - 1) / page);
    EXPECT_EQ(resident_pages(b), (b.size() + page - 1) / page);
}

TEST(BackgroundPageIn, DestroyedMidwayStopsAfterAChunk) {
    testing::TempDir dir;
    const MappedFile big(sparse_file(dir, "big.bin", uint64_t{1} << 30));
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const auto start = std::chrono::steady_clock::now();
    { BackgroundPageIn page_in({{big.data(), big.size()}}); }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    // At most a chunk or two of the gibibyte was read before the stop was seen.
    EXPECT_LT(resident_pages(big), big.size() / page / 4);
}

}  // namespace
}  // namespace tandem
