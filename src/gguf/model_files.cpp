// Opening a model's files and holding their bytes: mmap, no-mmap, mlock, page-in, progress.
#include "gguf/model_files.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/resident_memory.h"
#include "base/system_memory.h"
#include "base/timer.h"
#include "gguf/gguf_split.h"

namespace tandem {
namespace {

uint64_t total_bytes(const GgufFile& f) {
    uint64_t n = 0;
    for (const GgufPart& p : f.parts()) n += p.size;
    return n;
}

std::string part_count(const GgufFile& f) {
    const size_t n = f.parts().size();
    return n == 1 ? "1 file" : fmt::format("{} parts", n);
}

}  // namespace

std::unique_ptr<GgufFile> open_gguf_model(const std::string& path, const LoadOptions& options) {
    Stopwatch watch;
    // Mapped first, whatever the mode: every part is found and checked before a byte of weights
    // is read.
    std::unique_ptr<GgufFile> model =
        open_gguf_parts(path, [](const std::string& p) { return FileImage::map(p); });
    if (!options.verbose && options.mmap && !options.mlock && !options.prefetch) return model;

    const uint64_t total = total_bytes(*model);
    const int n_parts = static_cast<int>(model->parts().size());
    const SystemMemory memory = system_memory();
    const bool fits = total <= memory.available;
    std::string mode;

    if (!options.mmap) {
        if (!fits) {
            fail(
                "{}: --no-mmap reads the model ({}) into memory, but only {} is available ({}); "
                "run without --no-mmap to use it from the mapping",
                path, format_bytes(total), format_bytes(memory.available), memory.source);
        }
        model.reset();  // unmapped before it is read
        LoadProgress progress("reading", total, n_parts, options.verbose);
        int opened = 0;
        model = open_gguf_parts(path, [&](const std::string& p) {
            progress.set_part(opened++);
            return FileImage::read(p, progress.callback());
        });
        mode = fmt::format("no-mmap (read into memory: {})", host_allocator().name);
    } else if (!fits) {
        log_warn(
            "{}: the model ({}) is larger than the available memory ({}, {}): it runs from the "
            "mapping, reading weights from disk as it uses them: each token waits on the disk for "
            "the weights it needs, many times slower than from memory; not paged in{}",
            path, format_bytes(total), format_bytes(memory.available), memory.source,
            options.mlock ? ", not locked (--mlock ignored)" : "");
        mode = "mmap (larger than memory: read from disk as used)";
    } else if (options.prefetch && !options.mlock && options.prefetch_in_background) {
        std::vector<std::span<const uint8_t>> ranges;
        for (const GgufPart& p : model->parts()) ranges.emplace_back(p.data, p.size);
        model->hold_page_in(std::make_unique<BackgroundPageIn>(std::move(ranges)));
        mode = "mmap (paging in, in the background)";
    } else if (options.prefetch && !options.mlock) {
        LoadProgress progress("paging in", total, n_parts, options.verbose);
        for (int i = 0; i < n_parts; ++i) {
            progress.set_part(i);
            page_in(model->parts()[i].data, model->parts()[i].size, progress.callback());
        }
        mode = "mmap (paged in)";
    } else {
        mode = "mmap";
    }

    if (options.mlock && fits) {
        LoadProgress progress("locking", total, n_parts, options.verbose);
        std::vector<std::span<const uint8_t>> ranges;
        for (const GgufPart& p : model->parts()) ranges.emplace_back(p.data, p.size);
        auto lock = std::make_unique<MemoryLock>();
        const std::string why = lock->lock(ranges, progress.callback());
        if (why.empty()) {
            model->hold_lock(std::move(lock));
            mode += ", mlock (locked in RAM)";
        } else {
            log_warn("--mlock: {}; the weights stay {} but unlocked", why,
                     options.mmap ? "mapped" : "in memory");
            mode += ", mlock failed (not locked)";
        }
    }
    if (options.verbose) {
        const double seconds = watch.seconds();
        const std::string rate =
            seconds >= 0.1
                ? fmt::format(" ({:.2f} GiB/s)", static_cast<double>(total) / (1u << 30) / seconds)
                : "";
        log_info("loaded {} from {} in {:.2f} s{}; weights: {}", format_bytes(total),
                 part_count(*model), seconds, rate, mode);
    }
    return model;
}

}  // namespace tandem
