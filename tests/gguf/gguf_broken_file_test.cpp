// The reader refuses every kind of broken or hostile file with one line naming what and where,
// and never reads outside the buffer (the suite also runs under ASan).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace tandem {
namespace {

// Builds GGUF bytes field by field, so tests can put any value anywhere.
class Bytes {
public:
    Bytes& u32(uint32_t v) { return raw(&v, 4); }
    Bytes& u64(uint64_t v) { return raw(&v, 8); }
    Bytes& str(std::string_view s) {
        u64(s.size());
        return raw(s.data(), s.size());
    }
    Bytes& raw(const void* p, size_t n) {
        const uint8_t* b = static_cast<const uint8_t*>(p);
        data.insert(data.end(), b, b + n);
        return *this;
    }
    Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return u32(kGgufMagic).u32(version).u64(n_tensors).u64(n_kv);
    }
    Bytes& tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(ne.size()));
        for (uint64_t n : ne) u64(n);
        return u32(type).u64(offset);
    }
    Bytes& pad_to(size_t alignment) {
        while (data.size() % alignment) data.push_back(0);
        return *this;
    }
    Bytes& zeros(size_t n) {
        data.insert(data.end(), n, 0);
        return *this;
    }
    std::vector<uint8_t> data;
};

// Expects an Error whose message is one line and contains every fragment.
void expect_error(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> fragments) {
    try {
        GgufFile::parse("broken.gguf", bytes.data(), bytes.size());
        ADD_FAILURE() << "accepted a broken file";
    } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        EXPECT_EQ(msg.rfind("broken.gguf: ", 0), 0u) << msg;
        for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg << " lacks " << f;
    }
}

std::vector<uint8_t> valid_file() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set<uint32_t>("llama.block_count", 2);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    w.set_array<float>("scores", std::vector<float>{1, 2, 3});
    w.add_tensor("token_embd.weight", GgmlType::kF32, {4, 3}, std::vector<uint8_t>(48, 1));
    w.add_tensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 2}, std::vector<uint8_t>(68, 2));
    return w.to_bytes();
}

TEST(GgufBroken, TruncatedAtEveryByte) {
    std::vector<uint8_t> file = valid_file();
    ASSERT_NO_THROW(GgufFile::parse("ok.gguf", file.data(), file.size()));
    for (size_t n = 0; n < file.size(); ++n) {
        // A heap copy of exactly n bytes, so ASan catches any read past the end.
        std::vector<uint8_t> cut(file.begin(), file.begin() + static_cast<long>(n));
        cut.shrink_to_fit();
        EXPECT_THROW(GgufFile::parse("cut.gguf", cut.data(), cut.size()), Error) << "length " << n;
    }
}

TEST(GgufBroken, BadMagicAndVersion) {
    expect_error(Bytes().u32(0x12345678).u32(3).u64(0).u64(0).data, {"not a GGUF file", "offset 0"});
    expect_error(Bytes().header(0, 0, 1).data, {"version 1", "offset 4"});
    expect_error(Bytes().header(0, 0, 7).data, {"unsupported GGUF version 7"});
    expect_error(Bytes().u32(kGgufMagic).u32(0x03000000).u64(0).u64(0).data, {"unsupported GGUF version"});
    expect_error(std::vector<uint8_t>{'G', 'G'}, {"too short"});
}

TEST(GgufBroken, HugeCounts) {
    const uint64_t huge = uint64_t{1} << 60;
    expect_error(Bytes().header(huge, 0).data, {"tensor count", "cannot fit"});
    expect_error(Bytes().header(0, huge).data, {"metadata count", "cannot fit"});
    expect_error(Bytes().header(0, 1).str("arr").u32(9).u32(4).u64(huge).data,
                 {"metadata 'arr'", "array of", "cannot fit"});
    expect_error(Bytes().header(0, 1).str("arr").u32(9).u32(8).u64(huge).data, {"cannot fit"});
    expect_error(Bytes().header(0, 1).str("s").u32(8).u64(huge).data, {"string length", "runs past the end"});
}

TEST(GgufBroken, StringsPastTheEnd) {
    expect_error(Bytes().header(0, 1).u64(100).raw("abc", 3).zeros(20).data, {"metadata key #0", "string length 100"});
    expect_error(Bytes().header(0, 1).str("k").u32(8).u64(10).raw("abc", 3).data, {"metadata 'k'", "offset"});
    expect_error(Bytes().header(1, 0).u64(1000).zeros(40).data, {"tensor #0 name", "string length 1000"});
}

