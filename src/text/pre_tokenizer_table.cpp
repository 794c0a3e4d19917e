// Split patterns per pre-tokenizer. The patterns are llama.cpp's adapted forms of the
// tokenizer.json regexes ((?i:...) spelled out as [sS] etc.), with every non-ASCII character
// written as \x{...} (some, like U+1FDB or U+212A, would not survive an editor's Unicode
// normalization). PreTokenizer adapts the few constructs whose meaning differs between
// llama.cpp's splitter and PCRE2.
#include "text/pre_tokenizer_table.h"

#include <algorithm>
#include <array>

namespace tandem {
namespace {

// The contractions, case-insensitive.
#define TANDEM_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

constexpr std::string_view kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr std::string_view kLlama3 = TANDEM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 = TANDEM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen35 = TANDEM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kJais2 = TANDEM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
constexpr std::string_view kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re" TANDEM_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re" TANDEM_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGraniteEmbMulti =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+)re" TANDEM_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*)re" TANDEM_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kYoutuWords =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re" TANDEM_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re" TANDEM_CONTRACTIONS
    R"re(?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kBloom =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";
constexpr std::string_view kCjkDeepseek =
    R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
// deepseek-llm's letters: Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee ... by range.
constexpr std::string_view kDeepseekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";

#undef TANDEM_CONTRACTIONS

const std::vector<PreTokenizerSpec>& specs() {
    static const std::vector<PreTokenizerSpec> kSpecs = {
        {.names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                   "lfm2", "jina-v5-nano"},
         .patterns = {kLlama3},
         .ignore_merges = true,
         .add_bos = true},
        // chatglm's vocabularies have no default BOS in llama.cpp; none has one here anyway.
        {.names = {"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, .patterns = {kLlama3}},
        {.names = {"jais-2"}, .patterns = {kJais2}},
        {.names = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2",
                   "hunyuan", "solar-open", "grok-2"},
         .patterns = {kQwen2}},
        {.names = {"qwen35"}, .patterns = {kQwen35}},
        {.names = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                   "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe",
                   "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"},
         .patterns = {kGpt2}},
        {.names = {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                   "minerva-7b", "mellum2"},
         .patterns = {R"re(\p{N})re", kGpt2}},
        {.names = {"falcon"},
         .patterns = {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"}},
        {.names = {"deepseek-llm"},
         .patterns =
             {R"re([\r\n])re", kDeepseekLetters,
              R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
              R"re(\s+$)re", kCjkDeepseek, R"re(\p{N}+)re"}},
        {.names = {"deepseek-coder"},
         .patterns = {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjkDeepseek,
                      R"re(\p{N})re"}},
        {.names = {"deepseek-v3", "hunyuan-dense", "joyai-llm"},
         .patterns =
             {R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
              R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
        {.names = {"youtu"},
         .patterns =
             {R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
              kYoutuWords},
         .ignore_merges = true},
        {.names = {"poro-chat", "bloom", "gpt3-finnish"}, .patterns = {kBloom}},
        {.names = {"viking"}, .patterns = {kBloom, R"re(\p{N})re"}},
        {.names = {"tekken"}, .patterns = {kTekken}, .ignore_merges = true, .add_bos = true},
        {.names = {"chameleon"},
         .patterns = {R"re(<sentinel:[0-9]+>)re", R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re",
                      R"re(([\t\n]|    |  ))re", R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re",
                      kGpt2},
         .add_bos = true},
        {.names = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, .patterns = {kGpt4o}},
        {.names = {"granite-embed-multi-97m"},
         .patterns = {kGraniteEmbMulti},
         .ignore_merges = true},
        {.names = {"bailingmoe", "bailingmoe2", "llada-moe"},
         .patterns =
             {R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
        {.names = {"seed-coder"},
         .patterns =
             {R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
        {.names = {"laguna"}, .patterns = {R"re([^\n]+|[\n]+)re", kQwen2}},
        {.names = {"exaone-moe"},
         .patterns =
             {R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
        {.names = {"minicpm5"},
         .patterns =
             {R"re(\p{N}{1,3})re",
              R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
         .ignore_merges = true},
        // Gemma 4 splits at newlines only (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4).
        {.names = {"gemma4", "granite-embed-multi-311m"},
         .patterns = {R"re([^\n]+|[\n]+)re"},
         .force_add_bos = true,
         .spm_style = true},
        {.names = {"sarvam-moe"}, .patterns = {R"re([^\n]+|[\n]+)re"}, .spm_style = true},
        {.names = {"default"},
         .patterns = {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re",
                      R"re([0-9][0-9][0-9])re"}},
    };
    return kSpecs;
}

// Known to llama.cpp v0.4.0 but built on custom splitters (kimi-k2, afmoe, tiny_aya's digit
// grouping), empty-match lookaheads (superbpe) or vocabularies of another kind.
constexpr std::array<std::string_view, 6> kUnsupported = {"kimi-k2",  "afmoe",    "tiny_aya",
                                                          "cohere2moe", "superbpe", "whitespace"};

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer_spec(std::string_view name) {
    for (const PreTokenizerSpec& spec : specs()) {
        if (std::find(spec.names.begin(), spec.names.end(), name) != spec.names.end()) return &spec;
    }
    return nullptr;
}

const PreTokenizerSpec& default_pre_tokenizer_spec() {
    return *find_pre_tokenizer_spec("default");
}

bool is_unsupported_pre_tokenizer(std::string_view name) {
    return std::find(kUnsupported.begin(), kUnsupported.end(), name) != kUnsupported.end();
}

}  // namespace tandem
