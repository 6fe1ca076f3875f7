#include "conveyor/train/layer_profile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/common/statistics.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/device/stream_order.h"
#include "conveyor/module/weight_grad_store.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/nn/tensor_parallel_split.h"
#include "conveyor/optim/optimizer.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/profile/tensor_bytes.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/device_capacity.h"
#include "conveyor/train/model_registry.h"
#include "conveyor/train/pipeline_gradients.h"
#include "conveyor/train/profile_device.h"

namespace conveyor {
namespace {

// The group of a tensor-parallel shard timed alone: it says it is rank 0 of `size` and skips
// the collectives (an all-reduce leaves the partial sum, a gather repeats this rank's part),
// so that a shard's own compute is timed; what its collectives cost is the link's. Anything
// else is an InternalError.
class LoneShardGroup : public Transport {
 public:
  explicit LoneShardGroup(int size) : size_(size) {}
  int rank() const override { return 0; }
  int world_size() const override { return size_; }
  void AllReduceSum(std::vector<at::Tensor>&) override {}
  std::vector<at::Tensor> AllGather(const at::Tensor& local) override {
    return std::vector<at::Tensor>(size_, local.contiguous().clone());
  }
  std::shared_ptr<Work> Send(at::Tensor, int, std::uint32_t) override { return Refuse("Send"); }
  std::shared_ptr<Work> Recv(at::Tensor, int, std::uint32_t) override { return Refuse("Recv"); }
  at::Tensor ReduceScatterSum(const at::Tensor&, const std::vector<int64_t>&) override {
    Refuse("ReduceScatterSum");
    return {};
  }
  at::Tensor AllToAll(const at::Tensor&, const std::vector<int64_t>&,
                      const std::vector<int64_t>&) override {
    Refuse("AllToAll");
    return {};
  }
  void Broadcast(at::Tensor&, int) override { Refuse("Broadcast"); }
  void Barrier() override { Refuse("Barrier"); }
  std::unique_ptr<Transport> NewGroup(const std::vector<int>&) override {
    Refuse("NewGroup");
    return nullptr;
  }
  void ReportFailure(const std::string&) noexcept override {}

