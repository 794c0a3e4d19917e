// Serialisation of Jinja values: tojson and JavaScript number formatting.
#include "text/jinja_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "text/jinja_error.h"
#include "text/jinja_unicode.h"

namespace tandem::jinja {
namespace {

constexpr int kMaxJsonDepth = 256;

void append_hex4(std::string& out, uint32_t unit) {
    static const char* kHex = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xF];
}

struct Writer {
    const JsonOptions& options;
    std::string item_sep;
    std::string key_sep;
    std::string indent_unit;
    std::string out;

    void newline(int depth) {
        out += '\n';
        for (int i = 0; i < depth; ++i) out += indent_unit;
    }

    void write(const Value& v, int depth) {
        if (depth > kMaxJsonDepth) throw JinjaError("tojson: nesting too deep (cyclic value?)");
        if (out.size() > options.max_bytes) {
            throw JinjaError("tojson: output exceeds " + std::to_string(options.max_bytes) +
                             " bytes");
        }
        switch (v.kind()) {
            case Kind::kUndefined:
                out += options.undefined_as_null ? "null" : "undefined";
                return;
            case Kind::kNone:
                out += "null";
                return;
            case Kind::kBool:
                out += v.as_bool() ? "true" : "false";
                return;
            case Kind::kInt:
                out += std::to_string(v.as_int());
                return;
            case Kind::kFloat:
                out += std::isfinite(v.as_float()) ? js_number(v.as_float()) : "null";
                return;
            case Kind::kString:
                append_json_string(out, v.str(), options.ensure_ascii);
                return;
            case Kind::kArray: {
                const ValueList& items = v.list();
                out += '[';
                bool pretty = options.indent > 0 && !items.empty();
                for (size_t i = 0; i < items.size(); ++i) {
                    if (i > 0) out += item_sep;
                    if (pretty) newline(depth + 1);
                    write(items[i], depth + 1);
                }
                if (pretty) newline(depth);
                out += ']';
                return;
            }
            case Kind::kObject:
            case Kind::kNamespace: {
                const auto& items = v.map().items();
                std::vector<size_t> order(items.size());
                for (size_t i = 0; i < order.size(); ++i) order[i] = i;
                if (options.sort_keys) {
                    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
                        return items[a].first < items[b].first;
                    });
                }
                out += '{';
                bool pretty = options.indent > 0 && !items.empty();
                for (size_t i = 0; i < order.size(); ++i) {
                    if (i > 0) out += item_sep;
                    if (pretty) newline(depth + 1);
                    append_json_string(out, items[order[i]].first, options.ensure_ascii);
                    out += key_sep;
                    write(items[order[i]].second, depth + 1);
                }
                if (pretty) newline(depth);
                out += '}';
                return;
            }
            case Kind::kFunction:
                throw JinjaError("tojson: cannot convert a function to JSON");
        }
    }
};

}  // namespace

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            switch (c) {
                case '"':
                    out += "\\\"";
                    break;
                case '\\':
                    out += "\\\\";
                    break;
                case '\b':
                    out += "\\b";
                    break;
                case '\f':
                    out += "\\f";
                    break;
                case '\n':
                    out += "\\n";
                    break;
                case '\r':
                    out += "\\r";
                    break;
                case '\t':
                    out += "\\t";
                    break;
                default:
                    if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
                        append_hex4(out, c);
                    } else {
                        out += static_cast<char>(c);
                    }
            }
            ++i;
            continue;
        }
        size_t n = utf8_seq_len(c);
        if (n == 1 || i + n > s.size()) n = 1;
        if (!ensure_ascii) {
            out.append(s.substr(i, n));
            i += n;
            continue;
        }
        // Escape as UTF-16 code units, like JSON with ensure_ascii in Python and the reference.
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < n; ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            append_hex4(out, 0xD800 + (cp >> 10));
            append_hex4(out, 0xDC00 + (cp & 0x3FF));
        } else {
            append_hex4(out, cp);
        }
        i += n;
    }
    out += '"';
}

std::string to_json(const Value& value, const JsonOptions& options) {
    Writer w{options, {}, {}, {}, {}};
    if (options.separators) {
        w.item_sep = options.separators->first;
        w.key_sep = options.separators->second;
    } else {
        w.item_sep = options.indent > 0 ? "," : ", ";
        w.key_sep = ": ";
    }
    w.indent_unit.assign(static_cast<size_t>(std::max(options.indent, 0)), ' ');
    w.write(value, 0);
    if (w.out.size() > options.max_bytes) {
        throw JinjaError("tojson: output exceeds " + std::to_string(options.max_bytes) + " bytes");
    }
    return std::move(w.out);
}

std::string js_number(double x) {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    if (x == 0) return "0";
    std::string out;
    if (x < 0) {
        out += '-';
        x = -x;
    }
    // Shortest round-trip digits in scientific form: "d[.ddd]e[+-]XX".
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
    size_t e = sci.find('e');
    std::string digits;
    for (char c : sci.substr(0, e)) {
        if (c != '.') digits += c;
    }
    int exponent = std::stoi(std::string(sci.substr(e + 1)));
    int k = static_cast<int>(digits.size());
    int n = exponent + 1;  // position of the decimal point relative to the digits
    if (k <= n && n <= 21) {
        out += digits;
        out.append(static_cast<size_t>(n - k), '0');
    } else if (0 < n && n <= 21) {
        out += digits.substr(0, static_cast<size_t>(n));
        out += '.';
        out += digits.substr(static_cast<size_t>(n));
    } else if (-6 < n && n <= 0) {
        out += "0.";
        out.append(static_cast<size_t>(-n), '0');
        out += digits;
    } else {
        out += digits[0];
        if (k > 1) {
            out += '.';
            out += digits.substr(1);
        }
        out += 'e';
        out += n - 1 >= 0 ? '+' : '-';
        out += std::to_string(std::abs(n - 1));
    }
    return out;
}

std::string float_display(double x) {
    if (x == 0 && std::signbit(x)) return "-0.0";
    if (std::isfinite(x) && std::floor(x) == x && std::fabs(x) < 1e21) return js_number(x) + ".0";
    return js_number(x);
}

}  // namespace tandem::jinja
