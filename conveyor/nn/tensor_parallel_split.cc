#include "conveyor/nn/tensor_parallel_split.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {
bool CountsInNorm(TensorParallelSplit split, int rank) {
  return split.replicated() ? rank == 0 : rank % split.replicas == 0;
}

int KvReplicas(int kv_heads, int tp) {
  if (kv_heads % tp == 0) return 1;
  CONVEYOR_CHECK(tp % kv_heads == 0)
      << "kv_heads (" << kv_heads << ") and the tensor-parallel size (" << tp
      << "): one must divide the other (each rank keeps whole key-value heads, or one replicated "
         "over tp / kv_heads ranks)";
  return tp / kv_heads;
}

int64_t VocabularyRowsPerRank(int64_t vocab, int tp) { return (vocab + tp - 1) / tp; }

void CheckVocabularySplit(int64_t vocab, int tp) {
  const int64_t rows = VocabularyRowsPerRank(vocab, tp);
  CONVEYOR_CHECK(rows * (tp - 1) < vocab)
      << "a vocabulary of " << vocab << " tokens cannot be split over " << tp
      << " tensor-parallel ranks, even padded: " << rows << " rows each would leave rank " << tp - 1
      << " only padding";
}

ShardRows ShardRowsOf(TensorParallelSplit split, int64_t extent, int size, int rank) {
  if (split.padded) {
    CheckVocabularySplit(extent, size);
    const int64_t rows = VocabularyRowsPerRank(extent, size), begin = rank * rows;
    return {begin, std::min(rows, extent - begin), rows};
  }
  const int parts = size / split.replicas;
  CONVEYOR_CHECK(extent % (split.blocks * parts) == 0)
      << "an extent of " << extent << " along dim " << split.dim << " does not split into "
      << split.blocks << " block(s) of " << parts << " tensor-parallel parts";
  const int64_t rows = extent / split.blocks / parts;
  return {rank / split.replicas * rows, rows, rows};
}

}  // namespace conveyor
