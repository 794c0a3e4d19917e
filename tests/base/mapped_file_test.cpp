// MappedFile: maps what is on disk, and a missing path is one error line naming it.
#include "base/mapped_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

TEST(MappedFile, MapsTheBytesOnDisk) {
    testing::TempDir dir;
    const std::string path = dir.path() + "/bytes.bin";
    std::string bytes;
    for (int i = 0; i < 5000; ++i) bytes.push_back(static_cast<char>(i * 7));
    std::ofstream(path, std::ios::binary) << bytes;
    MappedFile file(path);
    ASSERT_EQ(file.size(), bytes.size());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), file.size()), bytes);
    EXPECT_EQ(file.path(), path);
}

TEST(MappedFile, MissingFileNamesThePath) {
    testing::TempDir dir;
    const std::string path = dir.path() + "/absent.gguf";
    try {
        MappedFile file(path);
        FAIL() << "mapped a file that does not exist";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(path), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
}

TEST(MappedFile, EmptyFileAndFolderAreHandled) {
    testing::TempDir dir;
    const std::string empty = dir.file("empty.gguf");
    std::ofstream(empty).close();
    MappedFile file(empty);
    EXPECT_EQ(file.size(), 0u);
    EXPECT_THROW(MappedFile folder(dir.path()), Error);
}

}  // namespace
}  // namespace tandem
