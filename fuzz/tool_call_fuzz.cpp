// libFuzzer target: any model output split into content, reasoning and tool calls by every
// format, whole and streamed in pieces: the same result both ways (the target traps otherwise),
// every call's arguments a JSON object; never a crash, leak or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/tool_call_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    // The first byte chooses the piece size of the streamed run.
    const size_t step = 1 + data[0] % 16;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    for (const tandem::ToolCallFormat& f : tandem::tool_call_formats()) {
        const tandem::ParsedReply whole = tandem::parse_tool_calls(f, text);
        tandem::ToolCallParser p(f);
        tandem::ParsedReply streamed;
        for (size_t i = 0; i < text.size(); i += step)
            tandem::append_events(streamed, p.feed(text.substr(i, step)));
        tandem::append_events(streamed, p.finish());
        if (streamed.content != whole.content || streamed.reasoning != whole.reasoning ||
            streamed.calls.size() != whole.calls.size())
            __builtin_trap();
        for (size_t i = 0; i < whole.calls.size(); ++i) {
            if (streamed.calls[i].name != whole.calls[i].name ||
                streamed.calls[i].arguments != whole.calls[i].arguments)
                __builtin_trap();
            if (!nlohmann::json::parse(whole.calls[i].arguments, nullptr, false).is_object())
                __builtin_trap();
        }
    }
    return 0;
}
