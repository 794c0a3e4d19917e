// A read-only memory mapping of a whole file; weights are read in place from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

class MappedFile {
public:
    // Maps `path` read-only; throws Error naming the path on failure.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace tandem
