#include "conveyor/common/scratch_folder_testing.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"

namespace conveyor {

namespace fs = std::filesystem;

ScratchFolder::ScratchFolder() {
  std::string pattern = (fs::temp_directory_path() / "conveyor-test-XXXXXX").string();
  CONVEYOR_ASSERT(mkdtemp(pattern.data()) != nullptr) << "mkdtemp failed for " << pattern;
  path_ = pattern;
}

ScratchFolder::~ScratchFolder() {
  std::error_code ignored;
  RemoveTree(path_, ignored);
}

std::string ScratchFolder::Path(const std::string& relative) const {
  return (fs::path(path_) / relative).string();
}

std::string ScratchFolder::Write(const std::string& relative, const std::string& content) const {
  const fs::path file = fs::path(path_) / relative;
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
  return file.string();
}

std::set<std::string> ScratchFolder::Names() const {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(path_)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

}  // namespace conveyor
