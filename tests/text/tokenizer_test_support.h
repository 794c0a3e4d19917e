// Helpers for the tokenizer tests: hand-made vocabularies, the real Qwen3 and Llama-3
// vocabularies (made with the oracle kit's make_gguf.py), and the llama.cpp tokenizer oracle.
#pragma once

#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "text/tokenizer.h"

namespace tandem::testing {

// The 256 texts of the byte-level alphabet, in byte order.
std::vector<std::string> byte_level_alphabet();

// A vocabulary to write by hand; fields left empty are not written.
struct VocabSpec {
    std::string arch = "qwen3";  // general.architecture; "" leaves it out
    std::string model = "gpt2";
    std::string pre = "qwen2";  // "" leaves tokenizer.ggml.pre out
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<float> scores;
    std::vector<std::string> merges;
    bool write_merges = true;
    std::vector<std::pair<std::string, int64_t>> ids;  // ("eos", 3) -> tokenizer.ggml.eos_token_id
    std::vector<std::pair<std::string, bool>> flags;   // ("add_bos_token", true)
    GgufWriter writer() const;
};

// 256 byte tokens, merges that spell "hello" and " world" (and a few more), control tokens
// <|endoftext|> (bos) <|im_start|> <|im_end|> (eos), user-defined <think>, unused [PAD0].
VocabSpec small_bpe_vocab();
TokenId find_token(const Tokenizer& tokenizer, std::string_view text);

// Builds a tokenizer from an in-memory GGUF.
Tokenizer tokenizer_from(const GgufWriter& writer);
// Tokenizer::from_gguf's Error message for this GGUF, or "" when it loads.
std::string load_error(const GgufWriter& writer);

// The llama architecture keys llama.cpp reads before a vocabulary (enough for vocab-only loads).
void add_llama_arch_keys(GgufWriter& writer);

// The kit's tokenizer.json for "qwen3", "llama3", "gemma3", "gptoss" or "deepseek_v3"; "" when
// the kit lacks it.
std::string hf_tokenizer_json(const std::string& name);
// A small model GGUF with the real vocabulary of `name` ("qwen3", "llama3", "gptoss" with the
// gpt-4o pre-tokenizer), optionally with another tokenizer.ggml.pre, or a vocabulary-only GGUF
// of "gemma4" (Gemma's tokenizer.json as llama.cpp's converter writes a Gemma 4 vocabulary);
// made once and kept in the build tree.
std::string real_vocab_gguf(const std::string& name, const std::string& pre = "");

// Writes a metadata-only copy of the GGUF at `src` (no tensors: enough for llama.cpp's
// vocab-only loads) with tokenizer.ggml.pre set to `pre`. With `max_tokens`, only the first
// tokens are kept, with the merges among them (smaller vocabularies load much faster).
void write_vocab_copy(const std::string& src, const std::string& pre, const std::string& dst,
                      size_t max_tokens = 0);

struct OracleTokens {
    std::vector<std::vector<TokenId>> plain;    // parse_special off
    std::vector<std::vector<TokenId>> special;  // parse_special on
    std::vector<std::string> detokenized;       // render_special off
    std::vector<std::string> detokenized_special;
    std::vector<TokenId> eog;
    std::vector<TokenId> control;
    TokenId bos = kNoToken;
    TokenId eos = kNoToken;
    bool add_bos = false;
    bool add_eos = false;
};
struct OracleJob {
    std::string model;
    std::vector<std::string> texts;
    std::vector<std::vector<TokenId>> detokenize;
    std::vector<TokenId> check_ids;  // tokens whose EOG and control status to report
};
// For each job, llama.cpp's tokenization (add_special off) of every text, its detokenization
// of every id list, and which of check_ids it treats as EOG and control tokens; all jobs in one
// node process (tests/text/oracle_tokenize.mjs).
std::vector<OracleTokens> run_tokenizer_oracle(const std::vector<OracleJob>& jobs);
// The tokens that could be special by any of llama.cpp's rules: those of a type other than
// normal and those whose text has '<', '[' or '|'.
std::vector<TokenId> special_candidates(const Tokenizer& tokenizer);

// tests/text/data/tokenizer_corpus.json.
std::vector<std::string> load_corpus();

// "[1, 2, 3]" for failure messages.
std::string ids_string(const std::vector<TokenId>& ids);

}  // namespace tandem::testing
