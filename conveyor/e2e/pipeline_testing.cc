#include "conveyor/e2e/pipeline_testing.h"

#include <ATen/core/grad_mode.h>

#include <functional>
#include <mutex>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/module/auxiliary_loss.h"
#include "conveyor/nn/layer.h"
#include "conveyor/partition/partition.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/runtime/stage.h"
#include "conveyor/schedule/lower.h"

namespace conveyor {
namespace {

// Sums gradients by name; keeps every copy of each parameter.
struct Collected {
  std::map<std::string, at::Tensor> grads;
  std::map<std::string, std::vector<at::Tensor>> copies;
  void Add(const NamedTensors& params) {
    for (const auto& [name, p] : params) {
      copies[name].push_back(p);
      if (!p.grad().defined()) continue;
      auto it = grads.find(name);
      if (it == grads.end()) {
        grads[name] = p.grad().clone();
      } else {
        it->second += p.grad();
      }
    }
  }
  // Applies SGD with the summed gradient to every copy; clears gradients.
  void Sgd(double lr) {
    at::NoGradGuard no_grad;
    for (auto& [name, list] : copies) {
      for (at::Tensor& p : list) {
        if (grads.count(name)) p.sub_(grads[name] * lr);
        p.mutable_grad() = at::Tensor();
      }
    }
  }
};

// A layer that keeps the hidden state's shape (n, T, C) and holds no parameters.
class HiddenStateLayer : public Layer {
 public:
  explicit HiddenStateLayer(int64_t hidden) : hidden_(hidden) {}
  NamedTensors NamedParameters() override { return {}; }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, hidden_);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, hidden_);
  }

 private:
  int64_t hidden_;
};

// Casts the hidden state to `dtype` and back, and its gradient likewise (the casts' own
// backward).
class RoundTrip : public HiddenStateLayer {
 public:
  RoundTrip(int64_t hidden, at::ScalarType dtype) : HiddenStateLayer(hidden), dtype_(dtype) {}
  at::Tensor Forward(const at::Tensor& x, const MicroBatch&) override {
    return x.to(dtype_).to(x.scalar_type());
  }

 private:
  at::ScalarType dtype_;
};

// SquareTermAt's term: x passes unchanged, with the mean over mb's counted targets of |x|^2
// attached to the loss under the name "square".
class SquareTerm : public HiddenStateLayer {
 public:
  using HiddenStateLayer::HiddenStateLayer;
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const at::Tensor counted = mb.targets.ge(0).to(x.scalar_type());  // (n, T)
    const at::Tensor term = ((x * x).sum(-1) * counted).sum() / counted.sum().clamp_min(1);
    return AttachAuxiliaryLoss(x, term, "square");
  }
};

// Adds the auxiliary losses of `stage` to `into`.
void AddAuxiliary(Stage& stage, std::map<std::string, double>& into) {
  for (const auto& [name, value] : stage.auxiliary_losses()) into[name] += value;
}

StepOutcome Finish(Collected& collected, double loss,
                   const std::map<std::string, double>& auxiliary = {}) {
  StepOutcome out;
  out.loss = loss;
  out.auxiliary = auxiliary;
  out.grads = collected.grads;
  for (const auto& [name, list] : collected.copies) out.params[name] = list.front();
  return out;
}

}  // namespace

GptConfig SmallGpt() {
  GptConfig config;
  config.vocab = 32;
  config.hidden = 8;
  config.heads = 2;
  config.layers = 6;
  config.max_seq_len = 16;
  return config;
}

Batch MakeBatch(const GptConfig& config, int n, int t, uint64_t seed) {
  at::Generator gen = LayerInitGenerator(seed, 1000);
  Batch batch;
  batch.inputs = at::randint(config.vocab, {n, t}, gen, at::kLong);
  batch.targets = at::randint(config.vocab, {n, t}, gen, at::kLong);
  batch.attention_mask = at::ones({n, t}, at::kBool);
  for (int i = 0; i < n; ++i) {
    const int64_t length = 1 + at::randint(t, {1}, gen, at::kLong).item<int64_t>();
    batch.attention_mask[i].narrow(0, length, t - length).fill_(false);
    batch.targets[i].narrow(0, length, t - length).fill_(-1);
  }
  return batch;
}

MakeStageModule GptStages(const Layout& layout, const GptConfig& config, uint64_t seed,
                          int square_after_part) {
  const auto slices = PartitionEvenly(config.layers + 2, layout.pipeline_length());
  return [=](int stage) {
    const LayerList all = BuildGpt(config, seed);
    const int part = layout.part_of(stage);
    const auto [begin, end] = slices[part];
    LayerList layers(all.begin() + begin, all.begin() + end);
    if (part == square_after_part) layers.push_back(std::make_shared<SquareTerm>(config.hidden));
    return std::make_unique<LayerStack>(layers);
  };
}

