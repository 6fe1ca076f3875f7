#include "conveyor/train/trainer.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string_view>

#include "conveyor/comm/hop_latency.h"
#include "conveyor/data/corpus.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/schedule/builders/forward_only.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/sim/simulator.h"
#include "conveyor/train/tasks.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// Which ranks hold each parameter name, from the layers and the partition alone.
std::map<std::string, std::vector<int>> Holders(const Layout& layout, const nn::LayerList& layers,
                                                const std::vector<LayerRange>& partition) {
  std::map<std::string, std::vector<int>> holders;
  for (int s = 0; s < layout.num_stages(); ++s) {
    const LayerRange& range = partition[layout.chunk_of(s)];
    for (int l = range.begin; l < range.end; ++l) {
      for (const auto& [name, p] : layers[l]->NamedParameters()) {
        holders[name].push_back(layout.rank_of(s));
      }
    }
  }
  return holders;
}

Layout SameLayoutWith(const Layout& layout, int microbatches) {
  switch (layout.placement()) {
    case Placement::kLoop:
      return Layout::Loop(layout.num_ranks(), layout.stages_per_rank(), microbatches);
    case Placement::kV:
      return Layout::V(layout.num_ranks(), microbatches);
    case Placement::kDual:
      return Layout::Dual(layout.num_ranks(), microbatches);
    case Placement::kCustom:
      break;
  }
  return Layout::Custom(layout.num_ranks(), layout.stage_to_rank(), microbatches,
                        layout.directions());
}

// Throws UserError unless `dir` is a folder in which this process can create a file (a
// probe file, removed at once): permissions, read-only mounts and /proc all say no.
void CheckFolderTakesFiles(const fs::path& dir, std::string_view flag, const std::string& path) {
  std::error_code error;
  CONVEYOR_CHECK(fs::is_directory(dir, error))
      << flag << " '" << path << "': '" << dir.string() << "' is not a folder";
  std::string probe = (dir / ".conveyor-write-check.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  CONVEYOR_CHECK(fd >= 0) << flag << " '" << path << "': cannot create files in '" << dir.string()
                          << "': " << std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

// The folder `path` (created by the run when missing) or its nearest existing parent
// takes new files.
void CheckFolderCanBeWritten(const std::string& path, std::string_view flag) {
  fs::path dir = fs::absolute(path).lexically_normal();
  std::error_code error;
  while (!fs::exists(dir, error) && dir.has_relative_path()) dir = dir.parent_path();
  CheckFolderTakesFiles(dir, flag, path);
}

// The file `path` can be written: a device or FIFO that is writable, or a regular or new
// file in an existing folder that takes new files (the file is replaced atomically).
void CheckFileCanBeWritten(const std::string& path, std::string_view flag) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  CONVEYOR_CHECK(!fs::is_directory(status)) << flag << " '" << path << "' is a folder";
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    CONVEYOR_CHECK(::access(path.c_str(), W_OK) == 0)
        << flag << " '" << path << "' cannot be written: " << std::strerror(errno);
    return;
  }
  const fs::path dir = fs::absolute(path).parent_path();
  CONVEYOR_CHECK(fs::is_directory(dir, error))
      << flag << " '" << path << "': the folder '" << dir.string() << "' does not exist";
  CheckFolderTakesFiles(dir, flag, path);
}

}  // namespace

void PreflightFiles(const TrainConfig& config) {
  MakeTask(config);
  if (!config.metrics.empty()) CheckFileCanBeWritten(config.metrics, "--metrics");
  if (!config.trace.empty()) CheckFolderCanBeWritten(config.trace, "--trace");
  if (!config.checkpoint_dir.empty()) {
    CheckFolderCanBeWritten(config.checkpoint_dir, "--checkpoint-dir");
  }
}

void PreflightCheck(const TrainConfig& config) {
  config.Validate();
  const Program program = BuildSchedule(
      config.schedule, ScheduleOptions{config.pp, config.microbatches, config.chunks});
  VerifyOrThrow(program);
  // The models are an embedding, `layers` blocks and a head.
  PartitionEvenly(config.layers + 2, program.layout.pipeline_length());
  const std::string path = config.data == "fortunes" ? data::kFortunesDir : config.data;
  CONVEYOR_CHECK(std::filesystem::exists(path))
      << "corpus '" << path << "' does not exist"
      << (config.data == "fortunes" ? " (apt-get install fortunes)" : "");
}

