#include "conveyor/train/layer_profile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
#include "conveyor/train/model_registry.h"
#include "conveyor/train/pipeline_gradients.h"

namespace conveyor {
namespace {

// Where the profile computes: the device, and the dtype of its products (autocast unless
// fp32), as a rank's stages compute (runtime/stage.h).
struct ProfileDevice {
  c10::Device device;
  c10::ScalarType dtype;
};

// Runs the forward passes of its scope in `on`'s dtype.
class Precision {
 public:
  explicit Precision(const ProfileDevice& on)
      : guard_(on.device.type(), on.dtype, on.dtype != at::kFloat) {}

 private:
  ComputePrecisionGuard guard_;
};

using Clock = std::chrono::steady_clock;

// Now, once the work this thread gave `device` so far has finished.
Clock::time_point Now(const c10::Device& device) {
  SynchronizeCurrentStream(device);
  return Clock::now();
}

double Since(const c10::Device& device, Clock::time_point start) {
  return std::chrono::duration<double>(Now(device) - start).count();
}

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

// Layer `index` of `model`, its weights on `device`: the whole layer, or with `tp` one rank's
// shard of it.
std::shared_ptr<Layer> LayerOn(const ModelTask& model, int index, const c10::Device& device,
                               const TensorParallel& tp = {}) {
  std::shared_ptr<Layer> layer = model.BuildLayers({tp}, {index, index + 1}).at(0);
  MoveParameters(layer->NamedParameters(), device);
  return layer;
}

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
    loss.backward();
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
    loss.backward();
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

// Forwards of `layer` on `x` without autograd, `iterations` times, then a wait for the
// device: the unit of work the capacity timings repeat. No autograd: its engine refuses to
// run in a forked child once it has started threads (a CUDA libtorch starts them).
void Work(Layer& layer, const at::Tensor& x, const MicroBatch& mb, int iterations,
          const ProfileDevice& on) {
  at::NoGradGuard no_grad;
  const Precision precision(on);
  for (int i = 0; i < iterations; ++i) (layer.Forward(x, mb) * 2).sum();
  SynchronizeCurrentStream(on.device);
}

// One double from `fd`, waiting at most a minute; false on end of file, error or timeout.
bool ReadSeconds(int fd, double* seconds) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 60000) == 1 && read(fd, seconds, sizeof(*seconds)) == sizeof(*seconds);
}

// Now on the steady clock, which every process of the machine shares, in seconds.
double ClockSeconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// The CPU's Capacity: `count` processes (forked, each with its own copy of `block`) computing
// `iterations` forwards each, as ranks run. With `ring` 0 each computes on, as ranks that keep
// a core of their own do. Ranks that outnumber the cores take turns, and a pipeline's ranks
// do so at every message, a rank that waits giving its core to another and resuming colder,
// wherever a core frees: with `ring` > 0 the processes form a ring, as a pipeline's stages
// do, each waiting for a message from the one before it, computing once and handing a message
// to the next, `ring` messages going round (one each in the steady state of a pipeline that
// keeps every rank busy; one alone where a single rank computes at a time). Each child warms
// up (its copy-on-write pages copied), says so, waits for the start, computes and writes its
// end time to a pipe. The start and the last end in `began` and `last`; false when a child
// could not be started or did not report within a minute.
bool TimeProcesses(Layer& block, const at::Tensor& x, const MicroBatch& mb, int count, int ring,
                   int iterations, const ProfileDevice& on, double* began, double* last) {
  std::vector<int> fds;  // go, times, then each child's inbox: read end, write end
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
    fds.clear();
  };
  for (int p = 0; p < 2 + count; ++p) {
    int ends[2];
    if (pipe(ends) != 0) {
      close_all();
      return false;
    }
    fds.push_back(ends[0]), fds.push_back(ends[1]);
  }
  const int go_read = fds[0], go_write = fds[1], times_read = fds[2], times_write = fds[3];
  auto inbox_read = [&fds](int c) { return fds[4 + 2 * c]; };
  auto inbox_write = [&fds](int c) { return fds[5 + 2 * c]; };
  char byte = 'm';
  for (int m = 0; m < ring; ++m) {  // spread over the ring
    if (write(inbox_write(m * count / ring), &byte, 1) != 1) {
      close_all();
      return false;
    }
  }
  std::vector<pid_t> children;
  const pid_t parent = getpid();
  for (int c = 0; c < count; ++c) {
    const pid_t pid = fork();
    if (pid == 0) {  // the child, which leaves without any cleanup
      // It dies with the profiling process, however that ends (killed too: no orphans).
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
      double seconds = -1;
      try {
        Work(block, x, mb, 1, on);
        const double ready = 0;
        bool ok = write(times_write, &ready, sizeof(ready)) == sizeof(ready) &&
                  read(go_read, &byte, 1) == 1;
        for (int i = 0; ok && i < iterations; ++i) {
          ok = ring == 0 || read(inbox_read(c), &byte, 1) == 1;
          if (ok) Work(block, x, mb, 1, on);
          ok = ok && (ring == 0 || write(inbox_write((c + 1) % count), &byte, 1) == 1);
        }
        if (ok) seconds = ClockSeconds();
      } catch (...) {
      }
      _exit(write(times_write, &seconds, sizeof(seconds)) == sizeof(seconds) ? 0 : 1);
    }
    if (pid > 0) children.push_back(pid);
  }
  double seconds = 0;
  bool ready = children.size() == static_cast<size_t>(count);
  for (size_t c = 0; ready && c < children.size(); ++c) {
    ready = ReadSeconds(times_read, &seconds) && seconds == 0;
  }
  const std::string bytes(children.size(), 'g');
  *began = *last = ClockSeconds();
  if (ready)
    ready = write(go_write, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  int reported = 0;
  while (ready && reported < count && ReadSeconds(times_read, &seconds) && seconds > 0) {
    *last = std::max(*last, seconds), ++reported;
  }
  // A child still waiting is killed: every child holds the pipes' write ends open.
  for (pid_t pid : children) {
    if (reported < count) kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  close_all();
  return reported == count;
}

// A GPU's Capacity: `ranks` busy threads, each with its own copy of the block and a stream of
// its own, as ranks as threads sharing one GPU run (train/pipeline_model.h): kernels of
// several streams overlap where one stream alone leaves the GPU idle. False when one failed.
bool TimeThreads(const ModelTask& model, int index, const at::Tensor& x, const MicroBatch& mb,
                 int ranks, int iterations, const ProfileDevice& on, double* began, double* last) {
  std::vector<std::shared_ptr<Layer>> blocks;
  for (int r = 0; r < ranks; ++r) blocks.push_back(LayerOn(model, index, on.device));
  std::mutex mutex;
  std::condition_variable changed;
  int ready = 0;
  bool go = false;
  std::vector<double> ends(ranks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      bool warm = true;
      try {
        ComputeOnOwnStream(on.device);
        Work(*blocks[r], x, mb, 1, on);
      } catch (...) {
        warm = false;
      }
      {
        std::unique_lock<std::mutex> lock(mutex);
        ++ready;
        changed.notify_all();
        changed.wait(lock, [&] { return go; });
      }
      try {
        if (warm) Work(*blocks[r], x, mb, iterations, on), ends[r] = ClockSeconds();
      } catch (...) {
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return ready == ranks; });
    *began = ClockSeconds();
    go = true;
    changed.notify_all();
  }
  for (std::thread& thread : threads) thread.join();
  *last = *std::max_element(ends.begin(), ends.end());
  return *std::min_element(ends.begin(), ends.end()) > 0;
}

