// A file mapped read-only for the object's lifetime, for token files of any size: pages are
// read when touched and can be dropped again (Release), so reading keeps little resident.
//
// Thread-safety: immutable after construction; Release and Advise only advise the kernel
// and are safe from any thread.
#ifndef CONVEYOR_DATA_MAPPED_FILE_H_
#define CONVEYOR_DATA_MAPPED_FILE_H_

#include <cstdint>
#include <string>

namespace conveyor {

class MappedFile {
 public:
  // Maps the regular file at `path` (nothing is mapped for an empty one). Throws UserError
  // naming the path when it cannot be opened, is not a regular file, or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const char* bytes() const { return bytes_; }  // null when empty
  int64_t size() const { return size_; }

  // Drops the pages of bytes [begin, end) (all of them by default; end -1 = the file's end)
  // from this process; they stay in the page cache and are read again when touched.
  void Release(int64_t begin = 0, int64_t end = -1) const;
  // Tells the kernel how bytes [begin, end) will be read (madvise: MADV_RANDOM for sampled
  // windows, MADV_SEQUENTIAL for one pass over all of it, MADV_WILLNEED for a range read
  // whole).
  void Advise(int advice, int64_t begin = 0, int64_t end = -1) const;

 private:
  std::string path_;
  const char* bytes_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_MAPPED_FILE_H_
