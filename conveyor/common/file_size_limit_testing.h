// Test support: writes the kernel refuses midway, as on a full disk, without root.
#ifndef CONVEYOR_COMMON_FILE_SIZE_LIMIT_TESTING_H_
#define CONVEYOR_COMMON_FILE_SIZE_LIMIT_TESTING_H_

#include <sys/resource.h>

#include <csignal>
#include <cstdint>

namespace conveyor {

// While it lives, this process may write no file past `bytes` (RLIMIT_FSIZE's soft limit):
// a write beyond fails with EFBIG, SIGXFSZ ignored; the limit and the signal's handler are
// restored on destruction. Process-wide: every thread is limited. An InternalError when the
// limit cannot be read or set.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(int64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit saved_;
  void (*old_handler_)(int);
};

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_FILE_SIZE_LIMIT_TESTING_H_
