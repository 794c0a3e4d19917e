// `tandem inspect FILE [--json]`: what a GGUF model holds — architecture, hyperparameters,
// tokenizer, every metadata key, the tensor table, totals per type and the expert layout; of a
// split model (any part given) the whole model, with its parts.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/cpu_features.h"
#include "cli/commands.h"
#include "cli/gpu_info.h"
#include "gguf/gguf_reader.h"
#include "gguf/model_files.h"
#include "kernels/kernel_table.h"

namespace tandem::cli {
namespace {

struct InspectOptions {
    std::string path;
    bool json = false;
    bool system = false;
};

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, units[u]);
}

// Routed-expert tensors: blk.N.ffn_{gate,up,gate_up,down}_exps.weight, grouped per layer.
struct ExpertLayout {
    std::map<int, uint64_t> bytes_per_layer;
    std::map<int, std::string> types_per_layer;
};

ExpertLayout expert_layout(const GgufFile& file) {
    static const std::regex kExperts(R"(blk\.(\d+)\.ffn_(gate|up|gate_up|down)_exps\.weight)");
    ExpertLayout layout;
    for (const GgufTensor& t : file.tensors()) {
        std::cmatch m;
        std::string name(t.name);
        if (!std::regex_match(name.c_str(), m, kExperts)) continue;
        int layer = std::stoi(m[1].str());
        layout.bytes_per_layer[layer] += t.n_bytes;
        std::string& types = layout.types_per_layer[layer];
        types += (types.empty() ? "" : " ") + m[2].str() + "=" + std::string(t.format->name);
    }
    return layout;
}

std::string arch_key(const GgufFile& f, const std::string& suffix) {
    return std::string(f.architecture()) + "." + suffix;
}

// The hyperparameters people look for first, when present.
const char* const kHyperparameters[] = {
    "context_length",      "embedding_length",          "block_count",
    "feed_forward_length", "expert_feed_forward_length", "expert_count",
    "expert_used_count",   "attention.head_count",      "attention.head_count_kv",
    "attention.key_length", "attention.value_length",   "attention.layer_norm_rms_epsilon",
    "rope.freq_base",      "rope.dimension_count",      "rope.scaling.type",
    "vocab_size"};

nlohmann::json value_to_json(const GgufValue& v) {
    auto scalar = [](GgufValueType type, const uint8_t* p) -> nlohmann::json {
        GgufValue tmp;
        tmp.type = type;
        tmp.data = p;
        if (type == GgufValueType::kBool) return p[0] != 0;
        if (type == GgufValueType::kF32 || type == GgufValueType::kF64) return *tmp.as_double();
        if (type == GgufValueType::kU64) return tmp.scalar_at<uint64_t>(0);
        return *tmp.as_int64();
    };
    if (v.type == GgufValueType::kString) return std::string(v.string);
    if (v.type != GgufValueType::kArray) return scalar(v.type, v.data);
    nlohmann::json out = nlohmann::json::object();
    out["type"] = std::string(gguf_type_name(v.elem_type));
    out["count"] = v.count;
    nlohmann::json items = nlohmann::json::array();
    uint64_t shown = std::min<uint64_t>(v.count, 16);
    for (uint64_t i = 0; i < shown; ++i) {
        if (v.elem_type == GgufValueType::kString) {
            items.push_back(std::string(v.strings[i]));
        } else {
            items.push_back(scalar(v.elem_type, v.data + i * gguf_scalar_size(v.elem_type)));
        }
    }
    out["first"] = items;
    return out;
}

