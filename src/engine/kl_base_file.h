// The base model's side of perplexity's KL divergence mode (`tandem perplexity
// --kl-divergence-base FILE`, as llama-perplexity's): a run of the base model writes each
// window's tokens and the log-probabilities of its scored rows; a run of the model under test
// over the same text and windows reads them back (`--kl-divergence`) and compares.
//
// Format, little-endian: "TANDEMKL", u32 version (1), u32 n_vocab, n_ctx, stride, first_target,
// n_windows; then per window its n_ctx token ids (i32) and (n_ctx - first_target) rows of n_vocab
// log-probabilities (f32), n_vocab · 4 bytes per scored token.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace tandem {

struct KlBaseHeader {
    uint32_t n_vocab = 0;
    uint32_t n_ctx = 0;
    uint32_t stride = 0;
    uint32_t first_target = 0;
    uint32_t n_windows = 0;

    uint64_t scored_rows() const { return n_ctx - first_target; }
    uint64_t window_bytes() const;
    bool operator==(const KlBaseHeader&) const = default;
};

class KlBaseWriter {
  public:
    // Creates (truncates) path; throws Error naming it when it cannot.
    KlBaseWriter(const std::string& path, const KlBaseHeader& header);
    ~KlBaseWriter();
    KlBaseWriter(const KlBaseWriter&) = delete;
    KlBaseWriter& operator=(const KlBaseWriter&) = delete;

    // tokens: n_ctx ids; log_probs: scored_rows() × n_vocab.
    void add_window(std::span<const int32_t> tokens, std::span<const float> log_probs);
    // After the header's n_windows windows: flushes and closes, throwing on a write error.
    void finish();

  private:
    void write(const void* data, size_t bytes);

    std::string path_;
    KlBaseHeader header_;
    std::FILE* file_ = nullptr;
    uint32_t written_ = 0;
};

class KlBaseReader {
  public:
    // Opens path and checks its header and size: a file that is not one, a truncated one or one
    // of another length is refused in one line naming it.
    explicit KlBaseReader(const std::string& path);
    ~KlBaseReader();
    KlBaseReader(const KlBaseReader&) = delete;
    KlBaseReader& operator=(const KlBaseReader&) = delete;

    const KlBaseHeader& header() const { return header_; }
    // The next window's tokens (n_ctx) and log-probabilities (scored_rows() × n_vocab).
    void next_window(std::vector<int32_t>& tokens, std::vector<float>& log_probs);

  private:
    void read(void* data, size_t bytes);

    std::string path_;
    KlBaseHeader header_;
    std::FILE* file_ = nullptr;
    uint32_t read_ = 0;
};

}  // namespace tandem
