#include "conveyor/sim/transformer_spec.h"

namespace conveyor {

int64_t GatedMlpUnits(int64_t hidden) {
  const int64_t units = (8 * hidden + 2) / 3;  // ceil(8 hidden / 3)
  return (units + 7) / 8 * 8;
}

int64_t TransformerSpec::mlp() const {
  if (intermediate > 0) return intermediate;
  return gated_mlp ? GatedMlpUnits(hidden) : 4 * hidden;
}

bool TransformerSpec::SplitsOver(int tp) const {
  return heads % tp == 0 && kv() % tp == 0 && mlp() % tp == 0;
}

double TransformerSpec::BlockParams() const {
  const double c = static_cast<double>(hidden);
  const double head_dim = c / static_cast<double>(heads);
  const double attention = 2 * c * c + 2 * c * static_cast<double>(kv()) * head_dim;  // q, o; k, v
  return attention + (gated_mlp ? 3.0 : 2.0) * c * static_cast<double>(mlp());
}

double TransformerSpec::Params() const {
  return static_cast<double>(layers) * BlockParams() +
         2.0 * static_cast<double>(vocab) * static_cast<double>(hidden);
}

double TransformerSpec::BlockForwardFlops() const {
  return 2 * BlockParams() + 4.0 * static_cast<double>(seq_len) * static_cast<double>(hidden);
}

double TransformerSpec::TrainFlopsPerToken() const {
  const double head = 2.0 * static_cast<double>(hidden) * static_cast<double>(vocab);
  return 3 * (static_cast<double>(layers) * BlockForwardFlops() + head);
}

}  // namespace conveyor
