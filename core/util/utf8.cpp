#include "core/util/utf8.h"

namespace meshscope {

std::string validUtf8(std::string_view text) {
    constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
        unsigned char c = byte(i);
        if (c < 0x80) {
            out += char(c);
            ++i;
            continue;
        }
        size_t length = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        if (c >= 0xF5) length = 0;
        bool ok = length > 0 && i + length <= text.size();
        for (size_t k = 1; ok && k < length; ++k)
            ok = (byte(i + k) & 0xC0) == 0x80;
        if (ok && length == 3) {
            unsigned char c1 = byte(i + 1);
            ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);  // overlong, surrogate
        }
        if (ok && length == 4) {
            unsigned char c1 = byte(i + 1);
            ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);  // overlong, > U+10FFFF
        }
        if (ok) {
            out.append(text.substr(i, length));
            i += length;
        } else {
            out += kReplacement;
            ++i;
        }
    }
    return out;
}

}  // namespace meshscope
