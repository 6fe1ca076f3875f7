#include "conveyor/common/error.h"

namespace conveyor::internal {

std::string AssertPrefix(const char* condition, const char* file, int line) {
  std::ostringstream out;
  out << "internal error (a bug in conveyor) at " << file << ":" << line << ": `" << condition
      << "` failed: ";
  return out.str();
}

}  // namespace conveyor::internal

namespace conveyor {

std::string Brief(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

std::string ErrorLine(const std::exception& e) {
  const std::string brief = Brief(e);
  if (dynamic_cast<const InternalError*>(&e) == nullptr) return brief;
  // Said once, however many boundaries the error crossed before it was wrapped again.
  return brief.find(kInternalErrorNote) == std::string::npos ? kInternalErrorNote + brief : brief;
}

}  // namespace conveyor
