// libFuzzer target: the GGUF reader on arbitrary bytes must either accept the file or throw
// tandem::Error, never crash, leak or read outside the buffer. Accepted files are walked
// completely (every value, every tensor byte) to prove the views stay in bounds; their split
// keys are read, and two parses of them joined as the parts of a split model.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_split.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // A heap copy of exactly `size` bytes so ASan sees any overrun.
    std::vector<uint8_t> copy(data, data + size);
    try {
        auto file = tandem::GgufFile::parse("fuzz.gguf", copy.data(), copy.size());
        volatile uint64_t sink = 0;
        for (const auto& kv : file->metadata()) {
            sink = sink + tandem::gguf_value_to_string(kv.value, 64).size();
        }
        for (const auto& t : file->tensors()) {
            for (uint64_t i = 0; i < t.n_bytes; i += 64) sink = sink + t.data[i];
            if (t.n_bytes > 0) sink = sink + t.data[t.n_bytes - 1];
        }
        (void)tandem::read_split_info(*file);
        std::vector<std::unique_ptr<tandem::GgufFile>> parts;
        parts.push_back(std::move(file));
        parts.push_back(tandem::GgufFile::parse("fuzz-2.gguf", copy.data(), copy.size()));
        auto joined = tandem::GgufFile::join(std::move(parts));
        sink = sink + joined->tensors().size();
    } catch (const tandem::Error&) {
    }
    return 0;
}