void print_json(const GgufFile& f) {
    nlohmann::json j;
    j["file"] = f.path();
    j["file_bytes"] = f.file_size();
    j["version"] = f.version();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    nlohmann::json parts = nlohmann::json::array();
    for (const GgufPart& p : f.parts()) {
        parts.push_back({{"path", p.path}, {"bytes", p.size}, {"tensors", p.n_tensors}, {"tensor_bytes", p.tensor_bytes}});
    }
    j["parts"] = parts;
    j["architecture"] = std::string(f.architecture());
    nlohmann::json meta = nlohmann::json::object();
    for (const GgufKeyValue& kv : f.metadata()) meta[std::string(kv.key)] = value_to_json(kv.value);
    j["metadata"] = meta;
    nlohmann::json tensors = nlohmann::json::array();
    std::map<std::string, std::pair<uint64_t, uint64_t>> per_type;
    for (const GgufTensor& t : f.tensors()) {
        std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
        tensors.push_back({{"name", std::string(t.name)},
                           {"type", std::string(t.format->name)},
                           {"shape", shape},
                           {"bytes", t.n_bytes},
                           {"offset", t.offset},
                           {"part", t.part}});
        auto& e = per_type[std::string(t.format->name)];
        e.first += 1;
        e.second += t.n_bytes;
    }
    j["tensors"] = tensors;
    nlohmann::json totals = nlohmann::json::object();
    for (const auto& [type, e] : per_type) totals[type] = {{"tensors", e.first}, {"bytes", e.second}};
    j["totals_per_type"] = totals;
    ExpertLayout experts = expert_layout(f);
    if (!experts.bytes_per_layer.empty()) {
        nlohmann::json moe;
        moe["expert_count"] = f.find_int(arch_key(f, "expert_count")).value_or(0);
        moe["expert_used_count"] = f.find_int(arch_key(f, "expert_used_count")).value_or(0);
        nlohmann::json layers = nlohmann::json::array();
        for (const auto& [layer, bytes] : experts.bytes_per_layer) {
            layers.push_back({{"layer", layer}, {"bytes", bytes}, {"types", experts.types_per_layer[layer]}});
        }
        moe["layers"] = layers;
        j["moe"] = moe;
    }
    std::printf("%s\n", j.dump(1).c_str());
}

void print_text(const GgufFile& f) {
    std::printf("file: %s (%s, GGUF v%u, alignment %u, data at offset %llu)\n", f.path().c_str(),
                human_bytes(f.file_size()).c_str(), f.version(), f.alignment(),
                static_cast<unsigned long long>(f.data_offset()));
    const bool split = f.parts().size() > 1;
    if (split) {
        uint64_t all = 0;
        for (const GgufPart& p : f.parts()) all += p.size;
        std::printf("split into %zu parts (%s in all):\n", f.parts().size(), human_bytes(all).c_str());
        for (size_t i = 0; i < f.parts().size(); ++i) {
            const GgufPart& p = f.parts()[i];
            std::printf("  part %zu: %s (%s, %zu tensors)\n", i + 1, p.path.c_str(), human_bytes(p.size).c_str(),
                        p.n_tensors);
        }
    }
    std::string arch(f.architecture());
    std::printf("architecture: %s\n", arch.empty() ? "(none)" : arch.c_str());
    if (const GgufValue* name = f.find("general.name")) {
        std::printf("name: %s\n", gguf_value_to_string(*name).c_str());
    }
    if (!arch.empty()) {
        std::printf("\nhyperparameters:\n");
        for (const char* key : kHyperparameters) {
            if (const GgufValue* v = f.find(arch_key(f, key))) {
                std::printf("  %-34s %s\n", key, gguf_value_to_string(*v).c_str());
            }
        }
    }
    if (const GgufValue* model = f.find("tokenizer.ggml.model")) {
        std::printf("\ntokenizer: %s", gguf_value_to_string(*model).c_str());
        if (const GgufValue* pre = f.find("tokenizer.ggml.pre")) {
            std::printf(", pre %s", gguf_value_to_string(*pre).c_str());
        }
        if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) {
            std::printf(", %llu tokens", static_cast<unsigned long long>(tokens->count));
        }
        if (const GgufValue* merges = f.find("tokenizer.ggml.merges")) {
            std::printf(", %llu merges", static_cast<unsigned long long>(merges->count));
        }
        for (const char* special : {"bos", "eos", "eot", "pad"}) {
            std::string key = fmt::format("tokenizer.ggml.{}_token_id", special);
            if (const GgufValue* id = f.find(key)) std::printf(", %s %s", special, gguf_value_to_string(*id).c_str());
        }
        std::printf("%s\n", f.has("tokenizer.chat_template") ? ", chat template" : "");
    }

    std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
    for (const GgufKeyValue& kv : f.metadata()) {
        std::string type(gguf_type_name(kv.value.type));
        if (kv.value.type == GgufValueType::kArray) type += "<" + std::string(gguf_type_name(kv.value.elem_type)) + ">";
        std::printf("  %-44s %-14s %s\n", std::string(kv.key).c_str(), type.c_str(),
                    gguf_value_to_string(kv.value).c_str());
    }

    std::printf("\ntensors (%zu):\n", f.tensors().size());
    std::printf("  %-40s %-8s %-24s %14s %14s%s\n", "name", "type", "shape", "bytes", "offset", split ? "  part" : "");
    std::map<std::string, std::pair<uint64_t, uint64_t>> per_type;
    uint64_t total = 0;
    for (const GgufTensor& t : f.tensors()) {
        std::printf("  %-40s %-8s %-24s %14llu %14llu%s\n", std::string(t.name).c_str(),
                    std::string(t.format->name).c_str(), t.shape_string().c_str(),
                    static_cast<unsigned long long>(t.n_bytes), static_cast<unsigned long long>(t.offset),
                    split ? fmt::format("  {:4}", t.part + 1).c_str() : "");
        auto& e = per_type[std::string(t.format->name)];
        e.first += 1;
        e.second += t.n_bytes;
        total += t.n_bytes;
    }
    std::printf("\ntotals per type:\n");
    for (const auto& [type, e] : per_type) {
        std::printf("  %-8s %5llu tensors %14s\n", type.c_str(), static_cast<unsigned long long>(e.first),
                    human_bytes(e.second).c_str());
    }
    std::printf("  %-8s %5zu tensors %14s\n", "all", f.tensors().size(), human_bytes(total).c_str());

    ExpertLayout experts = expert_layout(f);
    if (!experts.bytes_per_layer.empty()) {
        std::printf("\nexperts: %lld per layer, %lld used per token\n",
                    static_cast<long long>(f.find_int(arch_key(f, "expert_count")).value_or(0)),
                    static_cast<long long>(f.find_int(arch_key(f, "expert_used_count")).value_or(0)));
        uint64_t all = 0;
        for (const auto& [layer, bytes] : experts.bytes_per_layer) {
            std::printf("  layer %3d: %12s  %s\n", layer, human_bytes(bytes).c_str(),
                        experts.types_per_layer[layer].c_str());
            all += bytes;
        }
        std::printf("  all layers: %s of expert weights\n", human_bytes(all).c_str());
    }
}

