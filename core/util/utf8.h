#pragma once

// Recorded strings are untrusted bytes: writers that emit text formats pass
// them through validUtf8 so a stray byte cannot break a parser downstream.

#include <string>
#include <string_view>

namespace meshscope {

// `text` with every invalid or overlong UTF-8 sequence (and every encoded
// surrogate) replaced by U+FFFD.
std::string validUtf8(std::string_view text);

}  // namespace meshscope
