#include "conveyor/common/input_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Why stat(2) failed on `path`, in words.
std::string WhyMissing(const std::string& path, int error) {
  struct stat link {};
  if (error == ENOENT && lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    return "is a symbolic link to nothing (its target does not exist)";
  }
  if (error == ENOENT) return "does not exist";
  if (error == ELOOP) return "its symbolic links loop (or nest too deep): it names no file";
  return std::string("cannot be reached: ") + std::strerror(error);
}

}  // namespace

void CheckInputPath(std::string_view flag, const std::string& path, PathKind kind) {
  struct stat st {};
  const bool found = stat(path.c_str(), &st) == 0;
  const int error = errno;
  CONVEYOR_CHECK(found) << flag << " " << path << ": " << WhyMissing(path, error);
  const bool folder = S_ISDIR(st.st_mode), file = S_ISREG(st.st_mode);
  CONVEYOR_CHECK(folder || file) << flag << " " << path
                                 << ": is neither a file nor a directory (a device, a pipe or a "
                                    "socket), expected a "
                                 << (kind == PathKind::kFile     ? "file"
                                     : kind == PathKind::kFolder ? "directory"
                                                                 : "file or a directory");
  CONVEYOR_CHECK(!folder || kind != PathKind::kFile)
      << flag << " " << path << ": is a directory, expected a file";
  CONVEYOR_CHECK(!file || kind != PathKind::kFolder)
      << flag << " " << path << ": is a file, expected a directory";
  const bool readable = access(path.c_str(), folder ? R_OK | X_OK : R_OK) == 0;
  const int unreadable = errno;
  CONVEYOR_CHECK(readable) << flag << " " << path
                           << ": cannot be read: " << std::strerror(unreadable);
}

std::string ReadInputFile(std::string_view flag, const std::string& path) {
  CheckInputPath(flag, path, PathKind::kFile);
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.is_open()) << flag << " " << path
                               << ": cannot be read: " << std::strerror(errno);
  std::string content;
  try {
    // libstdc++ throws std::ios_base::failure from a failed read whatever the stream's mask.
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    in.setstate(std::ios::badbit);
  }
  CONVEYOR_CHECK(!in.bad()) << flag << " " << path << ": cannot be read: " << std::strerror(errno);
  return content;
}

}  // namespace conveyor