StepOutcome RunRankStep(const Program& program, int rank, Transport& transport,
                        const GptConfig& config, uint64_t seed, const Batch& batch) {
  PipelineRank pipeline(program, rank, &transport, GptStages(program.layout, config, seed),
                        at::TensorOptions().dtype(at::kFloat));
  const double loss = pipeline.Step(SplitBatch(batch, program.layout.num_microbatches()));
  Collected collected;
  collected.Add(pipeline.NamedParameters());
  return Finish(collected, loss);
}

StepOutcome RunReference(const GptConfig& config, uint64_t seed, const std::vector<Batch>& batches,
                         double lr, const Layout* rounded_at, at::ScalarType dtype,
                         const SquareTermAt& square) {
  LayerList layers = BuildGpt(config, seed);
  // The layers a part boundary of `layout` follows get `add()` after them.
  auto insert_after = [&](const Layout& layout, const std::function<bool(size_t)>& at_part,
                          const std::function<std::shared_ptr<Layer>()>& add) {
    const auto slices = PartitionEvenly(config.layers + 2, layout.pipeline_length());
    LayerList with;
    for (size_t part = 0; part < slices.size(); ++part) {
      const auto [begin, end] = slices[part];
      with.insert(with.end(), layers.begin() + begin, layers.begin() + end);
      if (at_part(part)) with.push_back(add());
    }
    layers = with;
  };
  CONVEYOR_ASSERT(square.after_part < 0 || rounded_at == nullptr)
      << "a reference with the casts or the term, not both";  // parts of the original list
  if (square.after_part >= 0) {
    insert_after(
        *square.layout, [&](size_t part) { return static_cast<int>(part) == square.after_part; },
        [&] { return std::make_shared<SquareTerm>(config.hidden); });
  }
  if (rounded_at != nullptr) {
    const size_t parts = rounded_at->pipeline_length();
    insert_after(
        *rounded_at, [&](size_t part) { return part + 1 < parts; },
        [&] { return std::make_shared<RoundTrip>(config.hidden, dtype); });
  }
  Stage stage(0, true, true, std::make_unique<LayerStack>(layers));
  Collected collected;
  double loss = 0;
  std::map<std::string, double> auxiliary;
  for (size_t k = 0; k < batches.size(); ++k) {
    const MicroBatch mb = SplitBatch(batches[k], 1)[0];
    stage.ResetStep();
    stage.Forward(mb, mb.inputs);
    stage.Backward(mb, at::Tensor());
    loss = stage.loss();
    auxiliary.clear();
    AddAuxiliary(stage, auxiliary);
    collected = Collected();
    collected.Add(stage.module().NamedParameters());
    if (k + 1 < batches.size()) collected.Sgd(lr);
  }
  return Finish(collected, loss, auxiliary);
}

StepOutcome RunPipeline(const Program& compute_program, const GptConfig& config, uint64_t seed,
                        const std::vector<Batch>& batches, double lr, bool recompute,
                        at::ScalarType message_dtype, int square_after_part) {
  const Program program = Lower(compute_program);
  const Layout& layout = program.layout;
  const int p = layout.num_ranks();
  const MakeStageModule make = GptStages(layout, config, seed, square_after_part);
  TransportOptions options;
  options.timeout = std::chrono::seconds(60);
  // As NCCL matches: by order between two ranks (and the tags must agree too).
  options.match_by_order = true;
  auto transports = LocalWorld(p, options);
  std::vector<std::unique_ptr<PipelineRank>> ranks;
  for (int r = 0; r < p; ++r) {
    ranks.push_back(std::make_unique<PipelineRank>(program, r, transports[r].get(), make,
                                                   at::TensorOptions().dtype(message_dtype)));
    for (const auto& [index, stage] : ranks.back()->stages()) {
      stage->set_recompute(recompute);
      stage->set_message_dtype(message_dtype);
    }
  }
  Collected collected;
  double loss = 0;
  std::map<std::string, double> auxiliary;
  for (size_t k = 0; k < batches.size(); ++k) {
    const std::vector<MicroBatch> mbs = SplitBatch(batches[k], layout.num_microbatches());
    std::vector<double> losses(p, 0);
    RunRankThreads(transports, [&](int r) { losses[r] = ranks[r]->Step(mbs); });
    loss = 0;
    for (double l : losses) loss += l;
    collected = Collected();
    auxiliary.clear();
    for (auto& rank : ranks) {
      collected.Add(rank->NamedParameters());
      for (const auto& [index, stage] : rank->stages()) AddAuxiliary(*stage, auxiliary);
    }
    if (k + 1 < batches.size()) collected.Sgd(lr);
  }
  return Finish(collected, loss, auxiliary);
}

}  // namespace conveyor
