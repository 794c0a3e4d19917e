// `tandem quantize` (model/quantize_model.h): the type each tensor gets, values within the target
// format's error, metadata copied with general.file_type set, the fallback for rows that do not
// split into blocks, and bad input.
#include "model/quantize_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/format_table.h"
#include "gguf/gguf_reader.h"
#include "support/model_files.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

// A qwen3moe in f32 whose rows split into 256-value k-quant blocks.
SynthSpec f32_moe_spec() {
    SynthSpec s = testing::tiny_spec("qwen3moe");
    s.n_layer = 1;
    s.n_embd = 256;
    s.head_dim = 64;
    s.n_ff_exp = 256;
    s.n_vocab = 512;
    return s;
}

std::vector<float> as_floats(const GgufTensor& t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    for (int64_t r = 0; r < t.n_rows(); ++r)
        t.format->dequantize_row(t.data + r * t.row_bytes(), out.data() + r * t.ne[0], t.ne[0]);
    return out;
}

// |x - y| over |x|, as root mean squares.
double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        err += (x[i] - y[i]) * double(x[i] - y[i]);
        ref += x[i] * double(x[i]);
    }
    return std::sqrt(err / ref);
}

using testing::error_of;

TEST(QuantizeModel, TypesPerTensorValuesAndMetadata) {
    testing::TempDir dir;
    const std::string in = testing::write_model(f32_moe_spec(), dir.file("f32.gguf"));
    const std::string out = dir.file("q.gguf");
    quantize_model(in, out, QuantizeSpec{});
    const auto a = GgufFile::open(in);
    const auto b = GgufFile::open(out);

    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    int n_q8 = 0, n_q4k = 0;
    for (const GgufTensor& ta : a->tensors()) {
        SCOPED_TRACE(std::string(ta.name));
        const GgufTensor* tb = b->find_tensor(ta.name);
        ASSERT_NE(tb, nullptr);
        EXPECT_EQ(tb->ne, ta.ne);
        const std::string name(ta.name);
        GgmlType want = GgmlType::kF32;  // norms and the router keep their type
        if (name.find("_exps.") != std::string::npos) {
            want = GgmlType::kQ4_K;
        } else if (ta.n_dims >= 2 && name.find("ffn_gate_inp") == std::string::npos) {
            want = GgmlType::kQ8_0;  // attention, token_embd, output
        }
        EXPECT_EQ(tb->type, want) << format_of(tb->type).name;
        const std::vector<float> x = as_floats(ta), y = as_floats(*tb);
        if (want == GgmlType::kF32) {
            EXPECT_EQ(x, y);
        } else {
            // q8_0 rounds to 1/254 of a block's range, q4_K to about 1/30 of a sub-block's.
            const double tolerance = want == GgmlType::kQ8_0 ? 0.01 : 0.12;
            EXPECT_LT(relative_rms_error(x, y), tolerance);
            (want == GgmlType::kQ8_0 ? n_q8 : n_q4k)++;
        }
    }
    EXPECT_EQ(n_q4k, 3);
    EXPECT_GE(n_q8, 6);

    // Every key comes across with its value; file_type says q4_K (Q4_K_M) and the version 2.
    for (const GgufKeyValue& kv : a->metadata()) {
        if (kv.key == "general.file_type") continue;
        SCOPED_TRACE(std::string(kv.key));
        const GgufValue* v = b->find(kv.key);
        ASSERT_NE(v, nullptr);
        EXPECT_EQ(v->type, kv.value.type);
        EXPECT_EQ(v->count, kv.value.count);
        if (kv.value.type == GgufValueType::kString) {
            EXPECT_EQ(v->string, kv.value.string);
        }
        if (kv.value.type == GgufValueType::kArray && kv.value.elem_type == GgufValueType::kString) {
            EXPECT_EQ(v->strings, kv.value.strings);
        }
    }
    EXPECT_EQ(b->get<uint32_t>("general.file_type"), 15u);
    EXPECT_EQ(b->get<uint32_t>("general.quantization_version"), 2u);
    EXPECT_EQ(b->get_string("tokenizer.ggml.pre"), a->get_string("tokenizer.ggml.pre"));
}

TEST(QuantizeModel, RowsThatDoNotSplitIntoBlocksFallBack) {
    testing::TempDir dir;
    // Embedding 64: rows of gate/up experts do not split into 256-value q4_K blocks.
    const std::string in = testing::write_model(testing::tiny_spec("qwen3moe"), dir.file("tiny.gguf"));
    const std::vector<QuantizedTensor> plan = quantize_model(in, dir.file("q.gguf"), QuantizeSpec{});
    const auto b = GgufFile::open(dir.file("q.gguf"));
    for (const QuantizedTensor& q : plan) {
        if (q.name.find("ffn_gate_exps") == std::string::npos) continue;
        EXPECT_EQ(q.to, GgmlType::kQ8_0) << q.name;
        EXPECT_NE(q.note.find("do not split into q4_K blocks"), std::string::npos) << q.note;
        EXPECT_EQ(b->find_tensor(q.name)->type, GgmlType::kQ8_0);
    }
    // Quantizing again keeps the types and copies the bytes.
    const std::vector<QuantizedTensor> again = quantize_model(dir.file("q.gguf"), dir.file("q2.gguf"), QuantizeSpec{});
    const auto c = GgufFile::open(dir.file("q2.gguf"));
    for (const GgufTensor& t : b->tensors()) {
        const GgufTensor* u = c->find_tensor(t.name);
        ASSERT_NE(u, nullptr);
        EXPECT_EQ(u->type, t.type);
        ASSERT_EQ(u->n_bytes, t.n_bytes);
        EXPECT_EQ(std::memcmp(u->data, t.data, t.n_bytes), 0) << t.name;
    }
}

TEST(QuantizeModel, BadInputIsOneLineNamingIt) {
    testing::TempDir dir;
    const std::string missing = dir.file("missing.gguf");
    EXPECT_NE(error_of([&] { quantize_model(missing, dir.file("o.gguf"), QuantizeSpec{}); }).find(missing),
              std::string::npos);
    const std::string in = testing::write_model(f32_moe_spec(), dir.file("f32.gguf"));
    QuantizeSpec spec;
    spec.experts = GgmlType::kIQ2_XXS;
    EXPECT_NE(error_of([&] { quantize_model(in, dir.file("o.gguf"), spec); })
                  .find("expert type iq2_xxs cannot be written"),
              std::string::npos);
}

}  // namespace
}  // namespace tandem
