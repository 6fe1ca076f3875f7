#include "conveyor/formats/tensor_slice.h"

#include <ATen/ATen.h>

#include "conveyor/common/error.h"
#include "conveyor/nn/tensor_parallel_split.h"

namespace conveyor {
namespace {

// ShardRowsOf for the stored tensor `name`, its refusal naming the tensor and where it is.
ShardRows RowsOf(const StoredTensor& stored, TensorParallelSplit split, int size, int rank,
                 const std::string& where, const std::string& name) {
  CONVEYOR_ASSERT(rank >= 0 && rank < size)
      << "tensor-parallel rank " << rank << " is outside [0, " << size << ")";
  CONVEYOR_CHECK(split.dim < static_cast<int>(stored.shape.size()))
      << where << "tensor '" << name << "' of shape " << at::IntArrayRef(stored.shape)
      << " has no dim " << split.dim << " to split";
  try {
    return ShardRowsOf(split, stored.shape[split.dim], size, rank);
  } catch (const UserError& e) {
    throw UserError(where + "tensor '" + name + "' does not split into " + std::to_string(size) +
                    " tensor-parallel parts: " + e.what());
  }
}

}  // namespace

std::vector<int64_t> TensorSliceShape(const StoredTensor& stored, const ParameterSpec& spec,
                                      int size, int rank, const std::string& where,
                                      const std::string& name) {
  std::vector<int64_t> shape = stored.shape;
  const TensorParallelSplit split = spec.tp;
  if (split.replicated() || size == 1) return shape;
  shape[split.dim] = RowsOf(stored, split, size, rank, where, name).rows * split.blocks;
  return shape;
}

void ReadTensorSliceInto(TensorSource& source, const std::string& name, const ParameterSpec& spec,
                         int size, int rank, const at::Tensor& dst) {
  const auto found = source.tensors().find(name);
  CONVEYOR_ASSERT(found != source.tensors().end()) << "no stored tensor '" << name << "'";
  const StoredTensor& stored = found->second;
  const std::string where = source.Where(name);
  const std::vector<int64_t> shape = TensorSliceShape(stored, spec, size, rank, where, name);
  CONVEYOR_CHECK(dst.sizes() == at::IntArrayRef(shape))
      << where << "tensor '" << name << "' gives this rank a part of shape "
      << at::IntArrayRef(shape) << ", its parameter has shape " << dst.sizes();
  // The whole tensor is the slice of one block, all of whose rows are read, along dim 0 (a
  // scalar: one run of one element).
  const TensorParallelSplit split = spec.tp;
  const bool whole = split.replicated() || size == 1;
  const int dim = whole ? 0 : split.dim;
  const int blocks = whole ? 1 : split.blocks;
  const int64_t extent = stored.shape.empty() ? 1 : stored.shape[dim];
  const ShardRows part =
      whole ? ShardRows{0, extent, extent} : RowsOf(stored, split, size, rank, where, name);
  // Row-major: `outer` runs per block of `part.real` rows of `inner` bytes each.
  int64_t outer = 1, inner = static_cast<int64_t>(c10::elementSize(stored.dtype));
  for (int d = 0; d < dim; ++d) outer *= stored.shape[d];
  for (int d = dim + 1; d < static_cast<int>(stored.shape.size()); ++d) inner *= stored.shape[d];
  const int64_t block = extent / blocks;
  std::vector<ByteRun> runs;
  for (int64_t i = 0; i < outer; ++i) {
    for (int b = 0; b < blocks; ++b) {
      const auto begin = static_cast<uint64_t>((i * extent + b * block + part.begin) * inner);
      const auto length = static_cast<uint64_t>(part.real * inner);
      if (length == 0) continue;
      if (!runs.empty() && runs.back().begin + runs.back().length == begin) {
        runs.back().length += length;  // adjacent: one read
      } else {
        runs.push_back({begin, length});
      }
    }
  }
  // The stored bytes in their dtype, each block's rows after the previous block's: the
  // slice without its padding.
  std::vector<int64_t> read_shape = stored.shape;
  const int64_t real_rows = part.real * blocks;
  if (!read_shape.empty()) read_shape[dim] = real_rows;
  const at::Tensor stored_part = at::empty(read_shape, at::TensorOptions().dtype(stored.dtype));
  if (!runs.empty()) source.ReadRuns(name, runs, stored_part.data_ptr());
  if (read_shape.empty()) {
    dst.copy_(stored_part);
    return;
  }
  dst.narrow(dim, 0, real_rows).copy_(stored_part);
  if (real_rows < dst.size(dim)) dst.narrow(dim, real_rows, dst.size(dim) - real_rows).zero_();
}

at::Tensor ReadTensorSlice(TensorSource& source, const std::string& name, const ParameterSpec& spec,
                           int size, int rank) {
  const auto found = source.tensors().find(name);
  CONVEYOR_ASSERT(found != source.tensors().end()) << "no stored tensor '" << name << "'";
  const at::Tensor slice = at::empty(
      TensorSliceShape(found->second, spec, size, rank, source.Where(name), name), at::kFloat);
  ReadTensorSliceInto(source, name, spec, size, rank, slice);
  return slice;
}

}  // namespace conveyor
