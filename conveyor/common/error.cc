#include "conveyor/common/error.h"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <new>
#include <sstream>

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
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return "out of memory (std::bad_alloc): an allocation was refused";
  }
  const std::string text = e.what();
  std::string line = text.substr(0, text.find('\n'));
  // libtorch's CPU allocator: "[enforce fail at alloc_cpu.cpp:75] err == 0.
  // DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. ..."
  const std::string marker = "you tried to allocate ";
  const size_t at = line.find(marker);
  if (line.find("can't allocate memory") != std::string::npos && at != std::string::npos) {
    const double bytes = std::atof(line.c_str() + at + marker.size());
    // What conveyor said before libtorch's text (rank, stage, micro-batch, action) is kept.
    const size_t libtorch = std::min(line.find("[enforce fail"), line.find("DefaultCPUAllocator"));
    std::ostringstream out;
    out << line.substr(0, libtorch == std::string::npos ? 0 : libtorch)
        << "out of memory: a tensor of " << std::fixed << std::setprecision(1) << bytes / (1 << 30)
        << " GiB (" << static_cast<long long>(bytes) << " bytes) could not be allocated";
    return out.str();
  }
  return line;
}

std::string ErrorLine(const std::exception& e) {
  const std::string brief = Brief(e);
  if (dynamic_cast<const InternalError*>(&e) == nullptr) return brief;
  // Said once, however many boundaries the error crossed before it was wrapped again.
  return brief.find(kInternalErrorNote) == std::string::npos ? kInternalErrorNote + brief : brief;
}

}  // namespace conveyor