std::vector<double> ProfileLayers(const TrainTask& task, const nn::LayerList& layers,
                                  int microbatches) {
  const MicroBatch mb = SplitBatch(task.TrainBatch(0), microbatches)[0];
  std::vector<double> seconds(layers.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < 3; ++round) {  // the fastest of three: less noise
    at::Tensor x = mb.inputs;
    for (size_t l = 0; l < layers.size(); ++l) {
      const at::Tensor in = l == 0 ? x : x.detach().requires_grad_(true);
      const auto start = std::chrono::steady_clock::now();
      at::Tensor out = layers[l]->Forward(in, mb);
      at::Tensor loss = layers[l]->has_loss() ? layers[l]->LossSum(out, mb) : out.sum();
      loss.backward();
      seconds[l] =
          std::min(seconds[l],
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      x = out.detach();
    }
  }
  for (const auto& layer : layers) {
    for (const auto& [name, p] : layer->NamedParameters()) p.mutable_grad() = at::Tensor();
  }
  return seconds;
}

std::vector<double> LayerCosts(const TrainConfig& config, const TrainTask& task,
                               const nn::LayerList& layers) {
  if (config.partition == "flops") return task.LayerFlops();
  if (config.partition == "profile") return ProfileLayers(task, layers, config.microbatches);
  std::vector<double> costs;
  for (const auto& layer : layers) {
    double params = 0;
    for (const auto& [name, p] : layer->NamedParameters()) params += static_cast<double>(p.numel());
    costs.push_back(config.partition == "uniform" ? 1.0 : params);
  }
  return costs;
}

Trainer::Trainer(const TrainConfig& config, std::shared_ptr<const TrainTask> task, Transport* world)
    : config_(config),
      task_(std::move(task)),
      world_(world),
      rank_(world != nullptr ? world->rank() : 0),
      program_(BuildSchedule(config.schedule,
                             ScheduleOptions{config.pp, config.microbatches, config.chunks})),
      optimizer_(AdamWOptions{.weight_decay = config.weight_decay}),
      schedule_{config.lr, config.min_lr_ratio, config.warmup_steps, config.steps} {
  config_.Validate();
  MemoryTracker::Install();
  CONVEYOR_CHECK((world == nullptr && config.pp == 1) ||
                 (world != nullptr && world->world_size() == config.pp))
      << "pp " << config.pp << " needs " << config.pp << " ranks, the run has "
      << (world != nullptr ? world->world_size() : 1);
  VerifyOrThrow(program_);
  program_ = Lower(program_);
  const Layout& layout = program_.layout;
  const nn::LayerList layers = task_->BuildLayers();
  std::vector<double> costs = LayerCosts(config_, *task_, layers);
  if (config_.partition == "profile" && world != nullptr && world->world_size() > 1) {
    // Timings differ between ranks: every rank must cut at the same places.
    const at::Tensor sum = SumOverRanks(at::tensor(costs, at::kDouble));
    for (size_t l = 0; l < costs.size(); ++l) {
      costs[l] = sum[l].item<double>() / world->world_size();
    }
  }
  partition_ = Partition(costs, layout.pipeline_length());
  auto task_ref = task_;
  auto ranges = partition_;
  pipeline_ = std::make_unique<PipelineRank>(
      program_, rank_, world,
      [task_ref, ranges, &layout](int stage) {
        const nn::LayerList all = task_ref->BuildLayers();
        const LayerRange& r = ranges[layout.chunk_of(stage)];
        return std::make_unique<nn::LayerStack>(
            nn::LayerList(all.begin() + r.begin, all.begin() + r.end));
      },
      at::TensorOptions().dtype(at::kFloat));
  for (const auto& [index, stage] : pipeline_->stages()) {
    stage->set_recompute(config_.recompute == "full");
  }
  grad_sync_ = std::make_unique<GradSync>(world, Holders(layout, layers, partition_));
  clock_origin_ = SharedClockOrigin(world);
  recorder_ = std::make_unique<StepRecorder>(rank_, layout.num_ranks(), clock_origin_);
  recorder_->Attach(pipeline_->executor());
  if (world != nullptr && world->world_size() > 1) {
    const int64_t samples = (config_.batch_size + config_.microbatches - 1) / config_.microbatches;
    hop_s_ = MeasureHopLatency(*world, 4 * samples * config_.seq_len * config_.hidden, 20);
  }
}

at::Tensor Trainer::SumOverRanks(at::Tensor t) {
  if (world_ == nullptr || world_->world_size() == 1) return t;
  std::vector<at::Tensor> shared = {t};
  world_->AllReduceSum(shared);
  return shared[0];
}

StepMetrics Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  const NamedTensors params = Parameters();
  for (const auto& [name, p] : params) p.mutable_grad() = at::Tensor();
  const Batch batch = task_->TrainBatch(step_);
  recorder_->BeginStep();
  const double pipeline_start = Executor::Now() - clock_origin_;
  const double local_loss = pipeline_->Step(SplitBatch(batch, config_.microbatches));
  const double pipeline_end = Executor::Now() - clock_origin_;
  peak_step_bytes_ = std::max(peak_step_bytes_, recorder_->PeakBytes());

  double phase = Executor::Now();
  grad_sync_->SumShared(params);
  recorder_->Phase("sum shared grads", phase);
  StepMetrics m;
  phase = Executor::Now();
  m.grad_norm = grad_sync_->GlobalNorm(params);
  recorder_->Phase("grad norm", phase);
  // The loss travels with every send's posting time, which the comm breakdown needs, and
  // with every rank's start and end of the pipeline. It is summed before the update, so
  // that every rank knows whether the step is finite.
  phase = Executor::Now();
  const Layout& layout = program_.layout;
  std::vector<double> shared = SendPostTimes(layout, recorder_->step());
  const size_t posts = shared.size();
  const int p = layout.num_ranks();
  shared.resize(posts + 2 * p, 0.0);
  shared[posts + 2 * rank_] = pipeline_start;
  shared[posts + 2 * rank_ + 1] = pipeline_end;
  shared.push_back(local_loss);
  const at::Tensor sums = SumOverRanks(at::tensor(shared, at::kDouble));
  shared.assign(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel());
  m.loss = shared.back();
  double first = shared[posts], last = shared[posts + 1];
  for (int r = 1; r < p; ++r) {
    first = std::min(first, shared[posts + 2 * r]);
    last = std::max(last, shared[posts + 2 * r + 1]);
  }
  shared.resize(posts);
  recorder_->Phase("all-reduce loss", phase);
  m.step = step_ + 1;
  m.lr = schedule_.At(m.step);
  m.skipped = !std::isfinite(m.loss) || !std::isfinite(m.grad_norm);
  CONVEYOR_CHECK(!m.skipped || config_.skip_nonfinite_steps)
      << "step " << m.step << ": the loss is " << m.loss << " and the gradient norm " << m.grad_norm
      << "; stopping before the update (a learning rate too high, or weights "
      << "that hold NaN or inf; --skip-nonfinite-steps skips such steps instead)";
  phase = Executor::Now();
  if (!m.skipped) {
    if (config_.clip > 0 && m.grad_norm > config_.clip) {
      GradSync::Scale(params, config_.clip / (m.grad_norm + 1e-6));
    }
    optimizer_.Step(params, m.lr, m.step);
  }
  step_ = m.step;
  recorder_->Phase("optimizer", phase);
  Account(BreakDownComm(layout, recorder_->step(), rank_, shared), last - first);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.tokens_per_s = task_->TokensPerBatch() / m.seconds;
  return m;
}

