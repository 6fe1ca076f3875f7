// Small text helpers shared by the parsers and the console tables.
#ifndef CONVEYOR_COMMON_TEXT_H_
#define CONVEYOR_COMMON_TEXT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor {

// printf into a std::string of at most 511 characters (a longer one is an InternalError).
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// `text` without leading and trailing whitespace (a view into the same characters).
std::string_view Trim(std::string_view text);

// `text` padded with spaces to `width` characters, plus one space: a table's first column. A
// longer text is kept whole (the row then runs wider) and still gets its separating space.
std::string PadColumn(std::string_view text, size_t width);

// Length of the well-formed UTF-8 sequence starting at bytes[i] (a lead byte >= 0x80), or 0
// when it is not one (overlong forms, surrogates and code points above U+10FFFF are rejected).
// Precondition: i < bytes.size().
size_t Utf8SequenceLength(std::string_view bytes, size_t i);

// The offset of the first byte of `text` that does not begin a valid UTF-8 sequence, or
// nullopt when all of it is valid UTF-8.
std::optional<size_t> FirstInvalidUtf8(std::string_view text);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_TEXT_H_
