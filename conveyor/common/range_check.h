// Checks of numbers a user gives (flags, config keys, fields of files) against the range
// conveyor accepts, with one message format everywhere:
//
//   --pp must be within [1, 4096], got 100000
//
// `name` is how the user spelled the setting ("--pp", "run.toml: pp"). Real numbers must
// also be finite: NaN and infinities are refused whatever the range.
//
// Thread-safety: no state; safe from any thread.
#ifndef CONVEYOR_COMMON_RANGE_CHECK_H_
#define CONVEYOR_COMMON_RANGE_CHECK_H_

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace conveyor {
namespace internal {

// Throws UserError "NAME must be within RANGE, got VALUE".
[[noreturn]] void ThrowOutOfRange(std::string_view name, std::string_view range,
                                  std::string_view value);

}  // namespace internal

// Throws UserError unless lo <= value <= hi. Any integer type: the comparison is exact
// (a uint64_t above INT64_MAX is out of [0, INT64_MAX], not negative).
template <std::integral T>
void CheckInRange(std::string_view name, T value, int64_t lo, int64_t hi) {
  if (std::cmp_greater_equal(value, lo) && std::cmp_less_equal(value, hi)) return;
  internal::ThrowOutOfRange(name, "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                            std::to_string(value));
}

// Throws UserError unless value is finite and lo <= value <= hi.
void CheckInRange(std::string_view name, double value, double lo, double hi);

// Throws UserError unless value is finite and 0 < value <= hi: "(0, HI]".
void CheckPositiveUpTo(std::string_view name, double value, double hi);

// CheckInRange when `lo` is given, else CheckPositiveUpTo: a real setting's range as a table
// of settings states it.
void CheckInRealRange(std::string_view name, double value, std::optional<double> lo, double hi);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_RANGE_CHECK_H_
