#include "conveyor/e2e/pipeline_testing.h"

#include <ATen/core/grad_mode.h>

#include <mutex>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
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

// Casts the hidden state to `dtype` and back: x (n, T, C) -> (n, T, C), and its gradient
// likewise (the casts' own backward).
class RoundTrip : public Layer {
 public:
  RoundTrip(int64_t hidden, at::ScalarType dtype) : hidden_(hidden), dtype_(dtype) {}
  at::Tensor Forward(const at::Tensor& x, const MicroBatch&) override {
    return x.to(dtype_).to(x.scalar_type());
  }
  NamedTensors NamedParameters() override { return {}; }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, hidden_);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, hidden_);
  }

 private:
  int64_t hidden_;
  at::ScalarType dtype_;
};

StepOutcome Finish(Collected& collected, double loss) {
  StepOutcome out;
  out.loss = loss;
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

MakeStageModule GptStages(const Layout& layout, const GptConfig& config, uint64_t seed) {
  const auto slices = PartitionEvenly(config.layers + 2, layout.pipeline_length());
  return [=](int stage) {
    const LayerList all = BuildGpt(config, seed);
    const auto [begin, end] = slices[layout.part_of(stage)];
    return std::make_unique<LayerStack>(LayerList(all.begin() + begin, all.begin() + end));
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
                         double lr, const Layout* rounded_at, at::ScalarType dtype) {
  LayerList layers = BuildGpt(config, seed);
  if (rounded_at != nullptr) {
    const auto slices = PartitionEvenly(config.layers + 2, rounded_at->pipeline_length());
    LayerList rounded;
    for (size_t part = 0; part < slices.size(); ++part) {
      const auto [begin, end] = slices[part];
      rounded.insert(rounded.end(), layers.begin() + begin, layers.begin() + end);
      if (part + 1 < slices.size())
        rounded.push_back(std::make_shared<RoundTrip>(config.hidden, dtype));
    }
    layers = rounded;
  }
  Stage stage(0, true, true, std::make_unique<LayerStack>(layers));
  Collected collected;
  double loss = 0;
  for (size_t k = 0; k < batches.size(); ++k) {
    const MicroBatch mb = SplitBatch(batches[k], 1)[0];
    stage.ResetStep();
    stage.Forward(mb, mb.inputs);
    stage.Backward(mb, at::Tensor());
    loss = stage.loss();
    collected = Collected();
    collected.Add(stage.module().NamedParameters());
    if (k + 1 < batches.size()) collected.Sgd(lr);
  }
  return Finish(collected, loss);
}

StepOutcome RunPipeline(const Program& compute_program, const GptConfig& config, uint64_t seed,
                        const std::vector<Batch>& batches, double lr, bool recompute,
                        at::ScalarType message_dtype) {
  const Program program = Lower(compute_program);
  const Layout& layout = program.layout;
  const int p = layout.num_ranks();
  const MakeStageModule make = GptStages(layout, config, seed);
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
  for (size_t k = 0; k < batches.size(); ++k) {
    const std::vector<MicroBatch> mbs = SplitBatch(batches[k], layout.num_microbatches());
    std::vector<double> losses(p, 0);
    RunRankThreads(transports, [&](int r) { losses[r] = ranks[r]->Step(mbs); });
    loss = 0;
    for (double l : losses) loss += l;
    collected = Collected();
    for (auto& rank : ranks) collected.Add(rank->NamedParameters());
    if (k + 1 < batches.size()) collected.Sgd(lr);
  }
  return Finish(collected, loss);
}

}  // namespace conveyor
