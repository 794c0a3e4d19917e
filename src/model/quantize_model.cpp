// Rewrites a GGUF model with its weights in other ggml types (quantize_model.h).
#include "model/quantize_model.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "base/thread_pool.h"
#include "formats/format_table.h"
#include "gguf/gguf_copy.h"

namespace tandem {
namespace {

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The class's type for a tensor, or nullopt for tensors that keep theirs.
std::optional<GgmlType> class_type(const GgufTensor& t, const QuantizeSpec& spec) {
    const std::string_view name = t.name;
    const bool matrix = t.n_dims >= 2 && t.ne[1] > 1;
    if (!matrix || !ends_with(name, ".weight")) return std::nullopt;  // norms, biases, scales
    if (name.find("ffn_gate_inp") != std::string_view::npos) return std::nullopt;  // routers
    if (name.find("_exps.") != std::string_view::npos) return spec.experts;
    if (name == "output.weight") return spec.output;
    if (name.find("token_embd") != std::string_view::npos) return spec.embd;
    if (name.find(".ffn_") != std::string_view::npos) return spec.ffn;
    return spec.attn;
}

// llama_ftype values (llama.h).
struct FileTypeEntry {
    GgmlType type;
    uint32_t file_type;
};
constexpr FileTypeEntry kFileTypes[] = {
    {GgmlType::kF32, 0},   {GgmlType::kF16, 1},   {GgmlType::kQ4_0, 2},  {GgmlType::kQ4_1, 3},
    {GgmlType::kQ8_0, 7},  {GgmlType::kQ5_0, 8},  {GgmlType::kQ5_1, 9},  {GgmlType::kQ2_K, 10},
    {GgmlType::kQ3_K, 12}, {GgmlType::kQ4_K, 15}, {GgmlType::kQ5_K, 17}, {GgmlType::kQ6_K, 18},
    {GgmlType::kBF16, 32},
};

void check_target(GgmlType type, std::string_view what) {
    const FormatTraits& f = format_of(type);
    const bool weights = f.kind == FormatKind::kFloat || f.kind == FormatKind::kQuantized;
    if (!weights || f.quantize_row == nullptr) {
        fail("quantize: {} type {} cannot be written (no quantizer for it)", what, f.name);
    }
}

}  // namespace

uint32_t file_type_for(GgmlType main) {
    for (const FileTypeEntry& e : kFileTypes)
        if (e.type == main) return e.file_type;
    fail("quantize: no llama.cpp file type for {} weights", format_of(main).name);
}

std::vector<QuantizedTensor> plan_quantization(const GgufFile& file, const QuantizeSpec& spec) {
    check_target(spec.embd, "embedding");
    check_target(spec.attn, "attention");
    check_target(spec.ffn, "FFN");
    check_target(spec.experts, "expert");
    check_target(spec.output, "output");
    std::vector<QuantizedTensor> plan;
    for (const GgufTensor& t : file.tensors()) {
        QuantizedTensor q{std::string(t.name), t.type, t.type, ""};
        const std::optional<GgmlType> want = class_type(t, spec);
        if (want && *want != t.type) {
            if (t.ne[0] % format_of(*want).block_size == 0) {
                q.to = *want;
            } else if (t.ne[0] % format_of(GgmlType::kQ8_0).block_size == 0) {
                q.to = GgmlType::kQ8_0;
                q.note = "rows of " + std::to_string(t.ne[0]) + " do not split into " +
                         std::string(format_of(*want).name) + " blocks";
            } else {
                q.note = "rows of " + std::to_string(t.ne[0]) + " do not split into blocks";
            }
        }
        if (q.to != q.from && t.format->dequantize_row == nullptr) {
            fail("quantize: {}: tensor {} of type {} cannot be read as floats", file.path(), t.name,
                 t.format->name);
        }
        plan.push_back(std::move(q));
    }
    return plan;
}

std::vector<QuantizedTensor> quantize_model(const std::string& in, const std::string& out,
                                            const QuantizeSpec& spec, int threads) {
    const std::unique_ptr<GgufFile> file = GgufFile::open(in);
    const std::vector<QuantizedTensor> plan = plan_quantization(*file, spec);
    bool has_experts = false;
    for (const QuantizedTensor& q : plan) has_experts = has_experts || q.name.find("_exps.") != std::string::npos;
    const uint32_t file_type = file_type_for(has_experts ? spec.experts : spec.attn);

    GgufEdit edit;
    edit.keep_key = [](std::string_view key) {
        return key != "general.file_type" && key != "general.quantization_version";
    };
    edit.keep_tensor = [](const GgufTensor&) { return false; };  // re-added below, converted
    edit.add_keys = [&](GgufWriter& w) {
        w.set<uint32_t>("general.file_type", file_type);
        w.set<uint32_t>("general.quantization_version", 2);  // ggml's GGML_QNT_VERSION
    };
    GgufWriter writer = copy_gguf(*file, edit);
    auto pool = std::make_shared<ThreadPool>(std::max(1, threads));
    for (size_t i = 0; i < plan.size(); ++i) {
        const GgufTensor& t = file->tensors()[i];
        std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
        const GgmlType to = plan[i].to;
        if (to == t.type) {
            writer.add_tensor(t.name, to, ne, [&t](uint8_t* dst, size_t n) { std::memcpy(dst, t.data, n); });
            continue;
        }
        writer.add_tensor(t.name, to, ne, [&t, to, pool](uint8_t* dst, size_t) {
            const FormatTraits& src = *t.format;
            const FormatTraits& dst_format = format_of(to);
            const int64_t n = t.ne[0];
            const size_t src_rb = t.row_bytes(), dst_rb = row_bytes(dst_format, n);
            pool->parallel_for(t.n_rows(), 16, [&](int64_t r0, int64_t r1, int) {
                std::vector<float> row(static_cast<size_t>(n));
                for (int64_t r = r0; r < r1; ++r) {
                    src.dequantize_row(t.data + r * src_rb, row.data(), n);
                    dst_format.quantize_row(row.data(), dst + r * dst_rb, n);
                }
            });
        });
    }
    writer.write(out);
    return plan;
}

}  // namespace tandem
