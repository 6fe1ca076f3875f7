#include "conveyor/sim/layer_cost_model.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace conveyor {

namespace {

// `s` with its times and bytes times `by`.
LayerSample Scaled(LayerSample s, double by) {
  s.forward_s *= by, s.input_s *= by, s.weight_s *= by, s.backward_s *= by, s.infer_s *= by;
  s.activation_bytes *= by, s.backward_bytes *= by, s.weight_bytes *= by, s.forward_bytes *= by;
  s.infer_bytes *= by;
  return s;
}

}  // namespace

LayerCostEstimate EstimateLayerCosts(const TransformerSpec& model, const LayerCostTable* measured,
                                     double flop_rate, const LayerCostLayout& layout) {
  const int tp = layout.tp, cp = layout.cp;
  const int64_t b = layout.sequences;
  const Recompute recompute = layout.recompute;
  const bool sequence_parallel = layout.sequence_parallel;
  // What stays whole on every TP rank without sequence parallelism is split with it.
  const double split = sequence_parallel ? tp : 1;
  const TransformerSpec& m = model;
  // Under context parallelism a rank computes and holds what b / cp sequences take.
  const double sequences = static_cast<double>(b) / cp;
  const double c = static_cast<double>(m.hidden), t = static_cast<double>(m.seq_len),
               v = static_cast<double>(m.vocab), bt = sequences * t;
  LayerSample embedding, block, head, sparse;
  double element_bytes = 2;
  if (measured != nullptr) {
    const LayerCostTable& table = *measured;
    const double n = sequences;
    // A shard as measured, else the whole layer's 1 / tp.
    const auto shard = table.tp_shards.find(tp);
    const bool as_measured = tp == 1 || shard != table.tp_shards.end();
    const MeasuredKinds& kinds = shard != table.tp_shards.end() ? shard->second : table;
    const double by = as_measured ? 1.0 : 1.0 / tp;
    embedding = Scaled(table.At(kinds.embedding, n), by);
    if (!as_measured) embedding.activation_bytes *= tp;  // its output is whole on every TP rank
    embedding.activation_bytes /= split;
    // A block kind under `recompute`.
    auto kind = [&](const MeasuredLayer& plain, const MeasuredLayer& selective) {
      const LayerSample p = Scaled(table.At(plain, n), by);
      if (recompute != Recompute::kSelective) return p;
      // Never faster than keeping the scores: timing noise.
      const LayerSample s = Scaled(table.At(selective, n), by);
      return LayerSample{std::max(s.forward_s, p.forward_s),
                         std::max(s.input_s, p.input_s),
                         std::max(s.weight_s, p.weight_s),
                         s.activation_bytes,
                         s.backward_bytes,
                         std::max(s.backward_s, p.backward_s),
                         s.weight_bytes,
                         s.forward_bytes,
                         s.infer_bytes,
                         std::max(s.infer_s, p.infer_s)};
    };
    block = kind(kinds.block, kinds.block_selective);
    // Experts only at tp 1 (SplitsOver): measured whole.
    if (m.experts > 0) sparse = kind(table.sparse_block, table.sparse_block_selective);
    if (sequence_parallel && as_measured) {
      // Every part of the whole block's over tp (Korthikanti et al.), the shard's replicated
      // norms and residuals among them.
      const LayerSample whole = kind(table.block, table.block_selective);
      block.activation_bytes = whole.activation_bytes / tp;
      block.weight_bytes = whole.weight_bytes / tp;
    } else if (!sequence_parallel && !as_measured) {
      // Of a block's activations, 10 of 34 parts (the norms' and residuals' (b, T, C)) stay
      // whole under TP, 24 are split (Korthikanti et al.); of what W needs (the linear
      // layers' inputs and output gradients), 8 of 32.
      block.activation_bytes *= tp * (10 + 24.0 / tp) / 34;
      block.weight_bytes *= tp * (8 + 24.0 / tp) / 32;
    }
    head = Scaled(table.At(kinds.head, n), by);  // vocabulary-parallel: logits split
    element_bytes = table.element_bytes;
  } else {
    const double rate = flop_rate * tp;
    const double f = bt * m.BlockForwardFlops() / rate, h = bt * 2 * c * v / rate;
    const double held = sequence_parallel ? bt * c * 34 / tp : bt * c * (10 + 24.0 / tp);
    const double for_w = sequence_parallel ? bt * c * 32 / tp : bt * c * (8 + 24.0 / tp);
    // W's share: the four linear layers' inputs (2 + 2 + 2 + 8) and output gradients
    // (6 + 2 + 8 + 2), in bf16 per token and C, split as above.
    // Without autograd, a block holds at most its MLP's (b, T, 4C) twice; the head its logits
    // and their softmax.
    block = {f, f, f, held, held, 2 * f, for_w, 0, bt * c * 16 / tp};
    head = {h, h, h, bt * v * 4, bt * v * 4, 2 * h, bt * v * 4, 0, 2 * bt * v * 4};
    if (m.experts > 0) {  // tp 1
      const double k = static_cast<double>(m.top_k), e = static_cast<double>(m.experts);
      const double units = k * static_cast<double>(m.expert_mlp()) +
                           static_cast<double>(m.shared_units) - static_cast<double>(m.mlp());
      const double more = bt * (4 * units + 2 * c * (k - 1) + 8 * e);
      const double fs = bt * m.BlockForwardFlops(true) / rate;
      sparse = {fs,
                fs,
                fs,
                held + more,
                held + more,
                2 * fs,
                block.weight_bytes + more,
                0,
                block.infer_bytes + more};
    }
  }
  LayerCostEstimate costs;
  const double input = bt * c * element_bytes / split;  // a stage's input
  for (int64_t l = 0; l < m.layers + 2; ++l) {
    const bool first = l == 0, last = l == m.layers + 1;
    const bool experts = !first && !last && m.IsSparse(l - 1);
    LayerSample s = first ? embedding : last ? head : experts ? sparse : block;
    if (s.backward_s <= 0) s.backward_s = s.input_s + s.weight_s;
    if (recompute ==
        Recompute::kFull) {  // F keeps nothing; the backward runs the forward again first
      s.input_s += s.forward_s, s.backward_s += s.forward_s;
      if (s.infer_s > 0) s.forward_s = s.infer_s;
    }
    costs.layers.push_back(s);
    costs.params.push_back((first || last ? v * c : m.BlockParams(experts)) / tp);
    costs.expert_params.push_back(experts ? m.ExpertParams() : 0);
    costs.input_bytes.push_back(first ? 0 : input);
  }
  return costs;
}

}  // namespace conveyor
