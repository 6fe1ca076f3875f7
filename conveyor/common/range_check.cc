#include "conveyor/common/range_check.h"

#include <cmath>
#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {
namespace internal {

void ThrowOutOfRange(std::string_view name, std::string_view range, std::string_view value) {
  throw UserError(std::string(name) + " must be within " + std::string(range) + ", got " +
                  std::string(value));
}

}  // namespace internal
namespace {

std::string Text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

void CheckInRange(std::string_view name, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return;
  internal::ThrowOutOfRange(name, "[" + Text(lo) + ", " + Text(hi) + "]", Text(value));
}

void CheckPositiveUpTo(std::string_view name, double value, double hi) {
  if (std::isfinite(value) && value > 0 && value <= hi) return;
  internal::ThrowOutOfRange(name, "(0, " + Text(hi) + "]", Text(value));
}

void CheckInRealRange(std::string_view name, double value, std::optional<double> lo, double hi) {
  if (lo.has_value()) {
    CheckInRange(name, value, *lo, hi);
  } else {
    CheckPositiveUpTo(name, value, hi);
  }
}

}  // namespace conveyor
