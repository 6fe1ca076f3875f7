#include "conveyor/sim/transformer_spec.h"

#include <algorithm>

namespace conveyor {

int64_t GatedMlpUnits(int64_t hidden) {
  const int64_t units = (8 * hidden + 2) / 3;  // ceil(8 hidden / 3)
  return (units + 7) / 8 * 8;
}

int64_t TransformerSpec::mlp() const {
  if (intermediate > 0) return intermediate;
  return gated_mlp ? GatedMlpUnits(hidden) : 4 * hidden;
}

bool TransformerSpec::IsSparse(int64_t block) const {
  return experts > 0 && !std::binary_search(dense_blocks.begin(), dense_blocks.end(), block);
}

int64_t TransformerSpec::SparseBlocks() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) n += IsSparse(l) ? 1 : 0;
  return n;
}

bool TransformerSpec::SplitsOver(int tp) const {
  return heads % tp == 0 && kv() % tp == 0 && mlp() % tp == 0 && (experts == 0 || tp == 1);
}

namespace {

// q, o; k, v.
double AttentionParams(const TransformerSpec& m) {
  const double c = static_cast<double>(m.hidden);
  const double head_dim = c / static_cast<double>(m.heads);
  return 2 * c * c + 2 * c * static_cast<double>(m.kv()) * head_dim;
}

}  // namespace

double TransformerSpec::ExpertParams() const {
  return static_cast<double>(experts) * 3.0 * static_cast<double>(hidden) *
         static_cast<double>(expert_mlp());
}

double TransformerSpec::BlockParams(bool sparse) const {
  const double c = static_cast<double>(hidden);
  if (!sparse)
    return AttentionParams(*this) + (gated_mlp ? 3.0 : 2.0) * c * static_cast<double>(mlp());
  const double shared = shared_units > 0 ? 3.0 * c * static_cast<double>(shared_units) + c : 0;
  return AttentionParams(*this) + c * static_cast<double>(experts) + ExpertParams() + shared;
}

double TransformerSpec::Params() const {
  double blocks = 0;
  for (int64_t l = 0; l < layers; ++l) blocks += BlockParams(IsSparse(l));
  return blocks + 2.0 * static_cast<double>(vocab) * static_cast<double>(hidden);
}

double TransformerSpec::BlockForwardFlops(bool sparse) const {
  // A token meets the k experts it is sent to of the E.
  const double met =
      sparse ? BlockParams(true) -
                   ExpertParams() * (1 - static_cast<double>(top_k) / static_cast<double>(experts))
             : BlockParams();
  return 2 * met + 4.0 * static_cast<double>(seq_len) * static_cast<double>(hidden);
}

double TransformerSpec::TrainFlopsPerToken() const {
  const double head = 2.0 * static_cast<double>(hidden) * static_cast<double>(vocab);
  double blocks = 0;
  for (int64_t l = 0; l < layers; ++l) blocks += BlockForwardFlops(IsSparse(l));
  return 3 * (blocks + head);
}

}  // namespace conveyor
