#pragma once

// Recorded strings reach the terminal in `check`, `info`, `summary`, `diff`
// and error lines: a control character in a file name or a label must not
// colour the terminal, move its cursor or split one finding over two lines.

#include <string>
#include <string_view>

namespace meshscope {

// `text` as one line of plain text: C0 controls and DEL written as escapes
// (\n, \r, \t, \x1b, ...), C1 controls (U+0080-U+009F) as \u0080..\u009f,
// invalid UTF-8 as U+FFFD. Printable text, backslashes included, is kept.
// With `keepLines`, newlines and tabs stay as they are (for reports, whose
// stack and code blocks span lines): every other control byte is escaped,
// so no recorded text reaches a report or a terminal as a raw ESC.
std::string terminalSafe(std::string_view text, bool keepLines = false);

}  // namespace meshscope