void Trainer::Account(const CommBreakdown& comm, double pipeline_s) {
  // This process's first step warms up allocators and connections: its sums are replaced
  // by the later steps' as soon as there are any.
  if (++steps_run_ == 2) {
    op_time_.clear();
    totals_ = StepStats{};
    comm_totals_ = CommBreakdown{};
    pipeline_total_s_ = 0;
  }
  pipeline_total_s_ += pipeline_s;
  if (steps_run_ >= 2) ++measured_steps_;
  for (const Span& s : recorder_->step().spans) {
    if (s.kind != SpanKind::kRun) continue;
    auto& [seconds, count] = op_time_[{s.action.stage, s.action.op}];
    seconds += s.end - s.start;
    ++count;
  }
  const StepStats& stats = pipeline_->executor().last_stats();
  totals_.seconds += stats.seconds;
  totals_.compute_s += stats.compute_s;
  totals_.comm_wait_s += stats.comm_wait_s;
  totals_.post_s += stats.post_s;
  totals_.sent_bytes += stats.sent_bytes;
  comm_totals_ += comm;
}

EvalMetrics Trainer::Evaluate() {
  EvalMetrics m;
  m.step = step_;
  double loss = 0, correct = 0, counted = 0;
  const std::vector<Batch> batches = task_->EvalBatches();
  for (const Batch& batch : batches) {
    const int mbs = std::min<int>(config_.microbatches, batch.inputs.size(0));
    CONVEYOR_CHECK(program_.layout.directions() == 1 || mbs >= 2)
        << "evaluation batches need at least 2 samples for two pipeline directions";
    const std::vector<MicroBatch> split = SplitBatch(batch, mbs);
    const Executor::Inference result = Infer(split);
    loss += result.loss;
    if (task_->has_accuracy()) {
      for (const auto& [index, logits] : result.outputs) {
        correct += task_->CountCorrect(logits, split[index]);
      }
    }
    counted += static_cast<double>(batch.inputs.size(0));
  }
  const at::Tensor sums = SumOverRanks(at::tensor(std::vector<double>{loss, correct}, at::kDouble));
  m.loss = sums[0].item<double>() / static_cast<double>(batches.size());
  if (task_->has_accuracy()) m.accuracy = sums[1].item<double>() / counted;
  return m;
}

