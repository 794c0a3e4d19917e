// PCRE2 glue for the pre-tokenizer patterns.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/split_regex.h"

#include <pcre2.h>

#include <utility>

#include "base/error.h"

namespace tandem {
namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    int n = pcre2_get_error_message(code, buf, sizeof(buf));
    return n < 0 ? fmt::format("PCRE2 error {}", code)
                 : std::string(reinterpret_cast<char*>(buf), n);
}

// Per-thread matching state shared by all patterns: the match data, and a large JIT stack
// for the rare subject that overflows the default 32 KiB one (a 100k-letter word under the
// gpt-4o pattern's lookahead groups does).
struct ThreadState {
    pcre2_match_data* match_data = nullptr;
    pcre2_jit_stack* big_stack = nullptr;
    pcre2_match_context* big_context = nullptr;
    ThreadState() { match_data = pcre2_match_data_create(16, nullptr); }
    ~ThreadState() {
        pcre2_match_context_free(big_context);
        pcre2_jit_stack_free(big_stack);
        pcre2_match_data_free(match_data);
    }
    pcre2_match_context* big() {
        if (big_context == nullptr) {
            big_stack = pcre2_jit_stack_create(256 * 1024, 512 * 1024 * 1024, nullptr);
            big_context = pcre2_match_context_create(nullptr);
            if (big_stack == nullptr || big_context == nullptr) throw std::bad_alloc();
            pcre2_jit_stack_assign(big_context, nullptr, big_stack);
            pcre2_set_heap_limit(big_context, 1024 * 1024);  // KiB, for the interpreter
        }
        return big_context;
    }
};

thread_local ThreadState t_state;

}  // namespace

SplitRegex::SplitRegex(std::string_view pattern) : pattern_(pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // DOLLAR_ENDONLY: '$' means the end of the piece, as in std::regex (ECMAScript), never
    // "before a final newline".
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
    if (code_ == nullptr) {
        fail("pre-tokenizer pattern '{}': {} at offset {}", pattern, pcre2_message(error), offset);
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // the interpreter is the fallback
}

SplitRegex::~SplitRegex() {
    pcre2_code_free(code_);
}

SplitRegex::SplitRegex(SplitRegex&& other) noexcept
    : pattern_(std::move(other.pattern_)), code_(std::exchange(other.code_, nullptr)) {}

SplitRegex& SplitRegex::operator=(SplitRegex&& other) noexcept {
    if (this != &other) {
        pcre2_code_free(code_);
        pattern_ = std::move(other.pattern_);
        code_ = std::exchange(other.code_, nullptr);
    }
    return *this;
}

void SplitRegex::split(std::string_view subject, TextSpan span, std::vector<TextSpan>& out) const {
    const auto* base = reinterpret_cast<PCRE2_SPTR>(subject.data() + span.begin);
    const size_t length = span.end - span.begin;
    pcre2_match_data* md = t_state.match_data;
    size_t pos = 0;   // where the next search starts, relative to the span
    size_t kept = 0;  // end of the last piece emitted
    while (pos < length) {
        int rc = pcre2_match(code_, base, length, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_HEAPLIMIT) {
            rc = pcre2_match(code_, base, length, pos, PCRE2_NO_UTF_CHECK, md, t_state.big());
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            fail("pre-tokenizer pattern '{}' failed on a piece of {} bytes: {}", pattern_, length,
                 pcre2_message(rc));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_end == m_begin) {
            // An empty match cuts nothing; step over one character (none of the shipped
            // patterns can match empty, but a lookahead-only pattern could).
            pos = m_begin + 1;
            while (pos < length && (static_cast<uint8_t>(base[pos]) & 0xC0) == 0x80) ++pos;
            continue;
        }
        if (m_begin > kept) out.push_back({span.begin + kept, span.begin + m_begin});
        out.push_back({span.begin + m_begin, span.begin + m_end});
        kept = pos = m_end;
    }
    if (kept < length) out.push_back({span.begin + kept, span.end});
}

}  // namespace tandem
