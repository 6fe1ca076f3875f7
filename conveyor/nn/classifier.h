// A BERT / DistilBERT-style encoder classifier as a list of layers.
//
//   layer 0        embedding: layer_norm(token + position)        ids (n, T) -> (n, T, C)
//   layers 1..L    post-norm blocks, as in BERT:                   (n, T, C) -> (n, T, C)
//                    a = layer_norm(x + attention(x)), out = layer_norm(a + mlp(a))
//                  attention is bidirectional and ignores padded keys (the micro-batch's
//                  attention_mask, which every stage reads)
//   layer L + 1    head: masked mean over the real tokens -> pre (C, C) -> ReLU
//                  -> out (K, C)                                   (n, T, C) -> logits (n, K)
//
// The head's loss is the cross-entropy summed over targets of shape (n,), class ids in
// [0, K), -1 = not counted. Its output is the logits, so predictions are
// `logits.argmax(-1)` (see CountCorrect). Mean pooling needs no [CLS] token; padded positions
// never reach a real token's output, so appending padding leaves the logits unchanged.
// Every linear map defers its weight gradient (Linear).
//
// Tensor parallelism (config.tp, tensor_parallel.h) over p ranks: the blocks are split as the
// GPT's (attention by heads, MLP by hidden units; each rank builds the full initial weights
// and keeps its shard). The embedding and the head stay replicated: the vocabulary and the
// classes are small, so every rank computes them whole (same inputs, same results). Shapes
// between layers, the logits (n, K) and the loss are those of the unsharded model on every
// rank; forward and backward are collectives over config.tp.group.
#ifndef CONVEYOR_NN_CLASSIFIER_H_
#define CONVEYOR_NN_CLASSIFIER_H_

#include <cstdint>

#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

struct ClassifierConfig {
  int vocab = 256;                   // token ids in [0, vocab)
  int hidden = 64;                   // C
  int heads = 4;                     // C must be a multiple
  int layers = 4;                    // encoder blocks (L)
  int max_seq_len = 128;             // T at most
  int classes = 2;                   // K
  bool recompute_attention = false;  // selective recomputation of the attention scores
  TensorParallel tp;                 // p = tp.size must divide heads
};

// Checks the config (UserError naming the bad value), tp included (CheckTensorParallel).
void CheckClassifierConfig(const ClassifierConfig& config);

// The model's layers + 2 layers: the embedding (global index 0), the blocks, the head. Only
// those with a global index in [begin, end) are built (end < 0: through the last), each as it
// is in the whole model; precondition 0 <= begin <= end.
LayerList BuildClassifier(const ClassifierConfig& config, uint64_t seed, int begin = 0,
                          int end = -1);

// For accuracy: how many counted targets (>= 0) of `targets` (n,) equal the argmax of
// `logits` (n, K), the head's output.
int64_t CountCorrect(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace conveyor

#endif  // CONVEYOR_NN_CLASSIFIER_H_
