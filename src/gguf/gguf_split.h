// Split GGUF models, as llama.cpp's gguf-split writes them and its model loader reads them
// (tools/gguf-split, src/llama-model-loader.cpp): the parts are named PREFIX-%05d-of-%05d.gguf
// (numbered from 1); the first holds all the metadata; every part holds split.no (u16, from 0),
// split.count (u16) and split.tensors.count (i32, the tensors of the whole model); each tensor
// lies whole in one part.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file_image.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace tandem {

namespace split_keys {
inline constexpr const char* kNo = "split.no";
inline constexpr const char* kCount = "split.count";
inline constexpr const char* kTensorsCount = "split.tensors.count";
}  // namespace split_keys

// "PREFIX-00002-of-00005.gguf" for index 1 of 5 (llama_split_path).
std::string split_part_path(const std::string& prefix, int index, int count);

struct SplitName {
    std::string prefix;
    int index;  // from 0
    int count;
};
// What a file name says: "m-00002-of-00005.gguf" -> {"m", 1, 5}; nullopt for other names.
std::optional<SplitName> parse_split_path(const std::string& path);

struct SplitInfo {
    int index;          // split.no
    int count;          // split.count
    int64_t n_tensors;  // split.tensors.count
};
// The split keys of one file; nullopt when it has none (a whole model). Throws Error naming the
// file and key when they are partial or out of range.
std::optional<SplitInfo> read_split_info(const GgufFile& file);

// Opens the file a part's bytes come from (mapped or read). open_gguf_parts calls it once per
// part: the given one first, then the others in order.
using PartOpener = std::function<std::unique_ptr<FileImage>(const std::string& path)>;

// Opens `path` and, when it is one part of a split model (any part), every part, found by name,
// and joins them into one GgufFile (metadata from the first part, tensors from all). Each part is
// checked before the model is returned, and each problem is one Error naming the file: a missing
// part (the name looked for), parts of different split models or counts, a part whose split.no
// is not the one its name says, a tensor in two parts, split.tensors.count not matching the
// tensors the parts hold. The paths of the parts are in the result's parts().
std::unique_ptr<GgufFile> open_gguf_parts(const std::string& path, const PartOpener& open_part);

struct GgufSplitLayout {
    int n_parts = 1;
    // gguf-split's --no-tensor-first-split: the first part holds only metadata.
    bool metadata_only_first = false;
};

// Writes `writer` as layout.n_parts files PREFIX-0000i-of-0000n.gguf, PREFIX being `path` less a
// ".gguf" ending, with the split keys as gguf-split writes them; tensors are spread in order so
// the parts hold about the same bytes, at least one tensor each. One part writes `path` as a
// whole model. Returns the paths written; throws Error (and leaves no part behind) on failure.
std::vector<std::string> write_gguf_parts(const GgufWriter& writer, const std::string& path,
                                          const GgufSplitLayout& layout);

}  // namespace tandem
