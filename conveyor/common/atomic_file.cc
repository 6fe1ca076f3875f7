#include "conveyor/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Throws UserError "<context()>: <the system's reason>" unless `ok`. Call it right after the
// system call: errno is read before `context` builds its text (which may change errno).
template <typename Context>
void CheckErrno(bool ok, const Context& context) {
  if (ok) return;
  const int error = errno;
  CONVEYOR_CHECK(false) << context() << ": " << std::strerror(error);
}

std::string CannotWrite(const std::string& path) { return "cannot write '" + path + "'"; }

std::string FolderOf(const std::string& file) {
  return std::filesystem::path(file).parent_path().string();
}

// Opens the FIFO `path` for writing once something reads it, waiting at most
// kFifoReaderWait (a plain open would block until a reader comes, maybe forever); returns
// the descriptor, blocking again, or -1 with errno set.
int OpenFifo(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + kFifoReaderWait;
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    // ENXIO: no reader yet.
    CONVEYOR_CHECK(errno == ENXIO || errno == EINTR) << CannotWrite(path) << ": "
                                                     << std::strerror(errno);
    CONVEYOR_CHECK(std::chrono::steady_clock::now() < deadline)
        << CannotWrite(path) << ": it is a FIFO that nothing reads (waited "
        << kFifoReaderWait.count() << " s for a reader)";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), target_(path_) {
  CONVEYOR_CHECK(!path_.empty()) << "cannot write a file with an empty name";
  struct stat st;
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (!exists) {
    CheckErrno(errno == ENOENT, [&] { return CannotWrite(path_); });
    struct stat link;
    CONVEYOR_CHECK(::lstat(path_.c_str(), &link) != 0)
        << CannotWrite(path_) << ": it is a symbolic link to nothing";
  } else if (S_ISDIR(st.st_mode)) {
    CONVEYOR_CHECK(false) << CannotWrite(path_) << ": it is a folder (give a file name)";
  } else if (!S_ISREG(st.st_mode)) {
    // A device or a FIFO: renaming over it would replace it; write to it instead.
    fd_ = S_ISFIFO(st.st_mode) ? OpenFifo(path_)
                               : ::open(path_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    CheckErrno(fd_ >= 0, [&] { return CannotWrite(path_); });
    return;
  } else {
    struct stat link;
    CheckErrno(::lstat(path_.c_str(), &link) == 0, [&] { return CannotWrite(path_); });
    if (S_ISLNK(link.st_mode)) {
      char resolved[PATH_MAX];
      CheckErrno(::realpath(path_.c_str(), resolved) != nullptr,
                 [&] { return CannotWrite(path_) + ": cannot resolve the symbolic link"; });
      target_ = resolved;
    }
  }
  // The pid separates processes, the counter this process's writers; O_EXCL settles the rest
  // (another host's process with the same pid on a shared filesystem).
  static std::atomic<uint64_t> next_temp{0};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = target_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(next_temp++);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 100)) {
      // Not ours to remove (the destructor does not run when the constructor throws).
      CheckErrno(false, [&] { return CannotWrite(path_) + ": cannot create '" + temp_ + "'"; });
    }
  }
  if (exists && ::fchmod(fd_, st.st_mode & 07777) != 0) {
    const int error = errno;
    ::close(fd_);
    ::unlink(temp_.c_str());
    errno = error;
    CheckErrno(false, [&] {
      return CannotWrite(path_) + ": cannot set the permissions of '" + temp_ + "'";
    });
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::Write(const void* data, size_t bytes) {
  CONVEYOR_ASSERT(fd_ >= 0 && !committed_) << "write to '" << path_ << "' after Commit()";
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, std::min(bytes, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // a device that takes nothing would loop forever
    CheckErrno(n > 0, [&] { return CannotWrite(path_); });
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::Commit() {
  CONVEYOR_ASSERT(fd_ >= 0 && !committed_) << "'" << path_ << "' committed twice";
  const bool direct = temp_.empty();
  if (!direct) CheckErrno(::fsync(fd_) == 0, [&] { return CannotWrite(path_) + ": fsync"; });
  const int closed = ::close(fd_);
  fd_ = -1;
  CheckErrno(closed == 0, [&] { return CannotWrite(path_) + ": close"; });
  if (!direct) {
    CheckErrno(::rename(temp_.c_str(), target_.c_str()) == 0,
               [&] { return CannotWrite(path_) + ": renaming '" + temp_ + "' over it"; });
  }
  committed_ = true;
  if (!direct) SyncFolder(FolderOf(target_));
}

void WriteFileAtomically(const std::string& path, std::string_view contents) {
  AtomicFile file(path);
  file.Write(contents);
  file.Commit();
}

void SyncFolder(const std::string& folder) {
  const std::string name = folder.empty() ? "." : folder;
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto context = [&] { return "cannot sync folder '" + name + "'"; };
  CheckErrno(fd >= 0, context);
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP;
  const int error = errno;
  ::close(fd);
  errno = error;
  CheckErrno(synced, context);
}

}  // namespace conveyor
