// Small text helpers shared by the parsers and the console tables.
#ifndef CONVEYOR_COMMON_TEXT_H_
#define CONVEYOR_COMMON_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace conveyor {

// `text` without leading and trailing whitespace (a view into the same characters).
std::string_view Trim(std::string_view text);

// `text` padded with spaces to `width` characters, plus one space: a table's first column. A
// longer text is kept whole (the row then runs wider) and still gets its separating space.
std::string PadColumn(std::string_view text, size_t width);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_TEXT_H_