TEST(GgufBroken, BadMetadata) {
    expect_error(Bytes().header(0, 1).str("k").u32(13).data, {"metadata 'k'", "unknown value type 13"});
    expect_error(Bytes().header(0, 1).str("k").u32(9).u32(9).u64(0).data, {"arrays of arrays"});
    expect_error(Bytes().header(0, 1).str("k").u32(9).u32(77).u64(0).data, {"unknown array element type 77"});
    expect_error(Bytes().header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).data, {"duplicate metadata key 'k'"});
    expect_error(Bytes().header(0, 1).str("b").u32(7).raw("\x05", 1).data, {"bool value 5"});
    expect_error(Bytes().header(0, 1).str("").u32(4).u32(1).data, {"is empty"});
}

TEST(GgufBroken, BadAlignment) {
    expect_error(Bytes().header(0, 1).str("general.alignment").u32(4).u32(48).data,
                 {"general.alignment", "48, not a power of two"});
    expect_error(Bytes().header(0, 1).str("general.alignment").u32(4).u32(0).data, {"not a power of two"});
    expect_error(Bytes().header(0, 1).str("general.alignment").u32(10).u64(32).data,
                 {"general.alignment", "type u64, expected u32"});
}

TEST(GgufBroken, BadTensorInfos) {
    auto one_tensor = [](std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                         size_t data_bytes) {
        return Bytes().header(1, 0).tensor_info(name, ne, type, offset).pad_to(32).zeros(data_bytes).data;
    };
    auto good = one_tensor("t", {8}, 0, 0, 32);
    ASSERT_NO_THROW(GgufFile::parse("x", good.data(), good.size()));
    expect_error(one_tensor("t", {8}, 31, 0, 32), {"tensor 't'", "unknown ggml type id 31"});
    expect_error(one_tensor("t", {8}, 1000, 0, 32), {"unknown ggml type id 1000"});
    expect_error(one_tensor("t", {33}, 2, 0, 64), {"tensor 't'", "row length 33", "q4_0 block size 32"});
    expect_error(one_tensor("t", {8}, 0, 16, 64), {"tensor 't'", "not a multiple of the alignment"});
    expect_error(one_tensor("t", {8}, 0, 0, 16), {"tensor 't'", "runs past the end"});
    expect_error(one_tensor("t", {8}, 0, uint64_t{1} << 62, 32), {"tensor 't'", "runs past the end"});
    expect_error(one_tensor("t", {}, 0, 0, 32), {"0 dimensions"});
    expect_error(one_tensor("t", {1, 1, 1, 1, 1}, 0, 0, 32), {"5 dimensions"});
    expect_error(one_tensor("t", {uint64_t{1} << 63}, 0, 0, 32), {"too large"});
    expect_error(one_tensor("t", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0, 32), {"overflows"});
    expect_error(one_tensor(std::string(64, 'n'), {8}, 0, 0, 32), {"name is 64 bytes"});
    expect_error(one_tensor("", {8}, 0, 0, 32), {"is empty"});
}

TEST(GgufBroken, DuplicateAndOverlappingTensors) {
    auto two = [](std::string_view a, uint64_t off_a, std::string_view b, uint64_t off_b) {
        return Bytes()
            .header(2, 0)
            .tensor_info(a, {16}, 0, off_a)
            .tensor_info(b, {16}, 0, off_b)
            .pad_to(32)
            .zeros(256)
            .data;
    };
    auto ok = two("a", 0, "b", 64);
    ASSERT_NO_THROW(GgufFile::parse("ok", ok.data(), ok.size()));
    expect_error(two("a", 0, "a", 64), {"duplicate tensor 'a'"});
    expect_error(two("a", 0, "b", 32), {"overlaps tensor"});
    expect_error(two("a", 64, "b", 64), {"overlaps"});
}

TEST(GgufBroken, HostileNamesArePrintable) {
    std::string name = "bad\x01\xff";
    auto bytes = Bytes().header(0, 2).str(name).u32(4).u32(1).str(name).u32(4).u32(1).data;
    try {
        GgufFile::parse("x.gguf", bytes.data(), bytes.size());
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'bad?" "?'"), std::string::npos) << e.what();
    }
}

TEST(GgufBroken, OpenMissingFile) {
    try {
        GgufFile::open("/nonexistent/model.gguf");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf: cannot open"), std::string::npos);
    }
    EXPECT_THROW(GgufFile::open("/"), Error);
}

}  // namespace
}  // namespace tandem
