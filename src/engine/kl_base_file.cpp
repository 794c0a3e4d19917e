// The KL divergence mode's base file.
#include "engine/kl_base_file.h"

#include <cstring>

#include "base/error.h"

namespace tandem {
namespace {

constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'E', 'M', 'K', 'L'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kHeaderBytes = sizeof(kMagic) + 6 * sizeof(uint32_t);
// Bounds that keep a hostile header's sizes far from overflow (a vocabulary of 16 M tokens and
// windows of 16 M positions are beyond any model).
constexpr uint32_t kMaxDimension = 1u << 24;

}  // namespace

uint64_t KlBaseHeader::window_bytes() const {
    return uint64_t{n_ctx} * sizeof(int32_t) + scored_rows() * n_vocab * sizeof(float);
}

KlBaseWriter::KlBaseWriter(const std::string& path, const KlBaseHeader& header)
    : path_(path), header_(header) {
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) fail("{}: cannot create ({})", path, std::strerror(errno));
    const uint32_t fields[6] = {kVersion,       header.n_vocab,      header.n_ctx,
                                header.stride,  header.first_target, header.n_windows};
    write(kMagic, sizeof(kMagic));
    write(fields, sizeof(fields));
}

KlBaseWriter::~KlBaseWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void KlBaseWriter::write(const void* data, size_t bytes) {
    if (std::fwrite(data, 1, bytes, file_) != bytes)
        fail("{}: write failed ({})", path_, std::strerror(errno));
}

void KlBaseWriter::add_window(std::span<const int32_t> tokens, std::span<const float> log_probs) {
    if (tokens.size() != header_.n_ctx ||
        log_probs.size() != header_.scored_rows() * header_.n_vocab || written_ >= header_.n_windows)
        fail("{}: window {} does not fit the file's header", path_, written_);
    write(tokens.data(), tokens.size_bytes());
    write(log_probs.data(), log_probs.size_bytes());
    ++written_;
}

void KlBaseWriter::finish() {
    if (written_ != header_.n_windows)
        fail("{}: {} of {} windows written", path_, written_, header_.n_windows);
    std::FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0) fail("{}: write failed ({})", path_, std::strerror(errno));
}

KlBaseReader::KlBaseReader(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) fail("{}: cannot open ({})", path, std::strerror(errno));
    char magic[sizeof(kMagic)];
    uint32_t fields[6];
    if (std::fread(magic, 1, sizeof(magic), file_) != sizeof(magic) ||
        std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 ||
        std::fread(fields, 1, sizeof(fields), file_) != sizeof(fields)) {
        fail("{}: not a KL divergence base file (written by tandem perplexity "
             "--kl-divergence-base)",
             path);
    }
    if (fields[0] != kVersion)
        fail("{}: KL divergence base file version {} (this build reads {})", path, fields[0],
             kVersion);
    header_ = {fields[1], fields[2], fields[3], fields[4], fields[5]};
    const KlBaseHeader& h = header_;
    if (h.n_vocab == 0 || h.n_vocab > kMaxDimension || h.n_ctx < 2 || h.n_ctx > kMaxDimension ||
        h.first_target == 0 || h.first_target >= h.n_ctx || h.stride == 0 ||
        h.stride > h.n_ctx || h.n_windows == 0 || h.n_windows > kMaxDimension) {
        fail("{}: KL divergence base header out of range (vocabulary {}, window {}, stride {}, "
             "first scored position {}, {} windows)",
             path, h.n_vocab, h.n_ctx, h.stride, h.first_target, h.n_windows);
    }
    if (std::fseek(file_, 0, SEEK_END) != 0)
        fail("{}: cannot seek ({})", path, std::strerror(errno));
    const long size = std::ftell(file_);
    const uint64_t expected = kHeaderBytes + h.n_windows * h.window_bytes();
    if (size < 0 || static_cast<uint64_t>(size) != expected) {
        fail("{}: {} bytes where its header says {} ({} windows of {} bytes): {}", path, size,
             expected, h.n_windows, h.window_bytes(),
             static_cast<uint64_t>(size) < expected ? "truncated" : "trailing bytes");
    }
    std::fseek(file_, static_cast<long>(kHeaderBytes), SEEK_SET);
}

KlBaseReader::~KlBaseReader() {
    if (file_ != nullptr) std::fclose(file_);
}

void KlBaseReader::read(void* data, size_t bytes) {
    if (std::fread(data, 1, bytes, file_) != bytes)
        fail("{}: read failed at window {}", path_, read_);
}

void KlBaseReader::next_window(std::vector<int32_t>& tokens, std::vector<float>& log_probs) {
    if (read_ >= header_.n_windows)
        fail("{}: holds {} windows, more were asked for", path_, header_.n_windows);
    tokens.resize(header_.n_ctx);
    log_probs.resize(header_.scored_rows() * header_.n_vocab);
    read(tokens.data(), tokens.size() * sizeof(int32_t));
    read(log_probs.data(), log_probs.size() * sizeof(float));
    ++read_;
}

}  // namespace tandem
