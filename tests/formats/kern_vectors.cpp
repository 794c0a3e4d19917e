// Runs `kern vectors` once per configuration (cached under the build directory) and reads its
// files back.
#include "kern_vectors.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>

#include "support/oracle.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& line, char sep) {
    std::vector<std::string> out;
    std::string field;
    std::istringstream in(line);
    while (std::getline(in, field, sep)) out.push_back(field);
    return out;
}

template <typename T>
std::vector<T> as_array(const std::vector<uint8_t>& raw) {
    std::vector<T> out(raw.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
    return out;
}

// What the vectors depend on besides the arguments: the kern binary, ggml's libraries and the
// CPU (the default variant is chosen by CPU features).
std::string environment_key() {
    std::string key;
    std::error_code ec;
    const std::string kern = oracle_bin() + "/kern";
    key += std::to_string(fs::file_size(kern, ec)) + ":";
    key += std::to_string(fs::last_write_time(kern, ec).time_since_epoch().count()) + ":";
    if (const char* lib = std::getenv("ORACLE_LIBDIR")) key += lib;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("flags", 0) == 0) {
            key += line;
            break;
        }
    }
    return key;
}

std::string cache_dir(const std::string& variant, const std::string& args) {
    const size_t hash = std::hash<std::string>{}(variant + "|" + args + "|" + environment_key());
    char name[32];
    std::snprintf(name, sizeof name, "%016zx", hash);
    return std::string(TANDEM_BINARY_DIR) + "/test-cache/kern-vectors/" + name;
}

// Makes `dir` with `kern vectors` unless it is complete already; concurrent test processes
// wait on a lock file and reuse the result. Returns an error message, or "".
std::string make_vectors(const std::string& dir, const std::string& variant,
                         const std::string& args) {
    std::error_code ec;
    fs::create_directories(fs::path(dir).parent_path(), ec);
    const std::string lock_path = dir + ".lock";
    const int lock = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock < 0) return "cannot open " + lock_path;
    flock(lock, LOCK_EX);
    std::string error;
    if (!fs::exists(dir + "/complete")) {
        const std::string tmp = dir + ".tmp";
        fs::remove_all(tmp, ec);
        fs::create_directories(tmp, ec);
        std::string command = shell_quote(oracle_bin() + "/kern");
        if (!variant.empty()) command += " -v " + shell_quote(variant);
        command += " vectors -o " + shell_quote(tmp) + " " + args;
        std::string output;
        if (run_command(command, &output) != 0) {
            error = "`" + command + "` failed: " + output;
        } else {
            std::ofstream(tmp + "/complete") << command << "\n";
            fs::remove_all(dir, ec);
            fs::rename(tmp, dir, ec);
            if (ec) error = "cannot rename " + tmp + ": " + ec.message();
        }
    }
    flock(lock, LOCK_UN);
    close(lock);
    return error;
}

}  // namespace

const KernVectors& KernVectors::get(const std::string& variant, const std::string& args) {
    static std::map<std::string, std::unique_ptr<KernVectors>> cache;
    auto& slot = cache[variant + "|" + args];
    if (slot) return *slot;
    slot = std::make_unique<KernVectors>();
    KernVectors& v = *slot;
    v.dir_ = cache_dir(variant, args);
    v.error_ = make_vectors(v.dir_, variant, args);
    if (!v.ok()) return v;
    std::ifstream manifest(v.dir_ + "/manifest.tsv");
    std::string line;
    std::getline(manifest, line);  // column names
    while (std::getline(manifest, line)) {
        const auto f = split(line, '\t');
        if (f.size() < 14) {
            v.error_ = "short manifest line: " + line;
            return v;
        }
        KernType t;
        t.name = f[0];
        t.id = static_cast<uint32_t>(std::stoul(f[1]));
        t.block_size = std::stoll(f[2]);
        t.block_bytes = std::stoull(f[3]);
        t.n = std::stoll(f[4]);
        t.rows = std::stoll(f[5]);
        t.row_size = std::stoull(f[6]);
        t.dot_type = f[7];
        t.dot_row_size = std::stoull(f[9]);
        t.cpu_variant = f[12];
        t.has_generic = f[13] == "1";
        v.types_.push_back(t);
    }
    if (v.types_.empty()) v.error_ = "no types in " + v.dir_ + "/manifest.tsv";
    return v;
}

const KernType* KernVectors::find(const std::string& name) const {
    for (const KernType& t : types_) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

std::vector<uint8_t> KernVectors::bytes(const std::string& type, const std::string& suffix) const {
    std::ifstream in(dir_ + "/" + type + "." + suffix, std::ios::binary);
    if (!in) return {};
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> KernVectors::floats(const std::string& type, const std::string& suffix) const {
    return as_array<float>(bytes(type, suffix));
}

std::vector<double> KernVectors::doubles(const std::string& type, const std::string& suffix) const {
    return as_array<double>(bytes(type, suffix));
}

}  // namespace tandem::testing
