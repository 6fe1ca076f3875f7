// Small text helpers shared by the parsers.
#ifndef CONVEYOR_COMMON_TEXT_H_
#define CONVEYOR_COMMON_TEXT_H_

#include <string_view>

namespace conveyor {

// `text` without leading and trailing whitespace (a view into the same characters).
std::string_view Trim(std::string_view text);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_TEXT_H_
