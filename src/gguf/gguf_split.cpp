// Split GGUF models: naming, the split keys, opening and checking a set of parts, writing one.
#include "gguf/gguf_split.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem {
namespace {

// gguf-split stores split.no and split.count as u16.
constexpr int kMaxParts = 65535;

bool is_digits(std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string split_part_path(const std::string& prefix, int index, int count) {
    return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, index + 1, count);
}

std::optional<SplitName> parse_split_path(const std::string& path) {
    // PREFIX-NNNNN-of-MMMMM.gguf: at least five digits each, as %05d prints them.
    static constexpr std::string_view kSuffix = ".gguf";
    if (path.size() <= kSuffix.size() || !path.ends_with(kSuffix)) return std::nullopt;
    const std::string stem = path.substr(0, path.size() - kSuffix.size());
    const size_t of = stem.rfind("-of-");
    if (of == std::string::npos) return std::nullopt;
    const std::string count = stem.substr(of + 4);
    const size_t dash = stem.rfind('-', of == 0 ? 0 : of - 1);
    if (dash == std::string::npos || dash == 0) return std::nullopt;
    const std::string number = stem.substr(dash + 1, of - dash - 1);
    if (!is_digits(number) || !is_digits(count) || number.size() < 5 || count.size() < 5 ||
        number.size() > 9 || count.size() > 9) {
        return std::nullopt;
    }
    const int n = std::stoi(number), c = std::stoi(count);
    if (n < 1 || c < 1 || n > c) return std::nullopt;
    SplitName name{stem.substr(0, dash), n - 1, c};
    // Only the exact spelling of llama_split_path counts (no extra leading zeros).
    if (split_part_path(name.prefix, name.index, name.count) != path) return std::nullopt;
    return name;
}

std::optional<SplitInfo> read_split_info(const GgufFile& f) {
    const bool has_count = f.has(split_keys::kCount);
    if (!has_count) {
        for (const char* key : {split_keys::kNo, split_keys::kTensorsCount}) {
            if (f.has(key))
                fail("{}: has {} but no {}: a broken split part", f.path(), key,
                     split_keys::kCount);
        }
        return std::nullopt;
    }
    SplitInfo info{};
    info.count = static_cast<int>(f.get_int(split_keys::kCount, 1, kMaxParts));
    info.index = static_cast<int>(f.get_int(split_keys::kNo, 0, info.count - 1));
    info.n_tensors = f.get_int(split_keys::kTensorsCount, 0, INT32_MAX);
    return info;
}

std::unique_ptr<GgufFile> open_gguf_parts(const std::string& path, const PartOpener& open_part) {
    std::unique_ptr<GgufFile> given = GgufFile::open(open_part(path));
    const std::optional<SplitInfo> info = read_split_info(*given);
    if (!info) return given;  // a whole model
    const int count = info->count;
    std::vector<std::unique_ptr<GgufFile>> parts(static_cast<size_t>(count));
    std::vector<std::string> paths(static_cast<size_t>(count));
    if (count == 1) {
        paths[0] = path;
    } else {
        const std::optional<SplitName> name = parse_split_path(path);
        if (!name || name->index != info->index || name->count != count) {
            fail(
                "{}: part {} of {} of a split model (split.no {}), but its name does not end in "
                "'-{:05d}-of-{:05d}.gguf', so the other parts cannot be found",
                path, info->index + 1, count, info->index, info->index + 1, count);
        }
        for (int i = 0; i < count; ++i) paths[i] = split_part_path(name->prefix, i, count);
    }
    parts[info->index] = std::move(given);

    // Every part is there before any is read (a missing last part is found at once).
    for (int i = 0; i < count; ++i) {
        if (!parts[i] && !file_exists(paths[i])) {
            fail("{}: missing part {} of {} of the split model given as {}", paths[i], i + 1, count,
                 path);
        }
    }
    for (int i = 0; i < count; ++i) {
        if (parts[i]) continue;
        parts[i] = GgufFile::open(open_part(paths[i]));
        const GgufFile& part = *parts[i];
        const std::optional<SplitInfo> p = read_split_info(part);
        if (!p) {
            fail(
                "{}: not a part of the split model given as {}: it has no {} key, though its name "
                "says part {} of {}",
                paths[i], path, split_keys::kCount, i + 1, count);
        }
        if (p->count != count) {
            fail("{}: {} is {}, but {} says {}: parts of different split models", paths[i],
                 split_keys::kCount, p->count, path, count);
        }
        if (p->index != i) {
            fail("{}: {} is {} (part {}), but its name says part {}: a part of another split model",
                 paths[i], split_keys::kNo, p->index, p->index + 1, i + 1);
        }
        if (p->n_tensors != info->n_tensors) {
            fail("{}: {} is {}, but {} says {}: parts of different models", paths[i],
                 split_keys::kTensorsCount, p->n_tensors, path, info->n_tensors);
        }
    }
    // gguf-split writes the metadata into the first part only; a later part that names an
    // architecture must name the first part's.
    const std::string_view arch = parts[0]->architecture();
    for (int i = 1; i < count; ++i) {
        const std::string_view a = parts[i]->architecture();
        if (!a.empty() && a != arch) {
            fail("{}: architecture '{}', but the first part {} is '{}': parts of different models",
                 paths[i], a, paths[0], arch);
        }
    }

    std::unique_ptr<GgufFile> model = GgufFile::join(std::move(parts));
    const int64_t held = static_cast<int64_t>(model->tensors().size());
    if (held != info->n_tensors) {
        fail("{}: {} is {}, but the {} parts hold {} tensors", paths[0], split_keys::kTensorsCount,
             info->n_tensors, count, held);
    }
    return model;
}

std::vector<std::string> write_gguf_parts(const GgufWriter& writer, const std::string& path,
                                          const GgufSplitLayout& layout) {
    const int n = layout.n_parts;
    if (n == 1 && !layout.metadata_only_first) {
        writer.write(path);
        return {path};
    }
    const size_t n_tensors = writer.tensor_count();
    const int tensor_parts = layout.metadata_only_first ? n - 1 : n;
    if (n < 1 || n > kMaxParts || tensor_parts < 1) {
        fail(
            "{}: cannot split into {} parts (1 to {}, 2 or more when the first holds only "
            "metadata)",
            path, n, kMaxParts);
    }
    if (static_cast<size_t>(tensor_parts) > n_tensors) {
        fail("{}: cannot split {} tensors into {} parts that each hold one or more", path,
             n_tensors, tensor_parts);
    }

    // Part boundaries: each part ends where the running total first reaches its share of the
    // bytes, keeping one tensor or more for itself and for every part after it.
    uint64_t total = 0;
    for (size_t i = 0; i < n_tensors; ++i) total += writer.tensor_bytes(i);
    std::vector<size_t> ends;
    size_t at = 0;
    uint64_t running = 0;
    for (int k = 0; k < tensor_parts; ++k) {
        const size_t last_allowed = n_tensors - static_cast<size_t>(tensor_parts - 1 - k);
        const long double share = static_cast<long double>(total) * (k + 1) / tensor_parts;
        size_t end = at;
        while (end < last_allowed && (end == at || static_cast<long double>(running) < share)) {
            running += writer.tensor_bytes(end++);
        }
        if (k == tensor_parts - 1) {
            while (end < n_tensors) running += writer.tensor_bytes(end++);
        }
        ends.push_back(end);
        at = end;
    }

    std::string prefix = path;
    if (prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
    std::vector<std::string> written;
    try {
        size_t begin = 0;
        size_t next_end = 0;
        for (int i = 0; i < n; ++i) {
            const bool empty = layout.metadata_only_first && i == 0;
            const size_t end = empty ? begin : ends[next_end++];
            GgufWriter part = writer.part(begin, end, i == 0);
            part.set<uint16_t>(split_keys::kNo, static_cast<uint16_t>(i));
            part.set<uint16_t>(split_keys::kCount, static_cast<uint16_t>(n));
            part.set<int32_t>(split_keys::kTensorsCount, static_cast<int32_t>(n_tensors));
            const std::string part_path = split_part_path(prefix, i, n);
            part.write(part_path);
            written.push_back(part_path);
            begin = end;
        }
    } catch (...) {
        for (const std::string& p : written) std::remove(p.c_str());
        throw;
    }
    return written;
}

}  // namespace tandem