std::vector<RankMetrics> Trainer::GatherRankMetrics() {
  const Layout& layout = program_.layout;
  const int p = layout.num_ranks();
  const double n = static_cast<double>(std::max<int64_t>(measured_steps_, 1));
  std::vector<double> mine = {totals_.seconds / n,
                              totals_.compute_s / n,
                              totals_.comm_wait_s / n,
                              comm_totals_.transfer_wait_s / n,
                              comm_totals_.dependency_wait_s / n,
                              totals_.post_s / n,
                              comm_totals_.overlap_fraction(),
                              static_cast<double>(totals_.sent_bytes) / n,
                              static_cast<double>(peak_step_bytes_)};
  // Then the bytes a forward leaves allocated, per stage (zero for other ranks' stages).
  const int first_stage_column = static_cast<int>(mine.size());
  mine.resize(mine.size() + layout.num_stages(), 0.0);
  for (const auto& [stage, bytes] : recorder_->ForwardBytes()) {
    mine[first_stage_column + stage] = bytes;
  }
  const int64_t columns = static_cast<int64_t>(mine.size());
  at::Tensor table = at::zeros({p, columns}, at::kDouble);
  table[rank_] = at::tensor(mine, at::kDouble);
  table = SumOverRanks(table);
  at::Tensor stage_bytes = table.sum(0).slice(0, first_stage_column);
  const std::vector<double> forward_bytes(stage_bytes.data_ptr<double>(),
                                          stage_bytes.data_ptr<double>() + stage_bytes.numel());
  // Counted from F until B or W, like the simulator's default.
  const std::vector<double> peaks = PeakActivations(program_, 1, 1);
  const std::vector<double> peak_bytes = PeakActivations(program_, forward_bytes, 1);
  std::vector<RankMetrics> ranks;
  for (int r = 0; r < p; ++r) {
    auto cell = [&](int column) { return table[r][column].item<double>(); };
    RankMetrics m;
    m.rank = r;
    m.step_s = cell(0);
    m.compute_s = cell(1);
    m.comm_wait_s = cell(2);
    m.transfer_wait_s = cell(3);
    m.dependency_wait_s = cell(4);
    m.post_s = cell(5);
    m.comm_overlap = cell(6);
    m.sent_bytes = cell(7);
    m.peak_activation_bytes = cell(8);
    m.idle_s = std::max(0.0, m.step_s - m.compute_s);
    m.bubble_fraction = m.step_s > 0 ? m.idle_s / m.step_s : 0;
    m.predicted_peak_microbatches = peaks[r];
    m.predicted_peak_activation_bytes = peak_bytes[r];
    ranks.push_back(m);
  }
  return ranks;
}

