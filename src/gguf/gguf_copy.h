// Copies metadata values and tensors from a parsed GGUF file into a writer, so a file can be
// rewritten with changes (keys dropped or replaced, tensors removed or reshaped) — used by tests
// that build broken models and by tools that edit files.
#pragma once

#include <functional>
#include <string_view>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace tandem {

// Writes `value` under `key` with the same type.
void copy_value(GgufWriter& writer, std::string_view key, const GgufValue& value);

struct GgufEdit {
    // Return false to drop a key (general.alignment is always handled by the writer).
    std::function<bool(std::string_view key)> keep_key = [](std::string_view) { return true; };
    // Return false to drop a tensor.
    std::function<bool(const GgufTensor&)> keep_tensor = [](const GgufTensor&) { return true; };
    // Called after the copied keys, to add or replace values.
    std::function<void(GgufWriter&)> add_keys = [](GgufWriter&) {};
};

// Copies `file` into a new writer with the edit applied; tensor bytes are copied from the
// mapping when the writer writes, so `file` must outlive the writer. A split model's parts
// joined copy as one whole model (without split.no, split.count, split.tensors.count).
GgufWriter copy_gguf(const GgufFile& file, const GgufEdit& edit = {});

}  // namespace tandem
