#include "conveyor/cli/output.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "conveyor/common/error.h"

namespace conveyor::cli {

void WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary);
    CONVEYOR_CHECK(out.good()) << "cannot write '" << path << "'";
    out << text;
    CONVEYOR_CHECK(out.good()) << "cannot write '" << path << "'";
  }
  CONVEYOR_CHECK(std::rename(temp.c_str(), path.c_str()) == 0)
      << "cannot move '" << temp << "' to '" << path << "'";
}

}  // namespace conveyor::cli
