// The seam between the stored formats and what loads from them: a TensorSource lists the
// tensors it stores (dtype and shape, by the name it stores them under) and reads runs of a
// tensor's bytes, checking them as its format allows (finite values; checksums where the
// format records them). The one reader of a tensor-parallel rank's slice (tensor_slice.h)
// reads every format through it: a Hugging Face folder (HfCheckpoint) and a conveyor
// checkpoint (CheckpointFiles) both implement it, and a third format (a torch distributed
// checkpoint, say) plugs in by implementing it too. Writing stays each format's own function
// (WriteHfCheckpoint, WriteCheckpointRankFile): the two share no caller that would take one
// interface.
//
// Thread-safety: a TensorSource is not thread-safe (its files' read positions move).
#ifndef CONVEYOR_FORMATS_TENSOR_SOURCE_H_
#define CONVEYOR_FORMATS_TENSOR_SOURCE_H_

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace conveyor {

// A stored tensor's layout: its bytes are `dtype` elements of `shape`, row-major,
// little-endian, contiguous.
struct StoredTensor {
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
};

// Bytes [begin, begin + length) of one stored tensor, counted from its first byte.
struct ByteRun {
  uint64_t begin = 0;
  uint64_t length = 0;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // Every tensor the source stores, by its stored name.
  virtual const std::map<std::string, StoredTensor>& tensors() const = 0;

  // Where tensor `name` is stored, for messages: ends in ": " ("model folder D: F: ").
  virtual std::string Where(const std::string& name) const = 0;

  // Reads the bytes `runs` of tensor `name` into `out`, one run after the other (`out` holds
  // the sum of their lengths). Preconditions: `name` is in tensors(); the runs are ascending,
  // disjoint, non-empty and inside the tensor. Throws UserError naming the tensor and where
  // it is when the bytes cannot be read or fail the format's checks (NaN or infinity in a
  // floating tensor is refused by every format, checked before any checksum); `out` is then
  // unspecified.
  virtual void ReadRuns(const std::string& name, const std::vector<ByteRun>& runs, void* out) = 0;
};

// Throws UserError "<where>tensor '<name>' holds NaN or infinite values (N of the M read)"
// when any of the `count` elements of `dtype` at `data` is NaN or infinite; integer and
// boolean dtypes pass. For sources checking what they read.
void CheckFinite(const void* data, int64_t count, at::ScalarType dtype, const std::string& where,
                 const std::string& name);

}  // namespace conveyor

#endif  // CONVEYOR_FORMATS_TENSOR_SOURCE_H_
