// A private folder for fuzz targets whose parser reads a path rather than bytes: each input is
// written to a file in it, then parsed from there.
//
// The folder is made under $TMPDIR (else /tmp) with a unique name and removed, with
// everything in it, when the object is destroyed. A fuzz target keeps one for the process.
// Failures here are the machine's, not the input's: they print why and abort.
// Thread-compatible.
#ifndef CONVEYOR_FUZZ_SCRATCH_DIR_H_
#define CONVEYOR_FUZZ_SCRATCH_DIR_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor::fuzz {

class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

  // Replaces the file `name` (a path relative to the folder, whose parent exists) by
  // [data, data + size); returns its full path.
  std::string Write(const std::string& name, const uint8_t* data, size_t size) const;

 private:
  std::string path_;
};

}  // namespace conveyor::fuzz

#endif  // CONVEYOR_FUZZ_SCRATCH_DIR_H_
