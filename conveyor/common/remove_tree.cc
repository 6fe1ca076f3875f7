#include "conveyor/common/remove_tree.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

namespace conveyor {

namespace {

// nftw's callback takes no context: the walk in progress on this thread keeps its count and
// first error here.
thread_local std::uintmax_t removed_count = 0;
thread_local int first_errno = 0;

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  if (::remove(path) != 0) {
    first_errno = errno;
    return 1;  // stops the walk
  }
  ++removed_count;
  return 0;
}

}  // namespace

std::uintmax_t RemoveTree(const std::filesystem::path& path, std::error_code& error) noexcept {
  error.clear();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) error.assign(errno, std::generic_category());
    return 0;
  }
  removed_count = 0;
  first_errno = 0;
  // FTW_DEPTH: a folder after what is in it; FTW_PHYS: links are entries, not followed.
  const int status = ::nftw(path.c_str(), RemoveEntry, 64, FTW_DEPTH | FTW_PHYS);
  if (status != 0) error.assign(first_errno != 0 ? first_errno : errno, std::generic_category());
  return removed_count;
}

std::uintmax_t RemoveTree(const std::filesystem::path& path) {
  std::error_code error;
  const std::uintmax_t count = RemoveTree(path, error);
  if (error) throw std::filesystem::filesystem_error("cannot remove", path, error);
  return count;
}

}  // namespace conveyor
