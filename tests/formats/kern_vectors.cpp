// Runs `kern vectors` once per configuration and reads its files back.
#include "kern_vectors.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "support/oracle.h"

namespace tandem::testing {
namespace {

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

}  // namespace

const KernVectors& KernVectors::get(const std::string& variant, const std::string& args) {
    static std::map<std::string, std::unique_ptr<KernVectors>> cache;
    auto& slot = cache[variant + "|" + args];
    if (slot) return *slot;
    slot = std::make_unique<KernVectors>();
    KernVectors& v = *slot;
    v.dir_ = std::make_unique<TempDir>();
    std::string command = shell_quote(oracle_bin() + "/kern");
    if (!variant.empty()) command += " -v " + shell_quote(variant);
    command += " vectors -o " + shell_quote(v.dir_->path()) + " " + args;
    std::string output;
    if (run_command(command, &output) != 0) {
        v.error_ = "`" + command + "` failed: " + output;
        return v;
    }
    std::ifstream manifest(v.dir_->file("manifest.tsv"));
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
    if (v.types_.empty()) v.error_ = "no types in " + v.dir_->file("manifest.tsv");
    return v;
}

const KernType* KernVectors::find(const std::string& name) const {
    for (const KernType& t : types_) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

std::vector<uint8_t> KernVectors::bytes(const std::string& type, const std::string& suffix) const {
    std::ifstream in(dir_->file(type + "." + suffix), std::ios::binary);
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
