// The safetensors file format (Hugging Face), read and written without third-party code.
//
//   8 bytes      N, the header's length, an unsigned little-endian 64-bit integer
//   N bytes      a JSON object: for each tensor name
//                  {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//                and optionally "__metadata__": {string: string}; may end in spaces
//   the rest     the data: each tensor's bytes, row-major, little-endian, at
//                [begin, end) relative to the end of the header
//
// Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL, on every libtorch conveyor builds against
// (1.13 has no U16 / U32 / U64 / F8, so none of them is read on any version).
//
// Loading trusts nothing in the file: a file too short for its header, a header that is not
// a JSON object of well-formed entries, a duplicate name, an unknown dtype, a byte range
// that does not match its dtype and shape, ranges that overlap, leave holes or run past the
// data, trailing bytes, BOOL bytes other than 0 / 1: each throws UserError naming the file
// and the problem, and nothing is returned. Host byte order must be little-endian.
#ifndef CONVEYOR_FORMATS_SAFETENSORS_H_
#define CONVEYOR_FORMATS_SAFETENSORS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace conveyor {

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;  // CPU, contiguous, each its own storage
  std::map<std::string, std::string> metadata;
};

// What a header says about one tensor.
struct SafetensorsEntry {
  std::string dtype;                        // as in the file: "F32", "I64", ...
  at::ScalarType scalar_type = at::kFloat;  // the same dtype, libtorch's
  std::vector<int64_t> shape;
};

// A file's header alone: its tensors' dtypes and shapes, and the metadata.
struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any device, layout or strides; copied to CPU row-major) in name order,
// the header padded with spaces so the data starts 8-byte aligned. Atomic and durable
// (AtomicFile, conveyor/common/atomic_file.h): a temporary file beside `path`, fsynced,
// renamed over `path`, the folder fsynced. Throws UserError for an empty name or
// "__metadata__", an unsupported dtype, or an I/O failure (a full disk included: the old
// file, if any, is then left as it was and no temporary file remains).
void SaveSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

SafetensorsFile LoadSafetensors(const std::string& path);

// How many elements of `t` are NaN or infinite (0 for integer and boolean dtypes): checked
// of every weight a checkpoint or a Hugging Face folder gives, and every tensor a checkpoint
// saves.
int64_t NonFiniteCount(const at::Tensor& t);

// Reads and checks the header as LoadSafetensors does (the layout against the file's size
// included) without reading any tensor's data.
SafetensorsHeader LoadSafetensorsHeader(const std::string& path);

// One file opened to read its tensors one at a time: the header is read and checked as
// LoadSafetensorsHeader does; each Read seeks to one tensor's bytes and reads those alone,
// so a caller holds no more of the file than the tensors it asks for (a rank loading its
// slice of a model larger than its memory). Not thread-safe; the file stays open while the
// reader lives.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&&) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) noexcept;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // The tensor `name` (CPU, contiguous, its stored dtype). UserError when the file has no
  // tensor of that name, or its bytes cannot be read.
  at::Tensor Read(const std::string& name);
  // Bytes [begin, begin + length) of tensor `name`'s data, counted from its first byte, into
  // `out`, reading those alone: a part of a tensor (tensor_slice.h reads a tensor-parallel
  // rank's through here). UserError for a range outside the tensor or a BOOL tensor (whose
  // bytes are checked whole), or when the bytes cannot be read.
  void ReadBytes(const std::string& name, uint64_t begin, uint64_t length, void* out);
  // How many bytes of tensor data Read and ReadBytes have read so far.
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  struct File;
  std::string path_;
  SafetensorsHeader header_;
  std::unique_ptr<File> file_;
  uint64_t bytes_read_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_FORMATS_SAFETENSORS_H_