double MeasuredBubble(const std::vector<RankMetrics>& ranks, double pipeline_s) {
  double compute = 0;
  for (const RankMetrics& r : ranks) compute += r.compute_s;
  const double capacity = static_cast<double>(ranks.size()) * pipeline_s;
  return capacity > 0 ? std::max(0.0, 1 - compute / capacity) : 0;
}

double ExposedCommFraction(const std::vector<RankMetrics>& ranks) {
  double transfer = 0, step = 0;
  for (const RankMetrics& r : ranks) transfer += r.transfer_wait_s, step += r.step_s;
  return step > 0 ? transfer / step : 0;
}

CostModel Trainer::MeasuredCosts() {
  // Mean seconds of F, B, I, W per stage; stages live on different ranks, so sum the table.
  constexpr Op kOps[] = {Op::kForward, Op::kBackward, Op::kBackwardInput, Op::kBackwardWeight};
  const int stages = program_.layout.num_stages();
  at::Tensor table = at::zeros({stages, 4, 2}, at::kDouble);
  for (const auto& [key, value] : op_time_) {
    for (int k = 0; k < 4; ++k) {
      if (key.second != kOps[k]) continue;
      table[key.first][k][0] = value.first;
      table[key.first][k][1] = static_cast<double>(value.second);
    }
  }
  table = SumOverRanks(table);
  CostModel costs;
  costs.comm_latency = hop_s_;
  for (int s = 0; s < stages; ++s) {
    auto mean = [&](int k) {
      const double count = table[s][k][1].item<double>();
      return count > 0 ? table[s][k][0].item<double>() / count : -1.0;
    };
    StageCost c;
    c.f = std::max(0.0, mean(0));
    c.b = mean(1);
    c.i = std::max(0.0, mean(2));
    c.w = std::max(0.0, mean(3));
    costs.stages.push_back(c);
  }
  return costs;
}

double Trainer::PredictedBubble() {
  return Simulate(program_, MeasuredCosts(), SimOptions{1}).bubble_fraction;
}

double Trainer::PredictedPipelineSeconds() {
  return Simulate(program_, MeasuredCosts(), SimOptions{1}).makespan;
}

Timeline Trainer::PredictedTimeline() {
  Timeline timeline = Simulate(program_, MeasuredCosts(), SimOptions{1}).timeline;
  timeline.time_unit = "s";
  return timeline;
}

Executor::Inference Trainer::Infer(const std::vector<MicroBatch>& mbs) {
  const int m = static_cast<int>(mbs.size());
  const Program program = Lower(BuildForwardOnly(SameLayoutWith(program_.layout, m)));
  std::map<int, Stage*> stages;
  for (const auto& [index, stage] : pipeline_->stages()) stages[index] = stage.get();
  Executor executor(program, rank_, world_, stages, at::TensorOptions().dtype(at::kFloat));
  return executor.RunInference(mbs);
}

at::Tensor Trainer::NextTokens(const at::Tensor& inputs, double temperature, uint64_t seed) {
  // Two directions need two micro-batches: the second carries a copy, its result unused.
  const int m = program_.layout.directions();
  std::vector<MicroBatch> mbs(m);
  for (int i = 0; i < m; ++i) {
    mbs[i].index = i;
    mbs[i].inputs = inputs;
  }
  const Executor::Inference result = Infer(mbs);
  at::Tensor tokens = at::zeros({inputs.size(0)}, at::kLong);
  auto it = result.outputs.find(0);
  if (it != result.outputs.end()) {
    at::Tensor logits = it->second.select(1, it->second.size(1) - 1);  // (n, V)
    if (temperature <= 0) {
      tokens = logits.argmax(-1);
    } else {
      at::Generator gen = nn::LayerGenerator(seed, static_cast<int>(inputs.size(1)));
      tokens = at::multinomial((logits / temperature).softmax(-1), 1, false, gen).squeeze(-1);
    }
  }
  return SumOverRanks(tokens);  // only the rank with the last stage contributes
}

}  // namespace conveyor
