// How each parameter of a tensor-parallel model is laid out across the p ranks of its TP group
// (tensor_parallel.h): which dimension is split, into how many blocks, and which rows of the
// full tensor each rank holds. Pure arithmetic on extents, without tensors.
//
// Thread-safety: every function is pure.
#ifndef CONVEYOR_NN_TENSOR_PARALLEL_SPLIT_H_
#define CONVEYOR_NN_TENSOR_PARALLEL_SPLIT_H_

#include <cstdint>

namespace conveyor {

// Replicated (dim < 0): every rank holds the full tensor. Split: along `dim` the full tensor
// is `blocks` equal blocks (3 for a QKV projection's stacked queries, keys and values; 1
// otherwise), each cut into p equal parts; rank t holds part t of every block, the blocks in
// order. So a QKV weight (3C, C) gives rank t the rows of its heads from each of q, k and v:
// (3C / p, C).
//
// Padded (the vocabulary's tables, one block): p need not divide the extent V. Every rank
// holds ceil(V / p) rows, rank t those from t ceil(V / p); the rows past V, on the last ranks,
// are zeros that no token ever reads and no logit of them ever reaches a loss or a sampler
// (Megatron pads its vocabulary the same way). A checkpoint or an export holds the V rows.
//
// Replicas (a Llama's key and value projections when its KV key-value heads are fewer than
// the p ranks, p a multiple of KV): the tensor is cut into p / replicas parts, one key-value
// head each, and part j is held whole by the `replicas` = p / KV consecutive ranks
// [j replicas, (j + 1) replicas), whose query heads all use that head.
struct TensorParallelSplit {
  int dim = -1;  // -1: replicated
  int blocks = 1;
  bool padded = false;
  int replicas = 1;
  bool replicated() const { return dim < 0; }
  bool operator==(const TensorParallelSplit&) const = default;
};

// The layers declare each parameter's split where they create it (parameter_spec.h); a
// model's table of them is in its header (gpt.h, llama.h, classifier.h). Replicated: layer
// norms, position embeddings, the row-parallel linears' biases. To count a gradient norm
// once, add replicated parameters on TP rank 0 only and split ones on every rank (a padded
// part's zero rows add nothing) that holds the first replica of its part: CountsInNorm.

// Whether TP rank `rank` adds its part of a parameter of `split` to a gradient norm, so that
// every number of the whole tensor counts once.
bool CountsInNorm(TensorParallelSplit split, int rank);

// How many consecutive TP ranks hold each key-value head of a Llama with `kv_heads` of them
// over `tp` ranks: 1 when tp divides kv_heads, tp / kv_heads when kv_heads divides tp (as
// Megatron replicates them). Throws UserError naming both numbers otherwise.
int KvReplicas(int kv_heads, int tp);

// Which rows of each block of the full tensor rank `rank` of `size` holds, for a tensor whose
// extent along split.dim is `extent`: `rows` per block, of which the first `real` are the full
// tensor's [begin, begin + real) within the block and the rest zero padding (real < rows only
// on a padded split's last ranks; ranks holding replicas of one part get the same rows).
// Throws UserError naming the numbers when the extent does not split: not a multiple of
// blocks * size / replicas, or, padded, so small that a rank would hold only padding.
// Precondition: split is not replicated, 0 <= rank < size, replicas divides size.
struct ShardRows {
  int64_t begin = 0;
  int64_t real = 0;
  int64_t rows = 0;
};
ShardRows ShardRowsOf(TensorParallelSplit split, int64_t extent, int size, int rank);

// Throws UserError unless a vocabulary of `vocab` tokens splits over `tp` ranks, padded where
// tp does not divide it (every rank holds at least one real token).
void CheckVocabularySplit(int64_t vocab, int tp);

// The vocabulary rows each of `tp` ranks holds: ceil(vocab / tp).
int64_t VocabularyRowsPerRank(int64_t vocab, int tp);

}  // namespace conveyor

#endif  // CONVEYOR_NN_TENSOR_PARALLEL_SPLIT_H_
