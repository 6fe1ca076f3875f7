#include "conveyor/common/error.h"

namespace conveyor::internal {

std::string AssertPrefix(const char* condition, const char* file, int line) {
  std::ostringstream out;
  out << "internal error (a bug in conveyor) at " << file << ":" << line << ": `" << condition
      << "` failed: ";
  return out.str();
}

}  // namespace conveyor::internal
