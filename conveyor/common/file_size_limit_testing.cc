#include "conveyor/common/file_size_limit_testing.h"

#include "conveyor/common/error.h"

namespace conveyor {

FileSizeLimit::FileSizeLimit(int64_t bytes) {
  CONVEYOR_ASSERT(::getrlimit(RLIMIT_FSIZE, &saved_) == 0) << "getrlimit(RLIMIT_FSIZE) failed";
  struct rlimit small = saved_;
  small.rlim_cur = static_cast<rlim_t>(bytes);
  old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  CONVEYOR_ASSERT(::setrlimit(RLIMIT_FSIZE, &small) == 0) << "setrlimit(RLIMIT_FSIZE) failed";
}

FileSizeLimit::~FileSizeLimit() {
  ::setrlimit(RLIMIT_FSIZE, &saved_);
  std::signal(SIGXFSZ, old_handler_);
}

}  // namespace conveyor
