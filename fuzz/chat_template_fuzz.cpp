// libFuzzer target: any template source either fails with tandem::Error or renders a fixed
// conversation within the interpreter's limits; never a crash, hang, leak or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(
        R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <b>there</b>"},
            {"role":"assistant","content":"Hello","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]},
            {"role":"user","content":"Again"}])");
    static const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(
        R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
    try {
        tandem::ChatTemplate tmpl(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
        tmpl.render(kMessages, kTools, true, nlohmann::ordered_json::object());
    } catch (const tandem::Error&) {
    }
    return 0;
}