 private:
  std::shared_ptr<Work> Refuse(const char* what) {
    CONVEYOR_ASSERT(false) << "a tensor-parallel shard timed alone called " << what;
    return nullptr;
  }
  int size_;
};

// Layer `index` of `model` (with `tp`, one rank's shard of it) timed on `x` (tokens for the
// embedding, else (n, T, C)); `out` receives its output, detached, for the next layer. The backward
// is split as the runtime splits it (runtime/stage.h): autograd with the weight-gradient store
// deferring is I, the store's queued work is W; a backward without deferring, on the graph built
// again, is B. The weights' gradients stay from the unmeasured first round on, as a step's do after
// its first micro-batch: later backwards add into them.
LayerSample TimeLayer(const ModelTask& model, int index, const at::Tensor& x, const MicroBatch& mb,
                      int rounds, const ProfileDevice& on, at::Tensor* out,
                      const TensorParallel& tp = {}) {
  const c10::Device& device = on.device;
  const std::shared_ptr<Layer> layer = LayerOn(model, index, device, tp);
  // The forward and the loss: the head's own; a sum of squares for the others (any scalar
  // that uses the output).
  auto forward = [&](const at::Tensor& in, at::Tensor* y) {
    const Precision precision(on);
    *y = layer->Forward(in, mb);
    return layer->has_loss() ? layer->LossSum(*y, mb) : (*y * *y).sum();
  };
  const bool takes_grad = x.is_floating_point();
  std::vector<double> forwards, inputs, weights, wholes, infers;
  LayerSample sample;
  WeightGradStore store;
  for (int round = 0; round <= rounds; ++round) {
    const at::Tensor in = takes_grad ? x.detach().requires_grad_(true) : x;
    auto start = Now(device);
    const int64_t held_before = TensorBytes(device);
    ResetTensorPeak(device);
    at::Tensor y, loss;
    {
      WeightGradStore::Recording recording(&store, round);
      loss = forward(in, &y);
    }
    const double forward_s = Since(device, start);
    const double held = static_cast<double>(TensorBytes(device) - held_before);
    const double forward_peak = static_cast<double>(PeakTensorBytes(device) - TensorBytes(device));
    ResetTensorPeak(device);
    const int64_t before_backward = TensorBytes(device);
    store.SetDeferring(round, true);
    start = Now(device);
    // A layer of frozen weights alone on token ids (LoRA's embedding) has no backward.
    const bool trains = loss.requires_grad();
    if (trains) loss.backward();
    const double input = Since(device, start);
    store.SetDeferring(round, false);
    const int64_t before_weight = TensorBytes(device);
    start = Now(device);
    store.Run(round);
    const double weight = Since(device, start);
    const double for_weight = static_cast<double>(before_weight - TensorBytes(device));
    const double backward = static_cast<double>(PeakTensorBytes(device) - before_backward);
    *out = y.detach();
    // The whole backward at once, on the graph again (what B runs).
    loss = forward(in, &y);
    start = Now(device);
    if (trains) loss.backward();
    const double whole = Since(device, start);
    if (round == 0) continue;  // warm-up: first-call allocations and caches
    forwards.push_back(forward_s);
    inputs.push_back(input);
    weights.push_back(weight);
    wholes.push_back(whole);
    sample.activation_bytes = std::max(sample.activation_bytes, held);
    sample.backward_bytes = std::max(sample.backward_bytes, backward);
    sample.weight_bytes = std::max(sample.weight_bytes, for_weight);
    sample.forward_bytes = std::max(sample.forward_bytes, forward_peak);
    {  // A forward that keeps nothing (no autograd).
      at::NoGradGuard no_grad;
      start = Now(device);
      const int64_t before = TensorBytes(device);
      ResetTensorPeak(device);
      at::Tensor unused;
      forward(in, &unused);
      infers.push_back(Since(device, start));
      sample.infer_bytes =
          std::max(sample.infer_bytes, static_cast<double>(PeakTensorBytes(device) - before));
    }
  }
  sample.forward_s = Median(forwards);
  sample.input_s = Median(inputs);
  sample.weight_s = Median(weights);
  sample.backward_s = Median(wholes);
  sample.infer_s = Median(infers);
  return sample;
}

// The blocks of the chained stage (ChainSeconds): a model's worth of weights, which moves
// through the caches as a run's does (a block timed alone keeps its own in them), up to 8
// blocks, fewer where they would take more than an eighth of the memory at 16 bytes a
// parameter.
int ChainBlocks(int blocks, double block_params) {
  int n = std::min(8, blocks);
  while (n > 1 && 16 * n * block_params > PhysicalMemoryBytes() / 8) --n;
  return n;
}

// The median of `rounds` (after one unmeasured) forwards and backwards through the
// embedding, `blocks` blocks and the head chained as one stage: what the layers cost
// together, against the sum of their lone timings.
double ChainSeconds(const ModelTask& model, int blocks, const at::Tensor& tokens,
                    const MicroBatch& mb, int rounds, const ProfileDevice& on) {
  const int head = model.num_layers() - 1;
  std::vector<std::shared_ptr<Layer>> layers;
  for (int l = 0; l <= blocks; ++l) layers.push_back(LayerOn(model, l, on.device));
  layers.push_back(LayerOn(model, head, on.device));
  std::vector<double> times;
  for (int round = 0; round <= rounds; ++round) {
    const auto start = Now(on.device);
    at::Tensor loss;
    {
      const Precision precision(on);
      at::Tensor y = tokens;
      for (const auto& layer : layers) y = layer->Forward(y, mb);
      loss = layers.back()->LossSum(y, mb);
    }
    loss.backward();
    if (round > 0) times.push_back(Since(on.device, start));
  }
  return Median(times);
}

// The trainer's work after the pipeline (train/trainer.h), per parameter: the gradients'
// squared norm, their scaling by the clip, and AdamW's step; the median of 5 rounds (after
// the one that allocates the moments), over copies of layer `index` up to kStepEndParams or
// the model's blocks, so that the state streams from memory as a rank's does. `bytes`: the
// most AdamW's step allocates beyond the state it keeps (one tensor's temporaries at a time,
// the same for any number of copies), per parameter of one copy.
struct OptimizerCost {
  double seconds = 0;
  double bytes = 0;
};
constexpr double kStepEndParams = 16e6;
OptimizerCost TimeOptimizer(const ModelTask& model, int index, int blocks,
                            const c10::Device& device) {
  NamedTensors params;
  double count = 0;
  int copies = 0;
  for (; copies < blocks && (copies == 0 || count < kStepEndParams); ++copies) {
    for (auto& [name, p] : LayerOn(model, index, device)->NamedParameters()) {
      p.mutable_grad() = at::ones_like(p);
      count += static_cast<double>(p.numel());
      params.emplace_back(std::to_string(copies) + "." + name, p);
    }
  }
  AdamW adamw(AdamWOptions{});
  adamw.Step(params, 1e-3, 1);  // the moments allocated
  double most = 0;
  std::vector<double> times;
  for (int round = 0; round < 5; ++round) {
    const auto start = Now(device);
    std::vector<at::Tensor> grads;
    for (const auto& [name, p] : params) grads.push_back(p.grad());
    const double norm = std::sqrt(PipelineGradients::SumOfSquares(grads));
    PipelineGradients::Scale(params, 1 / std::max(norm, 1.0));
    const int64_t before = TensorBytes(device);
    ResetTensorPeak(device);
    adamw.Step(params, 1e-3, round + 2);
    most = std::max(most, static_cast<double>(PeakTensorBytes(device) - before));
    times.push_back(Since(device, start));
  }
  return {Median(times) / count, most / std::max(count / copies, 1.0)};
}

}  // namespace

LayerCostTable ProfileLayerKinds(const TrainConfig& config, const std::vector<int64_t>& sequences,
                                 int rounds, int ranks) {
  CONVEYOR_CHECK(IsLanguageModel(config.model.kind))
      << "conveyor profile times a gpt or llama, not a " << ModelKindName(config.model.kind);
  bool ascending = sequences.size() >= 2 && sequences[0] >= 1;
  for (size_t k = 1; k < sequences.size(); ++k) ascending &= sequences[k - 1] < sequences[k];
  CONVEYOR_CHECK(ascending) << "the micro-batch sizes timed must be two or more, ascending from "
                            << "1 or more (" << sequences.size() << " given, the first "
                            << (sequences.empty() ? 0 : sequences[0]) << ")";
  CONVEYOR_CHECK(rounds >= 1) << "--rounds " << rounds << " must be >= 1";
  MemoryTracker::Install();
  const ProfileDevice on{ComputeDevice(config.device, 0, 0), ScalarTypeOf(config.dtype)};
  TrainConfig selective_config = config;
  selective_config.recompute = Recompute::kSelective;
  TrainConfig plain_config = config;
  plain_config.recompute = Recompute::kNone;
  const std::shared_ptr<const ModelTask> plain = MakeModelTask(plain_config);
  const std::shared_ptr<const ModelTask> selective = MakeModelTask(selective_config);
  const int head = plain->num_layers() - 1;
  const std::vector<ParameterShapes> shapes = plain->LayerShapes();
  LayerCostTable table;
  table.model = ModelSizes(config.model);
  table.sequences = sequences;
  table.threads = at::get_num_threads();
  table.device = on.device.is_cpu() ? "cpu" : "cuda";
  // A stage's input and output cross in the dtype of its products (runtime/stage.h).
  table.element_bytes = static_cast<double>(c10::elementSize(on.dtype));
  // The layers timed as the block kinds: the first dense block (the first block where there
  // is none) and the first sparse one (none in a dense model).
  const TransformerSpec& m = table.model;
  int dense = 1, sparse = 0;
  for (int l = m.layers - 1; l >= 0; --l) (m.IsSparse(l) ? sparse : dense) = l + 1;
  table.embedding.params = static_cast<double>(CountParameters({shapes.at(0)}));
  table.block.params = static_cast<double>(CountParameters({shapes.at(dense)}));
  table.block_selective.params = table.block.params;
  table.head.params = static_cast<double>(CountParameters({shapes.at(head)}));
  if (sparse > 0) {
    table.sparse_block.params = static_cast<double>(CountParameters({shapes.at(sparse)}));
    table.sparse_block_selective.params = table.sparse_block.params;
  }
  auto work = [](const LayerSample& l) { return l.forward_s + l.backward_s; };
  const int blocks = ChainBlocks(head - 1, std::max(table.block.params, table.sparse_block.params));
  const size_t sizes = sequences.size();
  table.calibration.assign(sizes, 1);
  table.cores = AvailableCores();
  // A GPU: ranks as threads sharing it (one rank unless told); the CPU: one a core.
  table.capacity_ranks = ranks > 0 ? ranks : on.device.is_cpu() ? table.cores : 1;
  table.capacity.assign(sizes, {});
  for (MeasuredLayer MeasuredKinds::*kind : kMeasuredKinds) {
    if (sparse > 0 ||
        kind != &MeasuredKinds::sparse_block && kind != &MeasuredKinds::sparse_block_selective) {
      (table.*kind).at.resize(sizes);
    }
  }
  // The tensor-parallel sizes a plan for capacity_ranks ranks may choose (each dividing the
  // ranks and splitting a block), on the CPU (ranks as threads sharing a GPU run tp 1:
  // ShareOneGpu).
  std::map<int, std::unique_ptr<LoneShardGroup>> shard_groups;
  for (int tp = 2; on.device.is_cpu() && tp <= table.capacity_ranks; ++tp) {
    if (table.capacity_ranks % tp == 0 && table.model.SplitsOver(tp)) {
      shard_groups[tp] = std::make_unique<LoneShardGroup>(tp);
      MeasuredKinds& shard = table.tp_shards[tp];
      for (MeasuredLayer MeasuredKinds::*kind : kMeasuredKinds) {  // dense (SplitsOver)
        (shard.*kind).params = (table.*kind).params / tp;
        (shard.*kind).at.resize((table.*kind).at.size());
      }
    }
  }
  for (size_t k = 0; k < sizes; ++k) {
    Batch batch;
    batch.inputs =
        at::randint(0, ModelSizes(config.model).vocab, {sequences[k], config.model.seq_len},
                    at::TensorOptions().dtype(at::kLong));
    batch.targets = batch.inputs;
    batch = ToDevice(batch, on.device);
    const MicroBatch mb = SplitBatch(batch, 1)[0];
    at::Tensor x, unused;
    table.embedding.at[k] = TimeLayer(*plain, 0, batch.inputs, mb, rounds, on, &x);
    at::Tensor hidden;
    if (sparse > 0) {
      table.sparse_block.at[k] = TimeLayer(*plain, sparse, x, mb, rounds, on, &hidden);
      table.sparse_block_selective.at[k] =
          TimeLayer(*selective, sparse, x, mb, rounds, on, &unused);
    }
    if (dense == sparse) {  // no dense block
      table.block.at[k] = table.sparse_block.at[k];
      table.block_selective.at[k] = table.sparse_block_selective.at[k];
    } else {
      table.block.at[k] = TimeLayer(*plain, dense, x, mb, rounds, on, &hidden);
      table.block_selective.at[k] = TimeLayer(*selective, dense, x, mb, rounds, on, &unused);
    }
    table.head.at[k] = TimeLayer(*plain, head, hidden, mb, rounds, on, &unused);
    for (const auto& [tp, group] : shard_groups) {
      const TensorParallel parallel{tp, 0, group.get(),
                                    KvReplicas(static_cast<int>(table.model.kv()), tp)};
      MeasuredKinds& shard = table.tp_shards[tp];
      shard.embedding.at[k] = TimeLayer(*plain, 0, batch.inputs, mb, rounds, on, &unused, parallel);
      shard.block.at[k] = TimeLayer(*plain, dense, x, mb, rounds, on, &unused, parallel);
      shard.block_selective.at[k] =
          TimeLayer(*selective, dense, x, mb, rounds, on, &unused, parallel);
      shard.head.at[k] = TimeLayer(*plain, head, hidden, mb, rounds, on, &unused, parallel);
    }
    std::vector<double>& capacity = table.capacity[k];
    if (!on.device.is_cpu() && table.capacity_ranks == 1) {
      capacity = {1};
    } else if (on.device.is_cpu() && table.threads > 1) {
      for (int busy = 1; busy <= table.capacity_ranks; ++busy) {
        capacity.push_back(
            std::min<double>(busy, static_cast<double>(table.cores) / table.threads));
      }
    } else {
      capacity =
          Capacities(*plain, 1, x, mb, table.capacity_ranks, table.block.at[k].forward_s, on);
    }
    CONVEYOR_CHECK(!capacity.empty())
        << "the profile could not run " << table.capacity_ranks << " ranks' work at once on "
        << on.device.str() << " to measure its capacity ("
        << (on.device.is_cpu() ? "fork failed" : "a thread failed") << ")";
    // The chain against the sum of its layers' lone timings, at this size.
    double sum = work(table.embedding.at[k]) + work(table.head.at[k]);
    for (int l = 0; l < blocks; ++l) {
      sum += work((m.IsSparse(l) ? table.sparse_block : table.block).at[k]);
    }
    const double factor = ChainSeconds(*plain, blocks, batch.inputs, mb, rounds + 2, on) / sum;
    table.calibration[k] = factor;
    std::vector<MeasuredKinds*> scaled = {&table};
    for (auto& [tp, shard] : table.tp_shards) scaled.push_back(&shard);
    for (MeasuredKinds* kinds : scaled) {
      for (MeasuredLayer MeasuredKinds::*kind : kMeasuredKinds) {
        if ((kinds->*kind).at.empty()) continue;  // a dense model's sparse kinds
        LayerSample& sample = (kinds->*kind).at[k];
        sample.forward_s *= factor;
        sample.input_s *= factor;
        sample.weight_s *= factor;
        sample.backward_s *= factor;
        sample.infer_s *= factor;
      }
    }
  }
  const OptimizerCost optimizer = TimeOptimizer(*plain, 1, config.model.layers, on.device);
  table.optimizer_s = optimizer.seconds;
  table.optimizer_bytes = optimizer.bytes;
  return table;
}

}  // namespace conveyor
