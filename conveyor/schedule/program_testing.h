// Test helper: a program from one line of space-separated actions per rank.
#ifndef CONVEYOR_SCHEDULE_PROGRAM_TESTING_H_
#define CONVEYOR_SCHEDULE_PROGRAM_TESTING_H_

#include <sstream>
#include <string>
#include <vector>

#include "conveyor/schedule/program.h"

namespace conveyor {

inline Program MakeProgram(const Layout& layout, const std::vector<std::string>& lines) {
  Program program(layout);
  for (size_t r = 0; r < lines.size() && r < program.ranks.size(); ++r) {
    std::istringstream in(lines[r]);
    std::string word;
    while (in >> word) program.ranks[r].push_back(ParseAction(word));
  }
  return program;
}

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_PROGRAM_TESTING_H_
