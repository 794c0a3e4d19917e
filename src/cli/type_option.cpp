// Parsing of ggml type names given on the command line.
#include "cli/type_option.h"

#include <sstream>

#include "base/error.h"
#include "formats/format_table.h"

namespace tandem::cli {

GgmlType parse_type(const std::string& name, const std::string& flag) {
    const FormatTraits* f = find_format(name);
    if (f == nullptr || (f->kind != FormatKind::kFloat && f->kind != FormatKind::kQuantized)) {
        std::string known;
        for (const FormatTraits& t : all_formats()) {
            if (t.kind == FormatKind::kFloat || t.kind == FormatKind::kQuantized) {
                known += (known.empty() ? "" : ", ") + std::string(t.name);
            }
        }
        fail("{}: '{}' is not a weight type (one of: {})", flag, name, known);
    }
    return f->type;
}

std::vector<GgmlType> parse_type_list(const std::string& list, const std::string& flag) {
    std::vector<GgmlType> types;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) types.push_back(parse_type(item, flag));
    if (types.empty()) fail("{}: empty type list", flag);
    return types;
}

}  // namespace tandem::cli
