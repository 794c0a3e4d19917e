// The bytes of a whole file, mapped or read into memory.
#include "base/file_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace tandem {
namespace {

// Closes a descriptor on every way out.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

constexpr size_t kReadChunk = size_t{32} << 20;

}  // namespace

std::unique_ptr<FileImage> FileImage::map(const std::string& path) {
    std::unique_ptr<FileImage> image(new FileImage());
    image->path_ = path;
    image->mapping_ = std::make_unique<MappedFile>(path);
    image->data_ = image->mapping_->data();
    image->size_ = image->mapping_->size();
    return image;
}

std::unique_ptr<FileImage> FileImage::read(const std::string& path, const ByteCallback& on_bytes) {
    Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (file.fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(file.fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
    const size_t size = static_cast<size_t>(st.st_size);
    std::unique_ptr<FileImage> image(new FileImage());
    image->path_ = path;
    image->buffer_ = HostBuffer(size, path);
    ::posix_fadvise(file.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint8_t* out = image->buffer_.data();
    size_t done = 0;
    while (done < size) {
        const size_t want = std::min(kReadChunk, size - done);
        const ssize_t got = ::pread(file.fd, out + done, want, static_cast<off_t>(done));
        if (got < 0) {
            if (errno == EINTR) continue;
            fail("{}: read failed at offset {}: {}", path, done, std::strerror(errno));
        }
        if (got == 0)
            fail("{}: the file ended at offset {} while reading {} bytes (did it change?)", path,
                 done, size);
        done += static_cast<size_t>(got);
        if (on_bytes) on_bytes(static_cast<uint64_t>(got));
    }
    image->data_ = out;
    image->size_ = size;
    return image;
}

}  // namespace tandem
