#include "conveyor/runtime/executor.h"

#include <ATen/ATen.h>

#include <chrono>
#include <exception>
#include <sstream>
#include <thread>

#include "conveyor/comm/overlap_lane.h"

namespace conveyor {

double Executor::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Executor::Emit(const Action& a, SpanKind kind, double start, double end) {
  const double seconds = end - start;
  switch (kind) {
    case SpanKind::kRun:
      stats_.compute_s += seconds;
      break;
    case SpanKind::kPost:
      stats_.post_s += seconds;
      break;
    case SpanKind::kWait:
      stats_.comm_wait_s += seconds;
      break;
  }
  if (hook_) hook_(Span{rank_, a, start, end, kind});
}

Executor::RunStart Executor::StartRun() { return {Now(), timer_.active() ? timer_.Mark() : -1}; }

void Executor::EndRun(const Action& a, const RunStart& start) {
  if (start.mark >= 0) run_marks_.push_back({a, start.mark, timer_.Mark()});
  Emit(a, SpanKind::kRun, start.host, Now());
}

void Executor::ResolveDeviceRuns() {
  if (run_marks_.empty()) return;
  const std::vector<double> before_last = timer_.Resolve();  // waits for the last compute
  const double last = Now();
  stats_.compute_s = 0;
  for (const RunMarks& r : run_marks_) {
    device_runs_.push_back(Span{rank_, r.action, last - before_last.at(r.start),
                                last - before_last.at(r.end), SpanKind::kRun});
    stats_.compute_s += device_runs_.back().end - device_runs_.back().start;
  }
  run_marks_.clear();
}

Executor::Executor(const Program& program, int rank, Transport* transport,
                   std::map<int, Stage*> stages, at::TensorOptions activation_options)
    : program_(program),
      rank_(rank),
      transport_(transport),
      stages_(std::move(stages)),
      activation_options_(activation_options),
      timer_(activation_options.device()) {
  const Layout& layout = program.layout;
  CONVEYOR_CHECK(rank >= 0 && rank < layout.num_ranks())
      << "rank " << rank << " is outside the program's " << layout.num_ranks() << " ranks";
  for (int s : layout.stages_of(rank)) {
    CONVEYOR_CHECK(stages_.count(s) && stages_[s] != nullptr)
        << "rank " << rank << " must hold stage " << s << " but was not given it";
  }
  CONVEYOR_CHECK(stages_.size() == layout.stages_of(rank).size())
      << "rank " << rank << " was given " << stages_.size() << " stages, the layout puts "
      << layout.stages_of(rank).size() << " on it";
  CONVEYOR_CHECK(transport != nullptr || !program.has_comms())
      << "rank " << rank << ": the program communicates but no transport was given";
  if (transport != nullptr) {
    CONVEYOR_CHECK(transport->world_size() == layout.num_ranks() && transport->rank() == rank)
        << "the program needs " << layout.num_ranks() << " ranks (this is rank " << rank
        << ") but the transport has " << transport->world_size() << " (this is rank "
        << transport->rank() << ")";
  }
}

Stage& Executor::StageAt(int stage) { return *stages_.at(stage); }

uint32_t Executor::Tag(bool gradient, int stage, int microbatch) const {
  const uint64_t tag =
      (static_cast<uint64_t>(microbatch) * program_.layout.num_stages() + stage) * 2 + gradient;
  CONVEYOR_ASSERT(tag < (1ull << 31)) << "message tag overflow";
  return static_cast<uint32_t>(tag);
}

at::Tensor Executor::Take(std::map<Key, Pending>& from, Key key, const Action& recv) {
  auto it = from.find(key);
  CONVEYOR_ASSERT(it != from.end()) << "no input for " << recv << " was received or handed over";
  Pending pending = std::move(it->second);
  from.erase(it);
  if (pending.work) {
    const double start = Now();
    pending.work->Wait();
    Emit(recv, SpanKind::kWait, start, Now());
  }
  return pending.buffer;
}

void Executor::set_overlap_pairs(bool overlap) {
  CONVEYOR_CHECK(!overlap || activation_options_.device().is_cpu())
      << "overlapped pairs run on the CPU only, not " << activation_options_.device();
  overlap_pairs_ = overlap;
}

at::Tensor Executor::ForwardInput(const Action& a, const MicroBatch& mb) {
  const int s = a.stage;
  return StageAt(s).is_first() ? mb.inputs
                               : Take(activations_, {s, mb.index}, Action{Op::kRecvF, s, mb.index});
}

void Executor::RunForward(const Action& a, const MicroBatch& mb) {
  Stage& stage = StageAt(a.stage);
  const at::Tensor input = ForwardInput(a, mb);
  const RunStart start = StartRun();
  at::Tensor output = inference_ ? stage.Infer(mb, input) : stage.Forward(mb, input);
  EndRun(a, start);
  PlaceOutput(a, mb, output);
}

void Executor::PlaceOutput(const Action& a, const MicroBatch& mb, const at::Tensor& output) {
  const int s = a.stage;
  const Layout& layout = program_.layout;
  const int next = layout.next_stage(s);
  if (next < 0) {
    if (inference_ && keep_outputs_) last_outputs_[mb.index] = output;
    return;
  }
  if (layout.rank_of(next) == rank_) {
    activations_[{next, mb.index}] = Pending{output, nullptr};
  } else {
    outputs_to_send_[{s, mb.index}] = output;
  }
}

void Executor::RunBackward(const Action& a, const MicroBatch& mb) {
  const int s = a.stage;
  Stage& stage = StageAt(s);
  const Layout& layout = program_.layout;
  at::Tensor grad_output;
  if (!stage.is_last()) {
    grad_output = Take(gradients_, {s, mb.index}, Action{Op::kRecvB, s, mb.index});
  }
  const RunStart start = StartRun();
  at::Tensor grad_input = a.op == Op::kBackward ? stage.Backward(mb, grad_output)
                                                : stage.BackwardInput(mb, grad_output);
  EndRun(a, start);
  const int prev = layout.prev_stage(s);
  if (prev < 0) return;
  CONVEYOR_ASSERT(grad_input.defined()) << "stage " << s << " produced no input gradient";
  if (layout.rank_of(prev) == rank_) {
    gradients_[{prev, mb.index}] = Pending{grad_input, nullptr};
  } else {
    grads_to_send_[{s, mb.index}] = grad_input;
  }
}

void Executor::Run(const Action& a, const std::vector<MicroBatch>& mbs) {
  const Layout& layout = program_.layout;
  auto mb = [&](int index) -> const MicroBatch& { return mbs.at(index); };
  switch (a.op) {
    case Op::kForward:
      RunForward(a, mb(a.microbatch));
      break;
    case Op::kBackward:
    case Op::kBackwardInput:
      RunBackward(a, mb(a.microbatch));
      break;
    case Op::kBackwardWeight: {
      const RunStart start = StartRun();
      StageAt(a.stage).BackwardWeight(mb(a.microbatch));
      EndRun(a, start);
      break;
    }
    case Op::kOverlapFB: {
      // The forward half's output leaves at once instead of waiting for the backward half,
      // and its SEND_F in the program then finds it already posted.
      const Action forward = a.ForwardHalf(), backward = a.BackwardHalf();
      const auto send_early = [&] {
        const Action send{Op::kSendF, forward.stage, forward.microbatch};
        if (outputs_to_send_.count({forward.stage, forward.microbatch})) {
          Run(send, mbs);
          early_sends_.insert({forward.stage, forward.microbatch});
        }
      };
      if (overlap_pairs_ && forward.stage != backward.stage) {
        RunPairAtOnce(forward, backward, mbs);
        send_early();
      } else {
        Run(forward, mbs);
        send_early();
        Run(backward, mbs);
      }
      break;
    }
    case Op::kRecvF: {
      const double start = Now();
      const int prev = layout.prev_stage(a.stage);
      at::Tensor buffer =
          at::empty(StageAt(a.stage).module().InputShape(mb(a.microbatch)), activation_options_);
      activations_[{a.stage, a.microbatch}] = Pending{
          buffer, transport_->Recv(buffer, layout.rank_of(prev), Tag(false, prev, a.microbatch))};
      Emit(a, SpanKind::kPost, start, Now());
      break;
    }
    case Op::kRecvB: {
      const double start = Now();
      const int next = layout.next_stage(a.stage);
      at::Tensor buffer =
          at::empty(StageAt(a.stage).module().OutputShape(mb(a.microbatch)), activation_options_);
      gradients_[{a.stage, a.microbatch}] = Pending{
          buffer, transport_->Recv(buffer, layout.rank_of(next), Tag(true, next, a.microbatch))};
      Emit(a, SpanKind::kPost, start, Now());
      break;
    }
    case Op::kSendF:
    case Op::kSendB: {
      const bool gradient = a.op == Op::kSendB;
      if (!gradient && early_sends_.erase({a.stage, a.microbatch})) break;
      const double start = Now();
      std::map<Key, at::Tensor>& from = gradient ? grads_to_send_ : outputs_to_send_;
      auto it = from.find({a.stage, a.microbatch});
      CONVEYOR_ASSERT(it != from.end()) << "nothing computed to send";
      const int peer = gradient ? layout.prev_stage(a.stage) : layout.next_stage(a.stage);
      at::Tensor data = it->second.contiguous();
      from.erase(it);
      sends_.emplace_back(
          transport_->Send(data, layout.rank_of(peer), Tag(gradient, a.stage, a.microbatch)), a);
      stats_.sent_bytes += static_cast<int64_t>(data.nbytes());
      if (!gradient) StageAt(a.stage).ReleaseOutput(a.microbatch);
      // A send the transport already finished (shared memory) frees its tensor now.
      std::erase_if(sends_, [](const auto& send) { return send.first->IsCompleted(); });
      Emit(a, SpanKind::kPost, start, Now());
      break;
    }
    case Op::kReduceGrad:
      if (reduce_grad_hook_) reduce_grad_hook_(StageAt(a.stage));
      break;
  }
}

void Executor::RunPairAtOnce(const Action& forward, const Action& backward,
                             const std::vector<MicroBatch>& mbs) {
  const MicroBatch& mb = mbs.at(forward.microbatch);
  Stage& stage = StageAt(forward.stage);
  const at::Tensor input = ForwardInput(forward, mb);  // a message waited for here
  at::Tensor output;
  double start = 0, end = 0;
  std::exception_ptr failed;
  std::thread helper([&] {
    const OverlapLaneScope lane(1);
    try {
      start = Now();
      output = stage.Forward(mb, input);
      end = Now();
    } catch (...) {
      failed = std::current_exception();
    }
  });
  try {
    RunBackward(backward, mbs.at(backward.microbatch));
  } catch (...) {
    helper.join();
    throw;
  }
  helper.join();
  if (failed) std::rethrow_exception(failed);
  Emit(forward, SpanKind::kRun, start, end);
  PlaceOutput(forward, mb, output);
}

void Executor::Execute(const std::vector<MicroBatch>& microbatches) {
  CONVEYOR_CHECK(static_cast<int>(microbatches.size()) == program_.layout.num_microbatches())
      << "the program runs " << program_.layout.num_microbatches() << " micro-batches, the step "
      << "was given " << microbatches.size();
  for (auto& [index, stage] : stages_) stage->ResetStep();
  const double start = Now();
  stats_ = StepStats{};
  device_runs_.clear();
  Action current;
  try {
    for (const Action& a : program_.ranks[rank_]) {
      current = a;
      CONVEYOR_CHECK(!inference_ || a.op == Op::kForward || IsComm(a.op))
          << "an inference program holds only forwards and comms, not " << a;
      Run(a, microbatches);
    }
    for (auto& [work, action] : sends_) {
      current = action;
      const double wait_start = Now();
      work->Wait();
      Emit(action, SpanKind::kWait, wait_start, Now());
    }
    ResolveDeviceRuns();
    stats_.seconds = Now() - start;
  } catch (const std::exception& e) {
    sends_.clear();
    activations_.clear();
    gradients_.clear();
    outputs_to_send_.clear();
    grads_to_send_.clear();
    early_sends_.clear();
    timer_.Clear();
    run_marks_.clear();
    std::ostringstream where;
    where << "rank " << rank_ << ", stage " << current.stage << ", micro-batch "
          << current.microbatch << ", action " << current << ": ";
    // The context is added, the kind kept; a foreign error (libtorch's, the allocator's)
    // becomes a StepError with its first line (libtorch appends a backtrace).
    if (const auto* comm = dynamic_cast<const CommError*>(&e)) {
      throw CommError(where.str() + e.what(), comm->caused_by_peer());
    }
    if (dynamic_cast<const UserError*>(&e) != nullptr) throw UserError(where.str() + e.what());
    if (dynamic_cast<const InternalError*>(&e) != nullptr) {
      throw InternalError(where.str() + e.what());
    }
    throw StepError(where.str() + (dynamic_cast<const Error*>(&e) ? e.what() : Brief(e)));
  }
  sends_.clear();
  CONVEYOR_ASSERT(activations_.empty() && gradients_.empty() && outputs_to_send_.empty() &&
                  grads_to_send_.empty() && early_sends_.empty())
      << "rank " << rank_ << " ends the step with unconsumed tensors";
}

double Executor::RunStep(const std::vector<MicroBatch>& microbatches) {
  inference_ = false;
  Execute(microbatches);
  double loss = 0;
  for (auto& [index, stage] : stages_) {
    if (stage->is_last()) loss += stage->loss();
  }
  return loss;
}

Executor::Inference Executor::RunInference(const std::vector<MicroBatch>& microbatches,
                                           bool keep_outputs) {
  inference_ = true;
  keep_outputs_ = keep_outputs;
  last_outputs_.clear();
  Execute(microbatches);
  inference_ = false;
  Inference result;
  result.outputs = std::move(last_outputs_);
  last_outputs_.clear();
  for (auto& [index, stage] : stages_) {
    if (stage->is_last()) result.loss += stage->loss();
  }
  return result;
}

}  // namespace conveyor