void print_system() {
    const CpuFeatures& cpu = cpu_features();
    std::printf("cpu: %s (%s), %d logical / %d physical cores\n", cpu.brand.c_str(), cpu.vendor.c_str(),
                cpu.logical_cores, cpu.physical_cores);
    std::printf("cpu features: %s\n", cpu.summary().c_str());
    // Every kernel variant built in, with its score here (0: the CPU or OS lacks something).
    const KernelVariant& chosen = chosen_kernel_variant();
    std::printf("kernel variants (score; 0 = cannot run here):\n");
    for (const KernelVariant& v : kernel_variants()) {
        std::printf("  %-12s %3d  %s%s\n", std::string(v.name).c_str(), v.score(cpu), std::string(v.description).c_str(),
                    &v == &chosen ? "  <- chosen" : "");
    }
    std::printf("kernel variant: %s%s\n", std::string(chosen.name).c_str(),
                std::getenv("TANDEM_CPU_VARIANT") ? " (TANDEM_CPU_VARIANT)" : "");
    print_gpus();
}

}  // namespace

void add_inspect_command(CLI::App& app) {
    auto opts = std::make_shared<InspectOptions>();
    CLI::App* cmd = app.add_subcommand("inspect", "Describe a GGUF file (or this machine with --system)");
    cmd->add_option("file", opts->path, "GGUF file (of a split model: any part)");
    cmd->add_flag("--json", opts->json, "Print JSON instead of text");
    cmd->add_flag("--system", opts->system, "Describe this machine's CPU, the chosen kernels and the GPUs");
    cmd->callback([opts] {
        if (opts->system) print_system();
        if (opts->path.empty()) {
            if (!opts->system) throw CLI::RequiredError("file");
            return;
        }
        std::unique_ptr<GgufFile> file = open_gguf_model(opts->path, metadata_only());
        if (opts->json) {
            print_json(*file);
        } else {
            print_text(*file);
        }
    });
}

}  // namespace tandem::cli
