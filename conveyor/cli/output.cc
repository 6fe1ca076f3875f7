#include "conveyor/cli/output.h"

#include <iostream>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"

namespace conveyor {

void WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    CONVEYOR_CHECK(std::cout.good()) << "cannot write the output to stdout";
    return;
  }
  WriteFileAtomically(path, text);
}

}  // namespace conveyor
