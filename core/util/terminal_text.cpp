#include "core/util/terminal_text.h"

#include <cstdio>

#include "core/util/utf8.h"

namespace meshscope {

std::string terminalSafe(std::string_view text, bool keepLines) {
    std::string valid = validUtf8(text);
    std::string out;
    out.reserve(valid.size());
    for (size_t i = 0; i < valid.size(); ++i) {
        auto c = static_cast<unsigned char>(valid[i]);
        char escape[8];
        if (keepLines && (c == '\n' || c == '\t')) {
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            std::snprintf(escape, sizeof escape, "\\x%02x", c);
            out += escape;
        } else if (c == 0xC2 && i + 1 < valid.size() &&
                   static_cast<unsigned char>(valid[i + 1]) <= 0x9F) {
            // U+0080..U+009F: valid UTF-8 guarantees a continuation byte follows
            std::snprintf(escape, sizeof escape, "\\u%04x",
                          static_cast<unsigned char>(valid[i + 1]));
            out += escape;
            ++i;
        } else {
            out += char(c);
        }
    }
    return out;
}

}  // namespace meshscope