// The busy counts Capacities measures for `ranks` ranks: every count up to 8, then counts
// about 1.5 times apart, and `ranks` (17 for 256 ranks, each running every rank when
// the ranks take turns); the counts between are interpolated.
std::vector<int> MeasuredBusyCounts(int ranks) {
  std::vector<int> counts;
  for (int busy = 1; busy <= ranks; busy = busy < 8 ? busy + 1 : busy * 3 / 2) {
    counts.push_back(busy);
  }
  if (counts.back() != ranks) counts.push_back(ranks);
  return counts;
}

// How many lone ranks' worth of work 1, 2, ... `ranks` of `ranks` ranks computing blocks at
// once do (entry k - 1 for k busy; MeasuredBusyCounts' counts measured, the others
// interpolated): about 0.5 s of lone work in all each time, the forwards computed times one's
// time alone over the time from the start until the last finished (the sum of each one's own
// ratio would count the last ones' lone tails as shared speed). Processes on the CPU, threads
// on a GPU; empty when they could not run.
std::vector<double> Capacities(const ModelTask& model, int index, const at::Tensor& x,
                               const MicroBatch& mb, int ranks, double forward_s,
                               const ProfileDevice& on) {
  const std::shared_ptr<Layer> block = LayerOn(model, index, on.device);
  Work(*block, x, mb, 1, on);  // warm
  const int lone = std::max(3, static_cast<int>(0.2 / std::max(forward_s, 1e-6)));
  // A forward's time alone before the ranks, between their counts and after them: the median
  // (a shared machine's speed drifts over seconds, and a neighbour's burst during one sample
  // had put 2 processes on 2 cores at 2.7 lone ranks' worth).
  auto time_alone = [&] {
    const auto start = Now(on.device);
    Work(*block, x, mb, lone, on);
    return Since(on.device, start) / lone;
  };
  std::vector<double> alone = {time_alone()};
  std::vector<double> out;
  // More ranks than cores take turns: all of them in a ring, `busy` messages going round.
  const int cores = AvailableCores();
  const bool turns = on.device.is_cpu() && ranks > cores;
  const std::vector<int> counts = MeasuredBusyCounts(ranks);
  for (int busy : counts) {
    const int processes = turns ? ranks : busy;
    const int iterations =
        std::max(3, static_cast<int>(0.5 / (processes * std::max(forward_s, 1e-6))));
    double began = 0, last = 0;
    const bool ran = on.device.is_cpu()
                         ? TimeProcesses(*block, x, mb, processes, turns ? busy : 0, iterations, on,
                                         &began, &last)
                         : TimeThreads(model, index, x, mb, busy, iterations, on, &began, &last);
    if (!ran || last <= began) return {};
    out.push_back(processes * iterations / (last - began));  // forwards a second
    alone.push_back(time_alone());
  }
  const double alone_s = Median(alone);
  std::vector<double> capacity;
  for (size_t m = 0; m < counts.size(); ++m) {
    for (int busy = m == 0 ? 1 : counts[m - 1] + 1; busy <= counts[m]; ++busy) {
      const double share =
          m == 0 ? 1 : static_cast<double>(busy - counts[m - 1]) / (counts[m] - counts[m - 1]);
      double worth = (m == 0 ? out[m] : out[m - 1] + share * (out[m] - out[m - 1])) * alone_s;
      // Single-threaded processes on the CPU do at most one lone rank's work a core.
      if (on.device.is_cpu()) worth = std::min(worth, std::min<double>(busy, cores));
      capacity.push_back(worth);
    }
  }
  return capacity;
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
    at::Tensor squares = at::zeros({}, at::TensorOptions(device).dtype(at::kDouble));
    for (const auto& [name, p] : params) squares += PipelineGradients::SumOfSquares(p.grad());
    const double norm = std::sqrt(squares.item<double>());
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
