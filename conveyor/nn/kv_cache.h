// The keys and values an attention layer keeps while a sequence is generated, so that each
// new token costs one position's work instead of the whole window's.
//
// A forward of micro-batch mb with mb.cache_position = p >= 0 carries the tokens at
// positions [p, p + T): at p = 0 (the prefill) the cache of mb.index starts afresh with
// them; after it, one token at a time (T = 1) whose keys and values are appended, and the
// new query attends to every cached key (no mask needed: they all precede it). A forward
// with cache_position = -1 (training, evaluation) uses no cache and drops what it holds.
//
// One KvCache per attention layer; not thread-safe (a layer runs on its rank's thread).
#ifndef CONVEYOR_NN_KV_CACHE_H_
#define CONVEYOR_NN_KV_CACHE_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <utility>

#include "conveyor/module/microbatch.h"

namespace conveyor {

class KvCache {
 public:
  // k, v (n, KV, T, d) of mb's tokens -> the keys and values they attend to: k, v
  // themselves without a cache, else every cached position's, (n, KV, p + T, d). Throws
  // UserError when a cached step is not one token following exactly the p cached ones.
  std::pair<at::Tensor, at::Tensor> Extend(const MicroBatch& mb, const at::Tensor& k,
                                           const at::Tensor& v);

  // Whether the queries of mb need the causal mask: yes, except for one cached new token.
  static bool Causal(const MicroBatch& mb) { return mb.cache_position <= 0; }

  // The position of mb's first token: cache_position, 0 without a cache.
  static int64_t FirstPosition(const MicroBatch& mb) {
    return mb.cache_position < 0 ? 0 : mb.cache_position;
  }

 private:
  std::map<int, std::pair<at::Tensor, at::Tensor>> entries_;  // by micro-batch index
};

}  // namespace conveyor

#endif  // CONVEYOR_NN_KV_CACHE_H_
