// Opening a model's GGUF file or split parts the way a command that runs it wants them held:
// memory-mapped and paged in (the default), read into memory (--no-mmap), locked in RAM
// (--mlock), or left on disk when larger than the available memory; with progress for big
// files and log lines saying which of these is in effect.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf_reader.h"

namespace tandem {

struct LoadOptions {
    // false (--no-mmap): read the files into host memory from host_allocator() (pinned memory
    // once a GPU backend installs its allocator) instead of mapping them.
    bool mmap = true;
    // --mlock: lock the weights in RAM (mapped or read). Failing that, a warning says why and how
    // to raise the memory-lock limit, and the model runs unlocked.
    bool mlock = false;
    // Mapped: read every page in at load when the model fits in the available memory, as
    // llama.cpp does, so the first tokens do not wait on the disk.
    bool prefetch = true;
    // With prefetch: page in on a thread (BackgroundPageIn) and return at once, so a server
    // answers while the weights come in; without, page in before returning.
    bool prefetch_in_background = false;
    // Progress, the memory warning and the summary line; off where only metadata is read.
    bool verbose = true;
};

// Opens `path` (a whole model or any part of a split one: gguf_split.h) and holds its bytes as
// `options` say. Throws Error naming the file on the first problem; --no-mmap refuses a model
// larger than the available memory up front. A model larger than the available memory loads
// mapped (not paged in, not locked) with one warning line saying what that costs.
std::unique_ptr<GgufFile> open_gguf_model(const std::string& path, const LoadOptions& options = {});

// The options for commands that read only metadata and the tensor table (inspect, tokenize).
inline LoadOptions metadata_only() {
    LoadOptions o;
    o.prefetch = false;
    o.verbose = false;
    return o;
}

}  // namespace tandem
