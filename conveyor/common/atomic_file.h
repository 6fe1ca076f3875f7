// AtomicFile: the one way conveyor writes a file, so that a crash, a full disk or a failed
// rename never leaves a truncated file under the final name, nor a temporary file behind.
//
// What happens depends on what `path` is when the AtomicFile is made:
//   - nothing, or a regular file: the bytes go to a temporary file in the same folder, under
//     a name no other writer uses (`<name>.tmp.<pid>.<n>`, created exclusively); Commit()
//     fsyncs it, renames it over `path` and fsyncs the folder. Readers see the old contents
//     or all of the new ones. A replaced file keeps its permission bits.
//   - a symbolic link: followed. When it ends at a regular file, that file is replaced as
//     above (the link stays a link); a link to nothing is refused.
//   - a folder: refused.
//   - anything else (a character device such as /dev/null or /dev/full, a FIFO): written
//     directly, with no temporary file and no rename; every write and the close are
//     checked (there is nothing to fsync). A FIFO is opened once something reads it,
//     waiting at most kFifoReaderWait; with no reader by then the constructor throws.
//
// Every failure (open, write, fsync, close, rename, folder fsync) throws UserError naming
// `path` and the system's reason (strerror). The temporary file is removed on every failure
// path, and by the destructor when Commit() was never reached (an exception while writing),
// so the old contents of `path` stay as they were.
//
// Thread-safety: one AtomicFile is used by one thread. Distinct AtomicFiles may write into
// one folder, even to one path, from any threads or processes: each has its own temporary
// file and the last Commit() wins.
#ifndef CONVEYOR_COMMON_ATOMIC_FILE_H_
#define CONVEYOR_COMMON_ATOMIC_FILE_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace conveyor {

// How long AtomicFile waits for something to read a FIFO it is to write.
inline constexpr std::chrono::seconds kFifoReaderWait{10};

class AtomicFile {
 public:
  // Opens `path` for writing as described above. Throws UserError.
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Without a Commit(): closes and removes the temporary file; `path` is untouched.
  ~AtomicFile();

  // Appends `bytes` bytes (all of them, or throws). Not after Commit().
  void Write(const void* data, size_t bytes);
  void Write(std::string_view text) { Write(text.data(), text.size()); }

  // Makes the written bytes the contents of `path`, durably. Call once.
  void Commit();

 private:
  std::string path_;    // as given, for messages
  std::string target_;  // the regular file replaced (`path_` with links resolved)
  std::string temp_;    // empty when writing directly
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `contents` to `path` with an AtomicFile.
void WriteFileAtomically(const std::string& path, std::string_view contents);

// fsyncs the folder `folder` ("" = the current one), making the entries created, renamed or
// removed in it survive a crash. A filesystem that cannot fsync folders is accepted as is.
// Throws UserError naming the folder.
void SyncFolder(const std::string& folder);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_ATOMIC_FILE_H_
