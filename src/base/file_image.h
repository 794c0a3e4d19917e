// The bytes of a whole file, either memory-mapped in place (the default: weights are read where
// they lie) or read into host memory (--no-mmap, through host_allocator()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/host_memory.h"
#include "base/mapped_file.h"
#include "base/progress.h"

namespace tandem {

class FileImage {
  public:
    // Maps `path` read-only; throws Error naming the path on failure.
    static std::unique_ptr<FileImage> map(const std::string& path);
    // Reads `path` into a HostBuffer, calling `on_bytes` as it goes; throws Error naming the
    // path and the offset on failure (a file that shrinks while read included).
    static std::unique_ptr<FileImage> read(const std::string& path,
                                           const ByteCallback& on_bytes = {});

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }
    bool mapped() const { return mapping_ != nullptr; }

  private:
    FileImage() = default;

    std::string path_;
    std::unique_ptr<MappedFile> mapping_;
    HostBuffer buffer_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace tandem
