#include "conveyor/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "conveyor/common/error.h"

namespace conveyor {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CONVEYOR_CHECK(fd >= 0) << "cannot open " << path << ": " << std::strerror(errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    CONVEYOR_CHECK(false) << path << " is not a regular file";
  }
  size_ = st.st_size;
  if (size_ > 0) {
    void* at = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int error = errno;
    close(fd);
    CONVEYOR_CHECK(at != MAP_FAILED) << "cannot map " << path << ": " << std::strerror(error);
    bytes_ = static_cast<const char*>(at);
  } else {
    close(fd);
  }
}

MappedFile::~MappedFile() {
  if (bytes_ != nullptr) munmap(const_cast<char*>(bytes_), size_);
}

void MappedFile::Release(int64_t begin, int64_t end) const { Advise(MADV_DONTNEED, begin, end); }

void MappedFile::Advise(int advice, int64_t begin, int64_t end) const {
  if (bytes_ == nullptr) return;
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t first = begin / page * page, last = end < 0 ? size_ : end;
  madvise(const_cast<char*>(bytes_) + first, last - first, advice);
}

}  // namespace conveyor
