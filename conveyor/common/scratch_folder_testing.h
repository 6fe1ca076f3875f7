// Test support: a private folder for a test's files.
#ifndef CONVEYOR_COMMON_SCRATCH_FOLDER_TESTING_H_
#define CONVEYOR_COMMON_SCRATCH_FOLDER_TESTING_H_

#include <set>
#include <string>

namespace conveyor {

// A fresh folder with a unique name under the system's temporary folder, removed with
// everything in it on destruction. Thread-compatible.
class ScratchFolder {
 public:
  ScratchFolder();
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::string& path() const { return path_; }
  // path()/relative (nothing is created).
  std::string Path(const std::string& relative) const;
  // Writes `content` to path()/relative, creating folders; returns the full path.
  std::string Write(const std::string& relative, const std::string& content) const;
  // The names of the entries directly in the folder.
  std::set<std::string> Names() const;

 private:
  std::string path_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_SCRATCH_FOLDER_TESTING_H_
