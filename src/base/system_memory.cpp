// How much memory this machine or its memory cgroup has.
#include "base/system_memory.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem {
namespace {

std::optional<uint64_t> read_number(const std::string& path) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word)) return std::nullopt;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    if (ec != std::errc() || ptr != word.data() + word.size()) return std::nullopt;  // "max"
    return v;
}

// The value of `key` in a "key value [kB]" file (/proc/meminfo, memory.stat), in bytes.
std::optional<uint64_t> read_field(const std::string& path, const std::string& key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string name, unit;
        uint64_t value = 0;
        if (!(fields >> name >> value)) continue;
        if (!name.empty() && name.back() == ':') name.pop_back();
        if (name != key) continue;
        fields >> unit;
        return unit == "kB" ? value * 1024 : value;
    }
    return std::nullopt;
}

struct CgroupMemory {
    uint64_t limit;
    uint64_t available;
};

// A limit far above any RAM (v1 reports "unlimited" as ~2^63) counts as none.
constexpr uint64_t kNoLimit = uint64_t{1} << 60;

// The memory cgroup folders of this process, innermost first, up to the mount's root: every
// level's limit applies. v2 ("0::/path") or v1 ("N:...memory...:/path") from /proc/self/cgroup.
struct CgroupFiles {
    std::vector<std::string> dirs;
    const char* limit;
    const char* usage;
    const char* cache_key;  // page cache in memory.stat, reclaimable as in MemAvailable
};

std::optional<CgroupFiles> cgroup_files() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        std::string path = line.substr(b + 1);
        CgroupFiles f;
        std::string root;
        if (line.compare(0, a, "0") == 0 && controllers.empty()) {
            root = "/sys/fs/cgroup";
            f.limit = "memory.max";
            f.usage = "memory.current";
            f.cache_key = "file";
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            root = "/sys/fs/cgroup/memory";
            f.limit = "memory.limit_in_bytes";
            f.usage = "memory.usage_in_bytes";
            f.cache_key = "total_cache";
        } else {
            continue;
        }
        // From the process's folder (when this mount shows it) up to the root.
        while (!path.empty() && path.back() == '/') path.pop_back();
        for (;;) {
            f.dirs.push_back(root + path);
            if (path.empty()) break;
            path.resize(path.rfind('/'));
        }
        return f;
    }
    return std::nullopt;
}

std::optional<CgroupMemory> cgroup_memory() {
    std::optional<CgroupFiles> f = cgroup_files();
    if (!f) return std::nullopt;
    std::optional<CgroupMemory> tightest;
    for (const std::string& dir : f->dirs) {
        std::optional<uint64_t> limit = read_number(dir + "/" + f->limit);
        if (!limit || *limit >= kNoLimit) continue;  // no such folder here, or no limit
        const uint64_t usage = read_number(dir + "/" + f->usage).value_or(0);
        const uint64_t cache =
            std::min(usage, read_field(dir + "/memory.stat", f->cache_key).value_or(0));
        const uint64_t held = usage - cache;
        const CgroupMemory level{*limit, *limit > held ? *limit - held : 0};
        if (!tightest || level.available < tightest->available) tightest = level;
    }
    return tightest;
}

std::optional<uint64_t> parse_size(std::string_view text) {
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr == text.data()) return std::nullopt;
    std::string_view suffix(ptr, text.data() + text.size() - ptr);
    if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.remove_suffix(1);
    if (!suffix.empty() && (suffix.back() == 'i')) suffix.remove_suffix(1);
    int shift = 0;
    if (suffix.size() == 1) {
        switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
            case 'K':
                shift = 10;
                break;
            case 'M':
                shift = 20;
                break;
            case 'G':
                shift = 30;
                break;
            case 'T':
                shift = 40;
                break;
            default:
                return std::nullopt;
        }
    } else if (!suffix.empty()) {
        return std::nullopt;
    }
    if (shift > 0 && v > (UINT64_MAX >> shift)) return std::nullopt;
    return v << shift;
}

}  // namespace

SystemMemory system_memory() {
    SystemMemory m;
    m.total = read_field("/proc/meminfo", "MemTotal").value_or(0);
    m.available = read_field("/proc/meminfo", "MemAvailable").value_or(m.total);
    m.source = "MemAvailable";
    if (std::optional<CgroupMemory> cg = cgroup_memory()) {
        m.total = m.total == 0 ? cg->limit : std::min(m.total, cg->limit);
        if (cg->available < m.available) {
            m.available = cg->available;
            m.source = "memory cgroup limit";
        }
    }
    if (const char* env = std::getenv("TANDEM_MEMORY_AVAILABLE")) {
        std::optional<uint64_t> v = parse_size(env);
        if (!v)
            fail(
                "TANDEM_MEMORY_AVAILABLE: '{}' is not a size (bytes, or a number with K, M, G or "
                "T)",
                env);
        m.available = *v;
        m.source = "TANDEM_MEMORY_AVAILABLE";
    }
    return m;
}

std::string format_bytes(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

}  // namespace tandem
