#include "conveyor/nn/tensor_parallel_split.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// In a rule: the parameter's replicas are those of the key-value heads.
constexpr int kKeyValueReplicas = 0;

}  // namespace

TensorParallelSplit TensorParallelSplitOf(std::string_view name, int kv_replicas) {
  struct Rule {
    std::string_view suffix;
    TensorParallelSplit split;
  };
  static constexpr Rule kRules[] = {
      {".attn.qkv.weight", {0, 3}},
      {".attn.qkv.bias", {0, 3}},
      {".attn.proj.weight", {1, 1}},
      {".mlp.fc.weight", {0, 1}},
      {".mlp.fc.bias", {0, 1}},
      {".mlp.proj.weight", {1, 1}},
      {"embed.wte", {0, 1, true}},
      {"head.lm.weight", {0, 1, true}},
      // Llama, in Hugging Face's names.
      {".self_attn.q_proj.weight", {0, 1}},
      {".self_attn.k_proj.weight", {0, 1, false, kKeyValueReplicas}},
      {".self_attn.v_proj.weight", {0, 1, false, kKeyValueReplicas}},
      {".self_attn.o_proj.weight", {1, 1}},
      {".mlp.gate_proj.weight", {0, 1}},
      {".mlp.up_proj.weight", {0, 1}},
      {".mlp.down_proj.weight", {1, 1}},
      {"model.embed_tokens.weight", {0, 1, true}},
      {"lm_head.weight", {0, 1, true}},
  };
  for (const Rule& rule : kRules) {
    if (!EndsWith(name, rule.suffix)) continue;
    TensorParallelSplit split = rule.split;
    if (split.replicas == kKeyValueReplicas) split.replicas = kv_replicas;
    return split;
  }
  return {};
}

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
